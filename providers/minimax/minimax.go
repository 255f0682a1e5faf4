// Package minimax is the MiniMax adapter: MiniMax's Responses endpoint
// driven through `codex app-server` and the shared codexharness, with its
// own provider id, label, endpoint, key variable, model catalog and an
// isolated CODEX_HOME so it never touches the user's Codex login (S19). It
// imports providers, providers/runner and providers/codexharness only.
package minimax

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/codexharness"
	"remote/providers/codexlaunch"
	"remote/providers/probe"
	"remote/providers/runner"
)

// Defaults of Options.
const (
	DefaultBaseURL       = "https://api.minimax.io/v1"
	DefaultModel         = "MiniMax-M2.7"
	KeyVar               = "MINIMAX_API_KEY"
	ContainerCodexHome   = "/root/.minimax"
	providerKey          = "minimax" // [model_providers.minimax]
	defaultContextWindow = 204800
)

// DefaultModels is the catalog declared when Options.Models is empty, with
// each model's context window (the origin's values; the live catalog the
// origin fetched is the operator's to configure through Options.Models).
var DefaultModels = map[string]int{
	"MiniMax-M2.7": 204800,
	"MiniMax-M3":   1000000,
}

// protected are the variables no project secret or runtime variable may
// set: the adapter owns them.
var protected = []string{KeyVar, "OPENAI_API_KEY", "HOME", "CODEX_HOME"}

// ErrNoAPIKey means no MiniMax API key is configured.
var ErrNoAPIKey = errors.New("no MiniMax API key configured")

// ErrNotWired is providers.ErrNotWired (kept so callers of this adapter
// need not import providers to test for it).
var ErrNotWired = providers.ErrNotWired

// ErrUnknownModel means the request named a model outside the catalog.
var ErrUnknownModel = errors.New("model not in the MiniMax catalog")

// Options are MiniMax's own settings beside the common AdapterConfig.
type Options struct {
	// BaseURL is the Responses endpoint (model_providers.minimax.base_url);
	// DefaultBaseURL when empty.
	BaseURL string
	// APIKey is the managed key. It reaches the CLI only as MINIMAX_API_KEY
	// in its environment, never in arguments, events or errors. Empty falls
	// back to AdapterConfig.Env[MINIMAX_API_KEY].
	APIKey string
	// HostHome is the daemon-owned CODEX_HOME of host runs; empty uses
	// $HOME/.minimax of the daemon's user.
	HostHome string
	// Models maps each offered model to its context window; DefaultModels
	// when empty. DefaultModel must be one of them (DefaultModel const when
	// empty).
	Models       map[string]int
	DefaultModel string
	// InterruptTimeout bounds the wait for an interrupted turn to end (S22);
	// codexharness.DefaultInterval when zero.
	InterruptTimeout time.Duration
}

// NoKeyAction is the readiness line of a MiniMax without an API key.
const NoKeyAction = "MiniMax has no API key: set " + KeyVar + " in [providers.minimax] env of the daemon's config"

// Provider runs MiniMax through the Codex app-server. It is safe for
// concurrent runs.
type Provider struct {
	cfg   providers.AdapterConfig
	opts  Options
	log   hclog.Logger
	probe *probe.Probe
}

var (
	_ providers.Provider          = (*Provider)(nil)
	_ providers.ReadinessChecker  = (*Provider)(nil)
	_ providers.CredentialChecker = (*Provider)(nil)
)

// New returns the MiniMax adapter. cfg.Binary defaults to "codex" (the
// Codex CLI is the harness); cfg.Args are appended after the adapter's own
// `-c` overrides.
func New(cfg providers.AdapterConfig, opts Options) *Provider {
	if cfg.Binary == "" {
		cfg.Binary = "codex"
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if len(opts.Models) == 0 {
		opts.Models = DefaultModels
	}
	if opts.DefaultModel == "" {
		opts.DefaultModel = DefaultModel
	}
	if opts.APIKey == "" {
		opts.APIKey = cfg.Env[KeyVar]
	}
	p := &Provider{cfg: cfg, opts: opts, log: runner.AdapterLogger(cfg.Logger, "minimax")}
	p.probe = &probe.Probe{
		Launcher: cfg.Host, Binary: cfg.Binary, Tested: providers.TestedCodexVersion,
		Env:          func() []string { return runner.HostEnv(withoutProtected(cfg.Env)) },
		ParseVersion: parseVersion,
		Auth: func(context.Context, probe.Host) probe.AuthStatus {
			if a := p.MissingCredential(); a != "" {
				return probe.AuthStatus{Auth: providers.AuthNone, Action: a}
			}
			return probe.AuthStatus{LoggedIn: true, Auth: providers.AuthAPIKey}
		},
		Install: "install Codex, MiniMax's harness (npm install -g @openai/codex@" + providers.TestedCodexVersion + ") or set [providers.minimax] binary",
		TTL:     cfg.ReadyTTL,
	}
	if cfg.Host == nil {
		p.probe.Launcher = &runner.HostLauncher{}
	}
	return p
}

// parseVersion reads `codex --version` ("codex-cli 0.169.0").
func parseVersion(out string) string {
	f := strings.Fields(out)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// MissingCredential is NoKeyAction when no API key is configured: no run
// can start without one, on the host or in a container.
func (p *Provider) MissingCredential() string {
	if p.opts.APIKey == "" {
		return NoKeyAction
	}
	return ""
}

// Readiness reports the host CLI (the Codex harness: found, version) and
// the API key: without one MiniMax is not ready, and the action names the
// variable to set.
func (p *Provider) Readiness(ctx context.Context) providers.Readiness {
	if a := p.MissingCredential(); a != "" {
		// The key's line comes first, even when the harness is missing too:
		// without it no run starts anywhere.
		r := p.probe.Readiness(ctx)
		r.Ready, r.LoggedIn, r.Auth, r.Action = false, false, providers.AuthNone, a
		return r
	}
	return p.probe.Readiness(ctx)
}

// ID returns providers.MiniMax.
func (p *Provider) ID() providers.ProviderID { return providers.MiniMax }

// Capabilities declares the catalog, resume, native fork, plan mode,
// `$skill` mentions and approvals (the Codex app-server's); MiniMax has no credential sync (the key is managed).
func (p *Provider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	models := make([]string, 0, len(p.opts.Models))
	for m := range p.opts.Models {
		models = append(models, m)
	}
	sort.Strings(models)
	return providers.Capabilities{
		Label: "MiniMax", Models: models, DefaultModel: p.opts.DefaultModel,
		Efforts: []string{"low", "medium", "high"},
		Resume:  true, Fork: true, PlanMode: true, Skills: providers.SkillsDollarMention,
		Approvals: true,
	}, nil
}

// Args returns the app-server arguments for model: the minimax model
// provider and its endpoint as `-c` overrides (no key), then cfg.Args.
func (p *Provider) Args(model string) []string {
	window := p.opts.Models[model]
	if window <= 0 {
		window = defaultContextWindow
	}
	q := strconv.Quote
	pre := "model_providers." + providerKey + "."
	args := []string{"app-server",
		"-c", "model_provider=" + q(providerKey),
		"-c", "model=" + q(model),
		"-c", "model_context_window=" + strconv.Itoa(window),
		"-c", pre + "name=" + q("MiniMax"),
		"-c", pre + "base_url=" + q(p.opts.BaseURL),
		"-c", pre + "env_key=" + q(KeyVar),
		"-c", pre + "wire_api=" + q("responses"),
	}
	return append(args, p.cfg.Args...)
}

// HostHome returns the CODEX_HOME of host runs.
func (p *Provider) HostHome() (string, error) {
	if p.opts.HostHome != "" {
		return p.opts.HostHome, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("minimax: resolve home directory for CODEX_HOME: %w", err)
	}
	return filepath.Join(home, ".minimax"), nil
}

// Run executes one turn on the host (req.ProjectID empty) or in the
// project's container; see codexharness.Run for the event and error
// contract.
func (p *Provider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	if p.opts.APIKey == "" && req.ProjectID == "" {
		// A project run may use the project's own key (a project secret).
		return fmt.Errorf("minimax: %w (set %s)", ErrNoAPIKey, KeyVar)
	}
	model := req.Model
	if model == "" {
		model = p.opts.DefaultModel
	}
	if _, ok := p.opts.Models[model]; !ok {
		return fmt.Errorf("minimax: %w: %q", ErrUnknownModel, model)
	}
	inContainer := req.ProjectID != ""
	approval, sandbox, err := codexharness.ResolvePolicies(req.Preferences, inContainer)
	if err != nil {
		return fmt.Errorf("minimax: %w", err)
	}
	settings := codexharness.Settings{
		Model: model, ApprovalPolicy: approval, Sandbox: sandbox,
		// MiniMax has no service tiers.
		Effort: req.Preferences.ReasoningEffort, Plan: req.Mode == providers.ModePlan,
	}
	userEnv := withoutProtected(p.cfg.Env)
	runtimeEnv := withoutProtected(req.RuntimeEnv)
	// No credential sync after a project run: the key is managed (S19).
	return codexlaunch.Run(ctx, codexlaunch.Spec{
		Name: "minimax", Cfg: p.cfg, NotWired: ErrNotWired,
		Args:     p.Args(model),
		Settings: settings,
		Harness: codexharness.Config{Provider: providers.MiniMax, Logger: p.log, InterruptTimeout: p.opts.InterruptTimeout,
			ExitGrace: p.cfg.ExitGrace},
		HostEnv: func() ([]string, error) {
			home, err := p.HostHome()
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(home, 0o700); err != nil {
				return nil, fmt.Errorf("minimax: create CODEX_HOME %s: %w", home, err)
			}
			extra := map[string]string{}
			for k, v := range userEnv {
				extra[k] = v
			}
			for k, v := range runtimeEnv {
				extra[k] = v
			}
			extra["CODEX_HOME"] = home
			extra[KeyVar] = p.opts.APIKey
			if h := p.cfg.Env["HOME"]; h != "" {
				extra["HOME"] = h
			}
			return runner.WithoutEnv(runner.HostEnv(extra), "OPENAI_API_KEY"), nil
		},
		Container: runner.ContainerSpec{
			Fixed:           userEnv,
			Forced:          map[string]string{"HOME": runner.ContainerHome, "CODEX_HOME": ContainerCodexHome, "OPENAI_API_KEY": ""},
			Runtime:         runtimeEnv,
			ExcludedSecrets: protected,
		},
		// The operator's key reaches a project only as [providers.minimax]
		// project_env allows; otherwise the project's own secret may.
		OperatorKeys: map[string]string{KeyVar: p.opts.APIKey},
	}, req, emit)
}

// withoutProtected copies m without the variables the adapter owns.
func withoutProtected(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range protected {
		delete(out, k)
	}
	return out
}
