package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
)

// ContainerHome is HOME inside a project container: where project
// preparation provisions credentials, so no secret or setting may move it.
const ContainerHome = "/root"

// AdapterLogger returns l named name, or a discarding logger when l is nil:
// the logger every adapter derives from AdapterConfig.Logger.
func AdapterLogger(l hclog.Logger, name string) hclog.Logger {
	if l == nil {
		l = hclog.NewNullLogger()
	}
	return l.Named(name)
}

// PrepareProject makes req's project ready for provider through
// cfg.Preparer (S9, S10; its system events go to emit) and returns the
// prepared target and the launcher of its container.
//
// A run re-attached to its shim after a daemon restart (its RunSlot names
// the container) is not prepared again.
//
// Without cfg.Preparer or cfg.Containers it returns an error wrapping
// notWired, the adapter's own class for that. A preparation failure is
// returned wrapped with the project id; when ctx ended during preparation
// that error is the cancellation, and the adapter treats it as a normal
// stop (S29) by checking ctx.Err().
func PrepareProject(ctx context.Context, cfg providers.AdapterConfig, provider providers.ProviderID, notWired error,
	req providers.RunRequest, emit func(providers.Event)) (providers.Target, providers.Launcher, error) {
	if cfg.Preparer == nil || cfg.Containers == nil {
		return providers.Target{}, nil, fmt.Errorf("project %q: %w", req.ProjectID, notWired)
	}
	if slot := providers.RunSlotFrom(ctx); slot != nil && slot.Attach != nil && slot.Attach.Instance != "" {
		// A run re-attached after a daemon restart: its CLI already runs
		// in that container, which was prepared when the run started.
		target := providers.Target{ProjectID: req.ProjectID, Container: slot.Attach.Instance}
		return target, cfg.Containers.Container(target.Container), nil
	}
	target, err := cfg.Preparer.Prepare(ctx, providers.PrepareRequest{
		Provider: provider, ProjectID: req.ProjectID, ProjectUID: req.ProjectUID, EnableBrowser: req.EnableBrowser,
		EnableScheduleTools: req.EnableScheduleTools, Skills: req.Skills, Chat: req.ConversationID,
	}, emit)
	if err != nil {
		return providers.Target{}, nil, fmt.Errorf("prepare project %q: %w", req.ProjectID, err)
	}
	return target, cfg.Containers.Container(target.Container), nil
}

// LaunchSpec is what an adapter that runs its CLI once per turn fixes about
// the command of one request (ResolveLaunch).
type LaunchSpec struct {
	Provider providers.ProviderID // whose setup the project preparer makes
	NotWired error                // the adapter's class for a project run without Preparer or Containers
	// HostArgs and ContainerArgs are the CLI arguments on the host and in a
	// project container.
	HostArgs, ContainerArgs []string
	// Forced is the adapter's own environment: over AdapterConfig.Env (in
	// a container: ContainerEnv's part of it) and project secrets, under req.RuntimeEnv. A container run also forces
	// HOME to ContainerHome.
	Forced map[string]string
}

// Launch is where and how one turn runs.
type Launch struct {
	Launcher providers.Launcher
	Command  providers.Command
	// Target is the prepared project of a project run; zero on the host.
	Target providers.Target
}

// ResolveLaunch returns the launch of req for an adapter configured with
// cfg (cfg.Binary and cfg.Host set).
//
// Without req.ProjectID the command runs through cfg.Host with HostEnv of
// cfg.Env < spec.Forced < req.RuntimeEnv, in req.Cwd or else the daemon
// user's home directory.
//
// With req.ProjectID the project is prepared first (PrepareProject, with
// its errors) and the command runs in its container (ContainerCommand):
// LANG=C.UTF-8 < ContainerEnv(cfg.Env) < project secrets < spec.Forced and
// HOME=ContainerHome < req.RuntimeEnv, in the target's Cwd (DefaultContainerCwd
// when empty).
func ResolveLaunch(ctx context.Context, cfg providers.AdapterConfig, spec LaunchSpec,
	req providers.RunRequest, emit func(providers.Event)) (Launch, error) {
	if req.ProjectID == "" {
		env := maps.Clone(cfg.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, spec.Forced)
		maps.Copy(env, req.RuntimeEnv)
		dir := req.Cwd
		if dir == "" {
			dir, _ = os.UserHomeDir()
		}
		return Launch{
			Launcher: cfg.Host,
			Command:  providers.Command{Path: cfg.Binary, Args: spec.HostArgs, Env: HostEnv(env), Dir: dir},
		}, nil
	}
	target, launcher, err := PrepareProject(ctx, cfg, spec.Provider, spec.NotWired, req, emit)
	if err != nil {
		return Launch{}, err
	}
	fixed := map[string]string{"LANG": "C.UTF-8"}
	maps.Copy(fixed, ContainerEnv(cfg.Env, cfg.ProjectEnv, target))
	forced := make(map[string]string, len(spec.Forced)+1)
	maps.Copy(forced, spec.Forced)
	forced["HOME"] = ContainerHome
	cmd := ContainerCommand(ContainerSpec{
		Binary:  cfg.Binary,
		Args:    spec.ContainerArgs,
		Cwd:     target.Cwd,
		Fixed:   fixed,
		Secrets: target.Secrets,
		Forced:  forced,
		Runtime: req.RuntimeEnv,
	})
	return Launch{Launcher: launcher, Command: cmd, Target: target}, nil
}

// ContainerEnv returns the entries of env (the operator's [providers.<id>]
// env, or a part of it) that may reach a run in target's container: those
// whose key allowed (AdapterConfig.ProjectEnv) names, when target shares
// the host's logins; nothing for a project with its own. An operator's
// API key thus never reaches a project unless the operator said so.
func ContainerEnv(env map[string]string, allowed []string, target providers.Target) map[string]string {
	out := map[string]string{}
	if !target.SharedCredentials {
		return out
	}
	for _, k := range allowed {
		if v, ok := env[k]; ok {
			out[k] = v
		}
	}
	return out
}

// SyncCredentials copies provider id's credentials back from target's
// container after a successful project run (S12), bounded by timeout
// from ctx. It is best effort: a failure is logged on log as a warning
// and never returned. A refused copy (providers.ErrCredentialSyncRejected:
// the record's shape, an API-key record, an unsafe host path) is also
// told to the chat through emit as system/credential_sync_rejected with
// {"provider", "reason"}; the reason names what was wrong, never the
// content.
func SyncCredentials(ctx context.Context, preparer providers.ProjectPreparer, target providers.Target,
	id providers.ProviderID, timeout time.Duration, log hclog.Logger, emit func(providers.Event)) {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := preparer.SyncCredentials(sctx, target, id)
	if err == nil {
		return
	}
	log.Warn("credential sync after run failed", "error", err)
	if errors.Is(err, providers.ErrCredentialSyncRejected) && emit != nil {
		data, _ := json.Marshal(map[string]string{"provider": string(id), "reason": err.Error()})
		emit(providers.Event{Type: providers.EventSystem, Subtype: CredentialSyncRejected, Provider: id, Data: data})
	}
}

// CredentialSyncRejected is the system event subtype of a refused
// credential sync.
const CredentialSyncRejected = "credential_sync_rejected"

// WithoutEnv returns env (KEY=VALUE entries) without any entry of key.
// env itself is not modified.
func WithoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// DefaultCredentialSyncTimeout is S12's default bound on the credential
// sync after a successful project run.
const DefaultCredentialSyncTimeout = 30 * time.Second

// HostDefaults returns cfg with an empty Binary set to binary and a nil
// Host set to a HostLauncher: the defaults of an adapter that runs loose
// chats on the daemon's host unless configured otherwise.
func HostDefaults(cfg providers.AdapterConfig, binary string) providers.AdapterConfig {
	if cfg.Binary == "" {
		cfg.Binary = binary
	}
	if cfg.Host == nil {
		cfg.Host = &HostLauncher{}
	}
	return cfg
}

// TruncateOutput returns s when it is at most n bytes long, else its first
// n bytes or fewer, cut so that no UTF-8 sequence is split, followed by
// "\n…[truncated]": how adapters bound text they put in an event (a
// tool's output, a failure message).
func TruncateOutput(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "\n…[truncated]"
}
