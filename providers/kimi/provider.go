package kimi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/runner"
)

// DefaultBinary is the CLI run when the config names none.
const DefaultBinary = "kimi"

// CredentialSyncTimeout bounds the best-effort credential sync after a
// successful project run (S12).
const CredentialSyncTimeout = runner.DefaultCredentialSyncTimeout

// ErrNotWired is providers.ErrNotWired (kept so callers of this adapter
// need not import providers to test for it).
var ErrNotWired = providers.ErrNotWired

// Provider runs the Kimi CLI. Create it with New.
type Provider struct {
	cfg providers.AdapterConfig
	log hclog.Logger
}

var _ providers.Provider = (*Provider)(nil)

// New returns the Kimi adapter. An empty cfg.Binary runs DefaultBinary; a
// nil cfg.Host uses a runner.HostLauncher; a nil logger discards.
func New(cfg providers.AdapterConfig) *Provider {
	cfg = runner.HostDefaults(cfg, DefaultBinary)
	return &Provider{cfg: cfg, log: runner.AdapterLogger(cfg.Logger, "kimi")}
}

// ID returns providers.Kimi.
func (p *Provider) ID() providers.ProviderID { return providers.Kimi }

// Capabilities declares resume (no fork, no plan mode), skills as
// instructions, and credential sync.
func (p *Provider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return providers.Capabilities{
		Label:          "Kimi",
		Resume:         true,
		Skills:         providers.SkillsInstructions,
		CredentialSync: true,
	}, nil
}

// Args returns the CLI arguments for req. The prompt is not among them:
// Run writes it to the CLI's stdin, which `kimi --print` without -p reads
// as the prompt when stdin is not a terminal (MoonshotAI/kimi-cli
// src/kimi_cli/ui/print/__init__.py, Print.run; docs/en/customization/
// print-mode.md "Pass instructions via stdin"). Argv is readable by every
// local user in /proc/PID/cmdline and bounded by the kernel's 128 KiB per
// argument; stdin is neither. A fork request has already cleared ResumeID.
func Args(req providers.RunRequest, extra []string) []string {
	args := []string{"--print", "--output-format", "stream-json"}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if req.ResumeID != "" {
		args = append(args, "--session", req.ResumeID)
	}
	return append(args, extra...)
}

// Run executes one turn (S24). It returns nil on success or cancellation,
// providers.ErrSessionNotFound when the resumed session is unknown, or
// the process error with the CLI's stderr. A run that exits 0 without the
// resume hint produces no run.completed (S16).
func (p *Provider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	if req.Fork {
		// No native fork: start a fresh session from visible history.
		req.Fork, req.ResumeID = false, ""
	}
	stamp := providers.StampEvents(emit, providers.Kimi, req)
	out := func(ev providers.Event) {
		if ev.Type == providers.EventRunCompleted && ev.Model == "" {
			ev.Model = req.Model
		}
		stamp(ev)
	}

	args := Args(req, p.cfg.Args) // the prompt goes to stdin on both sides
	launch, err := runner.ResolveLaunch(ctx, p.cfg, runner.LaunchSpec{
		Provider: providers.Kimi, NotWired: ErrNotWired, HostArgs: args, ContainerArgs: args,
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
	if err != nil {
		var pe *runner.ProcessError
		// The CLI's own words for an unknown --session id; S28 lets any
		// adapter report it as ErrSessionNotFound.
		if req.ResumeID != "" && errors.As(err, &pe) && strings.Contains(strings.ToLower(pe.Stderr), "session not found") {
			return fmt.Errorf("resume kimi session %s: %w", req.ResumeID, providers.ErrSessionNotFound)
		}
		return err
	}
	if req.ProjectID != "" {
		runner.SyncCredentials(ctx, p.cfg.Preparer, launch.Target, providers.Kimi, CredentialSyncTimeout,
			p.log.With("project", req.ProjectID), out)
	}
	return nil
}
