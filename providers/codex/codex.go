// Package codex is the OpenAI Codex adapter: it runs one fresh
// `codex app-server` per turn through the shared codexharness, on the host
// for loose chats and inside the project's container for project chats
// (S13, S19–S23).
//
// Approvals and sandbox (codexharness.ResolvePolicies): by default a thread
// runs with approval "never" and sandbox "danger-full-access", as the
// origin did. A chat whose preferences ask for approvals ("on-request",
// "untrusted", "on-failure") gets them, and each one reaches the user as an
// interaction card that waits for an explicit answer (S21). The sandbox
// preference is honoured on the host; inside a container the container is
// the sandbox (Codex has no bubblewrap there), so it stays
// "danger-full-access".
//
// It imports providers, providers/runner and providers/codexharness only —
// nothing of the daemon, store or transport.
package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/codexharness"
	"remote/providers/codexlaunch"
	"remote/providers/probe"
	"remote/providers/runner"
)

// ContainerCodexHome is CODEX_HOME inside a project container.
const ContainerCodexHome = "/root/.codex"

// DefaultSyncTimeout bounds the credential sync after a project run when
// Options.SyncTimeout is zero (S12's default).
const DefaultSyncTimeout = runner.DefaultCredentialSyncTimeout

// ErrAPIKeyAuth means the host's Codex auth record is an API-key login;
// Remote only runs Codex on a ChatGPT subscription login (S13).
var ErrAPIKeyAuth = errors.New("codex auth record uses API-key authentication")

// ErrNotWired is providers.ErrNotWired (kept so callers of this adapter
// need not import providers to test for it).
var ErrNotWired = providers.ErrNotWired

// Models is the fallback model catalog, declared only when the CLI's own
// model/list cannot be read (see Capabilities); an empty RunRequest.Model
// lets Codex choose.
var Models = []string{"gpt-6.1-sol", "gpt-6-astra", "gpt-6-sol", "gpt-6-luna", "gpt-6.1-terra"}

// Efforts are the fallback reasoning efforts.
var Efforts = []string{"low", "medium", "high", "xhigh", "max", "ultra"}

// Model list caching (Options.ModelsTTL's default, and how soon a failed
// model/list is tried again).
const (
	DefaultModelsTTL  = 10 * time.Minute
	modelsRetry       = time.Minute
	modelsListTimeout = 15 * time.Second
)

// Options are Codex's own knobs beside the common AdapterConfig.
type Options struct {
	// SyncTimeout bounds the credential sync after a successful project run
	// (S12, the daemon's configured value); DefaultSyncTimeout when zero.
	SyncTimeout time.Duration
	// InterruptTimeout bounds the wait for an interrupted turn to end (S22);
	// codexharness.DefaultInterval when zero.
	InterruptTimeout time.Duration
	// RetryLimit bounds a turn that only retries (an unreachable model
	// endpoint) before the run fails; codexharness.DefaultRetryLimit when
	// zero.
	RetryLimit time.Duration
	// ModelsTTL is how long the CLI's model/list is reused;
	// DefaultModelsTTL when zero.
	ModelsTTL time.Duration
	// LoginArgs are appended to `codex login --device-auth` (tests point
	// `--experimental_issuer` at a fake issuer on loopback).
	LoginArgs []string
}

// Provider runs Codex. It is safe for concurrent runs.
type Provider struct {
	cfg   providers.AdapterConfig
	opts  Options
	log   hclog.Logger
	probe *probe.Probe

	modelsMu   sync.Mutex
	models     []string
	defModel   string
	efforts    []string
	modelsNext time.Time     // when to ask model/list again
	modelsDone chan struct{} // the model/list under way ends; nil when none
}

var (
	_ providers.Provider         = (*Provider)(nil)
	_ providers.ReadinessChecker = (*Provider)(nil)
)

// New returns the Codex adapter. cfg.Binary defaults to "codex"; cfg.Args
// are appended after `app-server` (e.g. `-c key=value` overrides); cfg.Env
// adds environment (CODEX_HOME there selects the host's Codex home, else
// $HOME/.codex). OPENAI_API_KEY is always removed (S13).
func New(cfg providers.AdapterConfig) *Provider {
	return NewWithOptions(cfg, Options{})
}

// NewWithOptions is New with Codex's own options.
func NewWithOptions(cfg providers.AdapterConfig, opts Options) *Provider {
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if cfg.Binary == "" {
		cfg.Binary = "codex"
	}
	p := &Provider{cfg: cfg, opts: opts, log: runner.AdapterLogger(cfg.Logger, "codex")}
	p.probe = &probe.Probe{
		Launcher: cfg.Host, Binary: cfg.Binary, Tested: providers.TestedCodexVersion,
		Env: func() []string {
			env, _, _ := p.hostEnv(nil)
			return env
		},
		ParseVersion: ParseVersion,
		Auth:         p.loginStatus,
		Install:      "install Codex (npm install -g @openai/codex@" + providers.TestedCodexVersion + ") or set [providers.codex] binary",
		TTL:          cfg.ReadyTTL,
	}
	if cfg.Host == nil {
		p.probe.Launcher = &runner.HostLauncher{}
	}
	return p
}

// ID returns providers.Codex.
func (p *Provider) ID() providers.ProviderID { return providers.Codex }

// Capabilities declares resume, native fork, plan mode, `$skill` mentions,
// credential sync and approvals (RunPreferences.ApprovalPolicy).
// Models, the default model and efforts are the CLI's own (model/list over
// the app-server, run as the host user), cached for ModelsTTL and then
// refreshed in the background; when that fails, the fallback Models and
// Efforts, tried again a minute later.
func (p *Provider) Capabilities(ctx context.Context, req providers.CapabilityRequest) (providers.Capabilities, error) {
	models, def, efforts := p.catalog(ctx, !req.Cached)
	return providers.Capabilities{
		Label: "Codex", Models: models, DefaultModel: def, Efforts: efforts,
		Resume: true, Fork: true, PlanMode: true, Skills: providers.SkillsDollarMention, CredentialSync: true,
		Approvals: true,
	}, nil
}

// catalog returns the cached model/list (the fallback before the first
// answer). Once due it is asked again in the background, one at a time:
// only the very first call waits for the CLI (the daemon makes it at
// start-up), and only when wait is set: a prompt's admission (a Cached
// capability request) never waits for an app-server's start.
func (p *Provider) catalog(ctx context.Context, wait bool) (models []string, def string, efforts []string) {
	p.modelsMu.Lock()
	first := wait && p.modelsNext.IsZero() && p.modelsDone == nil
	if p.modelsDone == nil && time.Now().After(p.modelsNext) {
		p.modelsDone = make(chan struct{})
		go p.refreshModels(context.WithoutCancel(ctx), p.modelsDone)
	}
	done := p.modelsDone
	p.modelsMu.Unlock()
	if first {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	p.modelsMu.Lock()
	defer p.modelsMu.Unlock()
	if len(p.models) == 0 {
		return slices.Clone(Models), "", slices.Clone(Efforts)
	}
	return slices.Clone(p.models), p.defModel, slices.Clone(p.efforts)
}

// refreshModels asks the CLI's model/list and keeps the answer, then
// closes done.
func (p *Provider) refreshModels(ctx context.Context, done chan struct{}) {
	ids, d, effs, err := p.listModels(ctx)
	p.modelsMu.Lock()
	defer p.modelsMu.Unlock()
	switch {
	case err == nil && len(ids) > 0:
		p.models, p.defModel, p.efforts = ids, d, effs
		ttl := p.opts.ModelsTTL
		if ttl <= 0 {
			ttl = DefaultModelsTTL
		}
		p.modelsNext = time.Now().Add(ttl)
	default:
		if err == nil {
			err = errors.New("model/list returned no models")
		}
		p.log.Debug("codex model/list failed; declaring the fallback catalog", "error", err)
		p.modelsNext = time.Now().Add(modelsRetry)
	}
	p.modelsDone = nil
	close(done)
}

func (p *Provider) listModels(ctx context.Context) ([]string, string, []string, error) {
	env, _, err := p.hostEnv(nil)
	if err != nil {
		return nil, "", nil, err
	}
	launcher := p.cfg.Host
	if launcher == nil {
		return nil, "", nil, ErrNotWired
	}
	ctx, cancel := context.WithTimeout(ctx, modelsListTimeout)
	defer cancel()
	cmd := providers.Command{Path: p.cfg.Binary, Args: append([]string{"app-server"}, p.cfg.Args...), Env: env, Dir: "/"}
	list, err := codexharness.ListModels(ctx, launcher, cmd)
	if err != nil {
		return nil, "", nil, err
	}
	ids, def, efforts := codexharness.Catalog(list)
	return ids, def, efforts, nil
}

// HostCodexHome returns the Codex home a host run uses: cfg.Env's
// CODEX_HOME, else $HOME/.codex of the daemon.
func (p *Provider) HostCodexHome() (string, error) {
	if h := p.cfg.Env["CODEX_HOME"]; h != "" {
		return h, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("codex: resolve home directory for CODEX_HOME: %w", err)
	}
	return filepath.Join(home, ".codex"), nil
}

// Run executes one turn on the host (req.ProjectID empty) or in the
// project's container; see codexharness.Run for the event and error
// contract.
func (p *Provider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	home, err := p.HostCodexHome()
	if err != nil {
		return err
	}
	if err := CheckAuthRecord(filepath.Join(home, "auth.json")); err != nil {
		return err
	}
	inContainer := req.ProjectID != ""
	approval, sandbox, err := codexharness.ResolvePolicies(req.Preferences, inContainer)
	if err != nil {
		return fmt.Errorf("codex: %w", err)
	}
	settings := codexharness.Settings{
		Model: req.Model, ApprovalPolicy: approval, Sandbox: sandbox,
		ServiceTier: req.Preferences.ServiceTier, Effort: req.Preferences.ReasoningEffort,
		Plan: req.Mode == providers.ModePlan,
	}
	runtimeEnv := map[string]string{}
	for k, v := range req.RuntimeEnv {
		if k != "OPENAI_API_KEY" {
			runtimeEnv[k] = v
		}
	}
	return codexlaunch.Run(ctx, codexlaunch.Spec{
		Name: "codex", Cfg: p.cfg, NotWired: ErrNotWired,
		Args:     append([]string{"app-server"}, p.cfg.Args...),
		Settings: settings,
		Harness: codexharness.Config{Provider: providers.Codex, Logger: p.log, InterruptTimeout: p.opts.InterruptTimeout,
			ExitGrace: p.cfg.ExitGrace, RetryLimit: p.opts.RetryLimit},
		HostEnv: func() ([]string, error) {
			env, _, err := p.hostEnv(req.RuntimeEnv)
			return env, err
		},
		Container: runner.ContainerSpec{
			Fixed:           p.cfg.Env, // as ProjectEnv allows (codexlaunch)
			Forced:          map[string]string{"HOME": runner.ContainerHome, "CODEX_HOME": ContainerCodexHome, "OPENAI_API_KEY": ""},
			Runtime:         runtimeEnv,
			ExcludedSecrets: []string{"OPENAI_API_KEY", "CODEX_HOME", "HOME"},
		},
		SyncTimeout: p.opts.SyncTimeout,
		Log:         p.log,
	}, req, emit)
}

// CheckAuthRecord refuses a Codex auth record (auth.json) that is API-key
// authentication (S13): `"auth_mode": "apikey"` (what `codex login
// --with-api-key` writes, checked with 0.169), or a record without
// auth_mode that holds a non-empty OPENAI_API_KEY and no ChatGPT tokens
// (older Codex versions, which then use the key). A missing record is
// fine (the user has not logged in yet, Codex will say so); an unreadable
// or malformed one is left for Codex to report.
func CheckAuthRecord(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var rec struct {
		AuthMode *string         `json:"auth_mode"`
		APIKey   *string         `json:"OPENAI_API_KEY"`
		Tokens   json.RawMessage `json:"tokens"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return nil
	}
	if rec.AuthMode != nil {
		mode := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(*rec.AuthMode))
		if mode == "apikey" {
			return fmt.Errorf("codex: %s: %w; log in with a ChatGPT subscription (codex login)", path, ErrAPIKeyAuth)
		}
		return nil
	}
	noTokens := len(rec.Tokens) == 0 || string(rec.Tokens) == "null"
	if rec.APIKey != nil && *rec.APIKey != "" && noTokens {
		return fmt.Errorf("codex: %s: %w; log in with a ChatGPT subscription (codex login)", path, ErrAPIKeyAuth)
	}
	return nil
}
