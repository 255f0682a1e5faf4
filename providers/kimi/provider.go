package kimi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/runner"
)

// DefaultBinary is the CLI run when the config names none.
const DefaultBinary = "kimi"

// CredentialSyncTimeout bounds the best-effort credential sync after a
// successful project run (S12).
const CredentialSyncTimeout = 30 * time.Second

// ErrNotWired means a project run was requested but the adapter has no
// container launchers or preparer.
var ErrNotWired = errors.New("kimi: project execution not configured")

// Provider runs the Kimi CLI. Create it with New.
type Provider struct {
	cfg providers.AdapterConfig
	log hclog.Logger
}

var _ providers.Provider = (*Provider)(nil)

// New returns the Kimi adapter. An empty cfg.Binary runs DefaultBinary; a
// nil cfg.Host uses a runner.HostLauncher; a nil logger discards.
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
	return &Provider{cfg: cfg, log: log.Named("kimi")}
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

// Args returns the CLI arguments for req: the prompt is positional after
// -p. A fork request has already cleared ResumeID.
func Args(req providers.RunRequest, extra []string) []string {
	args := []string{"--print", "-p", req.Prompt, "--output-format", "stream-json"}
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
	out := func(ev providers.Event) {
		if ev.Provider == "" {
			ev.Provider = providers.Kimi
		}
		if ev.ConversationID == "" {
			ev.ConversationID = req.ConversationID
		}
		if ev.RunID == "" {
			ev.RunID = req.RunID
		}
		if ev.Type == providers.EventRunCompleted && ev.Model == "" {
			ev.Model = req.Model
		}
		emit(ev)
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
		maps.Copy(env, req.RuntimeEnv)
		dir := req.Cwd
		if dir == "" {
			dir, _ = os.UserHomeDir()
		}
		launcher = p.cfg.Host
		cmd = providers.Command{Path: p.cfg.Binary, Args: Args(req, p.cfg.Args), Env: runner.HostEnv(env), Dir: dir}
	} else {
		if p.cfg.Preparer == nil || p.cfg.Containers == nil {
			return fmt.Errorf("project %s: %w", req.ProjectID, ErrNotWired)
		}
		var err error
		target, err = p.cfg.Preparer.Prepare(ctx, providers.PrepareRequest{
			Provider: providers.Kimi, ProjectID: req.ProjectID,
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
		cmd = runner.ContainerCommand(runner.ContainerSpec{
			Binary: p.cfg.Binary, Args: Args(req, p.cfg.Args),
			Fixed: fixed, Secrets: target.Secrets,
			Forced:  map[string]string{"HOME": "/root"}, // where credentials are provisioned; no secret may move it
			Runtime: req.RuntimeEnv,
		})
		launcher = p.cfg.Containers.Container(target.Container)
	}

	parser := NewParser(req.ResumeID)
	err := runner.RunProcess(ctx, launcher, cmd, parser, out, runner.ProcessOptions{Logger: p.log})
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
		sctx, cancel := context.WithTimeout(ctx, CredentialSyncTimeout)
		defer cancel()
		if err := p.cfg.Preparer.SyncCredentials(sctx, target, providers.Kimi); err != nil {
			p.log.Warn("credential sync after run failed", "project", req.ProjectID, "error", err)
		}
	}
	return nil
}
