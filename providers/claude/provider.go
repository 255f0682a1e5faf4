package claude

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/runner"
)

// CredentialSyncTimeout bounds the best-effort credential sync after a
// successful project run (S12).
const CredentialSyncTimeout = 30 * time.Second

// ErrNotWired means a project run was requested but the adapter has no
// container launchers or preparer.
var ErrNotWired = errors.New("claude: project execution not configured")

// Provider runs Claude Code. Create it with New.
type Provider struct {
	cfg providers.AdapterConfig
	log hclog.Logger
}

var _ providers.Provider = (*Provider)(nil)

// New returns the Claude adapter. An empty cfg.Binary runs DefaultBinary;
// a nil cfg.Host uses a runner.HostLauncher; a nil logger discards.
func New(cfg providers.AdapterConfig) *Provider {
	if cfg.Binary == "" {
		cfg.Binary = DefaultBinary
	}
	if cfg.Host == nil {
		cfg.Host = &runner.HostLauncher{}
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Provider{cfg: cfg, log: log.Named("claude")}
}

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
	out := func(ev providers.Event) {
		if ev.Provider == "" {
			ev.Provider = providers.Claude
		}
		if ev.ConversationID == "" {
			ev.ConversationID = req.ConversationID
		}
		if ev.RunID == "" {
			ev.RunID = req.RunID
		}
		emit(ev)
	}
	if req.Fork && req.ResumeID == "" {
		req.Fork = false // nothing to fork: a fresh session
	}

	var (
		launcher providers.Launcher
		cmd      providers.Command
		target   providers.Target
	)
	if req.ProjectID == "" {
		env := maps.Clone(p.cfg.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, forcedEnv(req))
		maps.Copy(env, req.RuntimeEnv)
		dir := req.Cwd
		if dir == "" {
			dir, _ = os.UserHomeDir()
		}
		launcher = p.cfg.Host
		cmd = providers.Command{Path: p.cfg.Binary, Args: Args(req, p.cfg.Args, false), Env: runner.HostEnv(env), Dir: dir}
	} else {
		if p.cfg.Preparer == nil || p.cfg.Containers == nil {
			return fmt.Errorf("project %s: %w", req.ProjectID, ErrNotWired)
		}
		var err error
		target, err = p.cfg.Preparer.Prepare(ctx, providers.PrepareRequest{
			Provider: providers.Claude, ProjectID: req.ProjectID,
			EnableBrowser: req.EnableBrowser, EnableScheduleTools: req.EnableScheduleTools, Skills: req.Skills,
		}, out)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("prepare project %s: %w", req.ProjectID, err)
		}
		fixed := map[string]string{"LANG": "C.UTF-8"}
		maps.Copy(fixed, p.cfg.Env)
		forced := forcedEnv(req)
		forced["HOME"] = "/root" // where credentials are provisioned; no secret may move it
		cmd = runner.ContainerCommand(runner.ContainerSpec{
			Binary:  p.cfg.Binary,
			Args:    Args(req, p.cfg.Args, true),
			Fixed:   fixed,
			Secrets: target.Secrets,
			Forced:  forced,
			Runtime: req.RuntimeEnv,
		})
		launcher = p.cfg.Containers.Container(target.Container)
	}

	parser := NewParser(req.ResumeID)
	err := runner.RunProcess(ctx, launcher, cmd, parser, out, runner.ProcessOptions{Stdin: req.Prompt, Logger: p.log})
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
		sctx, cancel := context.WithTimeout(ctx, CredentialSyncTimeout)
		defer cancel()
		if err := p.cfg.Preparer.SyncCredentials(sctx, target, providers.Claude); err != nil {
			p.log.Warn("credential sync after run failed", "project", req.ProjectID, "error", err)
		}
	}
	return nil
}
