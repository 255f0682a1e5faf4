// Package codexlaunch runs one turn of a `codex app-server` CLI (the Codex
// and MiniMax adapters) on the host or in the request's project container:
// the choice of launcher, the project's preparation, the container
// command, the harness run and the credential sync after it. What differs
// between the adapters (arguments, environment, settings, whether
// credentials sync) is the Spec they pass.
//
// It imports providers, codexharness and runner; it must not import the
// daemon, the store, the transport or any adapter package.
package codexlaunch

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/codexharness"
	"remote/providers/runner"
)

// Spec is what an adapter fixes about one turn.
type Spec struct {
	// Name prefixes errors ("codex", "minimax").
	Name string
	// Cfg is the adapter's configuration: Binary, Host, Preparer and
	// Containers.
	Cfg providers.AdapterConfig
	// NotWired is the error of a run whose launcher is missing.
	NotWired error
	// Args are the CLI's arguments, on the host and in a container.
	Args []string
	// Settings are the turn's settings; Cwd is filled in here.
	Settings codexharness.Settings
	// Harness configures the harness; Settings is filled in here.
	Harness codexharness.Config
	// HostEnv returns the environment of a host run.
	HostEnv func() ([]string, error)
	// Container is the container command's environment; Binary, Args and
	// Secrets are filled in here, and OPENAI_API_KEY is always removed.
	// Its Fixed entries are the operator's: only those runner.ContainerEnv
	// lets through reach the container.
	Container runner.ContainerSpec
	// OperatorKeys are variables the adapter forces from the operator's
	// configuration (MiniMax's API key; an empty value is none). In a
	// container each is forced only where runner.ContainerEnv lets it
	// through; elsewhere a project secret of that name may supply the
	// project's own.
	OperatorKeys map[string]string
	// SyncTimeout > 0 copies the CLI's credentials back after a
	// successful project run, bounded by it (S12); 0: no sync.
	SyncTimeout time.Duration
	// Log receives the credential sync's warnings.
	Log hclog.Logger
}

// Run runs req as one turn: on the host through s.Cfg.Host when
// req.ProjectID is empty, else in the project's prepared container. A
// cancel during preparation is a normal stop (S29, nil). See
// codexharness.Run for the event and error contract.
func Run(ctx context.Context, s Spec, req providers.RunRequest, emit func(providers.Event)) error {
	if req.ProjectID == "" {
		if s.Cfg.Host == nil {
			return fmt.Errorf("%s: host run: %w", s.Name, s.NotWired)
		}
		env, err := s.HostEnv()
		if err != nil {
			return err
		}
		s.Settings.Cwd = req.Cwd
		s.Harness.Settings = s.Settings
		cmd := providers.Command{Path: s.Cfg.Binary, Args: s.Args, Env: env, Dir: req.Cwd}
		return codexharness.Run(ctx, s.Cfg.Host, cmd, req, s.Harness, emit)
	}

	// Preparation events go to emit as they are; codexharness stamps only
	// the run's own events.
	target, launcher, err := runner.PrepareProject(ctx, s.Cfg, s.Harness.Provider, s.NotWired, req, emit)
	if err != nil {
		if ctx.Err() != nil {
			return nil // cancelled while preparing: a normal stop (S29)
		}
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	spec := s.Container
	spec.Binary, spec.Args, spec.Secrets = s.Cfg.Binary, s.Args, target.Secrets
	spec.Cwd = cmp.Or(target.Cwd, spec.Cwd) // a chat's own worktree
	spec.Fixed = runner.ContainerEnv(spec.Fixed, s.Cfg.ProjectEnv, target)
	spec.Forced = maps.Clone(spec.Forced)
	if spec.Forced == nil {
		spec.Forced = map[string]string{}
	}
	keys := runner.ContainerEnv(s.OperatorKeys, s.Cfg.ProjectEnv, target)
	for k := range s.OperatorKeys {
		if v := keys[k]; v != "" {
			spec.Forced[k] = v
		} else {
			spec.ExcludedSecrets = slices.DeleteFunc(slices.Clone(spec.ExcludedSecrets), func(e string) bool { return e == k })
		}
	}
	cmd := runner.ContainerCommand(spec)
	cmd.Env = runner.WithoutEnv(cmd.Env, "OPENAI_API_KEY")
	s.Settings.Cwd = cmd.Dir
	s.Harness.Settings = s.Settings
	err = codexharness.Run(ctx, launcher, cmd, req, s.Harness, emit)
	if err == nil && ctx.Err() == nil && s.SyncTimeout > 0 {
		// Not cut short by a cancel arriving during the sync: only the
		// timeout bounds it.
		log := s.Log
		if log == nil {
			log = hclog.NewNullLogger()
		}
		runner.SyncCredentials(context.WithoutCancel(ctx), s.Cfg.Preparer, target, s.Harness.Provider, s.SyncTimeout,
			log.With("project", req.ProjectID), emit)
	}
	return err
}
