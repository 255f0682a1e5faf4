package claude

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/probe"
	"remote/providers/runner"
)

// CredentialSyncTimeout bounds the best-effort credential sync after a
// successful project run (S12).
const CredentialSyncTimeout = runner.DefaultCredentialSyncTimeout

// ErrNotWired is providers.ErrNotWired (kept so callers of this adapter
// need not import providers to test for it).
var ErrNotWired = providers.ErrNotWired

// Provider runs Claude Code. Create it with New.
type Provider struct {
	cfg   providers.AdapterConfig
	log   hclog.Logger
	probe *probe.Probe
}

var (
	_ providers.Provider         = (*Provider)(nil)
	_ providers.ReadinessChecker = (*Provider)(nil)
)

// New returns the Claude adapter. An empty cfg.Binary runs DefaultBinary;
// a nil cfg.Host uses a runner.HostLauncher; a nil logger discards.
func New(cfg providers.AdapterConfig) *Provider {
	cfg = runner.HostDefaults(cfg, DefaultBinary)
	p := &Provider{cfg: cfg, log: runner.AdapterLogger(cfg.Logger, "claude")}
	p.probe = &probe.Probe{
		Launcher: cfg.Host, Binary: cfg.Binary, Tested: providers.TestedClaudeVersion,
		Env:          func() []string { return runner.HostEnv(cfg.Env) },
		ParseVersion: ParseVersion,
		Auth:         authStatus,
		Install:      "install Claude Code (npm install -g @anthropic-ai/claude-code@" + providers.TestedClaudeVersion + ") or set [providers.claude] binary",
		TTL:          cfg.ReadyTTL,
	}
	return p
}

// Readiness reports the host CLI: found, version, login (`claude auth
// status`, run as the host user with the runs' environment).
func (p *Provider) Readiness(ctx context.Context) providers.Readiness { return p.probe.Readiness(ctx) }

// ID returns providers.Claude.
func (p *Provider) ID() providers.ProviderID { return providers.Claude }

// Capabilities declares resume, native fork, plan mode, slash-command
// skills, credential sync and the browser.
func (p *Provider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return providers.Capabilities{
		Label:          "Claude Code",
		Models:         slicesClone(Models),
		Efforts:        slicesClone(Efforts),
		Resume:         true,
		Fork:           true,
		PlanMode:       true,
		Skills:         providers.SkillsSlashCommand,
		CredentialSync: true,
		Browser:        true,
	}, nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// Run executes one turn (S18). It returns nil on success or cancellation,
// an error wrapping providers.ErrRunFailed after emitting run.failed,
// providers.ErrSessionNotFound when req.ResumeID names no session, or the
// process error with the CLI's stderr.
func (p *Provider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	out := providers.StampEvents(emit, providers.Claude, req)
	if req.Fork && req.ResumeID == "" {
		req.Fork = false // nothing to fork: a fresh session
	}

	launch, err := runner.ResolveLaunch(ctx, p.cfg, runner.LaunchSpec{
		Provider: providers.Claude, NotWired: ErrNotWired,
		HostArgs: Args(req, p.cfg.Args, false), ContainerArgs: Args(req, p.cfg.Args, true),
		Forced: forcedEnv(req),
	}, req, out)
	if err != nil {
		if ctx.Err() != nil {
			return nil // cancelled while preparing: a normal stop (S29)
		}
		return err
	}

	parser := NewParser(req.ResumeID)
	err = runner.RunProcess(ctx, launch.Launcher, launch.Command, parser, out, runner.ProcessOptions{Stdin: req.Prompt, Logger: p.log, ExitGrace: p.cfg.ExitGrace})
	if ctx.Err() != nil {
		return nil
	}
	if parser.SessionNotFound() && req.ResumeID != "" {
		return fmt.Errorf("resume claude session %s: %w", req.ResumeID, providers.ErrSessionNotFound)
	}
	if err != nil {
		return err
	}
	if req.ProjectID != "" {
		runner.SyncCredentials(ctx, p.cfg.Preparer, launch.Target, providers.Claude, CredentialSyncTimeout,
			p.log.With("project", req.ProjectID), out)
	}
	return nil
}
