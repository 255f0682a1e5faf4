package codex

// Readiness runs on the host launcher and asks only about the model
// provider at the top level; the models list is cached ten minutes; a host
// run gets its sandbox and plan-mode flags. (Found unpinned by mutation
// testing: docs/testing.md.)

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
	"remote/providers/runner/runnertest"
)

// countingLauncher runs commands on the host and counts them.
type countingLauncher struct {
	n     atomic.Int32
	inner runner.HostLauncher
}

func (l *countingLauncher) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	l.n.Add(1)
	return l.inner.Start(ctx, cmd)
}

// Readiness runs the CLI through the configured host launcher (as the
// host user), and through a plain host launcher when none is configured.
func TestReadinessUsesTheHostLauncher(t *testing.T) {
	bin := testkit.CodexBinary(t)
	root := t.TempDir()
	home := filepath.Join(root, "codex-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CODEX_HOME": home, "HOME": root}
	l := &countingLauncher{}
	r := New(providers.AdapterConfig{Binary: bin, Env: env, Host: l}).Readiness(context.Background())
	if !r.BinaryFound || l.n.Load() == 0 {
		t.Fatalf("readiness %+v after %d launches through the configured launcher", r, l.n.Load())
	}
	if r := New(providers.AdapterConfig{Binary: bin, Env: env}).Readiness(context.Background()); !r.BinaryFound || r.Binary != bin {
		t.Fatalf("readiness without a configured launcher: %+v", r)
	}
}

// With ModelsTTL unset the CLI's model list is kept 10 minutes: a second
// call asks nothing.
func TestModelsCachedTenMinutesByDefault(t *testing.T) {
	e := newEnv(t)
	if _, err := e.p.Capabilities(context.Background(), providers.CapabilityRequest{}); err != nil {
		t.Fatal(err)
	}
	first := e.p.modelsNext
	if left := time.Until(first); left < 9*time.Minute || left > 10*time.Minute {
		t.Fatalf("model list kept for %v, want 10 min", left)
	}
	if _, err := e.p.Capabilities(context.Background(), providers.CapabilityRequest{}); err != nil || e.p.modelsNext != first {
		t.Fatalf("a second call asked the CLI again")
	}
}

// A host run applies the chosen sandbox policy (a project run's container
// is the sandbox: there it is always danger-full-access), and plan mode
// reaches turn/start.
func TestHostRunSandboxAndPlanMode(t *testing.T) {
	for _, tc := range []struct {
		mode             providers.RunMode
		sandbox, turnMod string
	}{
		{providers.ModePlan, `"sandbox":"workspace-write"`, `"mode":"plan"`},
		{"", `"sandbox":"workspace-write"`, `"mode":"default"`},
	} {
		peer := startPeer("completed")
		p := New(providers.AdapterConfig{
			Env: map[string]string{"CODEX_HOME": t.TempDir()}, // no auth record
			Host: runnertest.LauncherFunc(func(context.Context, providers.Command) (providers.Process, error) {
				return peer, nil
			}),
		})
		err := p.Run(context.Background(), providers.RunRequest{Prompt: "x", Mode: tc.mode,
			Preferences: providers.RunPreferences{SandboxPolicy: "workspace-write"}}, func(providers.Event) {})
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		if start := peer.params("thread/start"); !strings.Contains(start, tc.sandbox) {
			t.Errorf("thread/start params %s, want %s", start, tc.sandbox)
		}
		if turn := peer.params("turn/start"); !strings.Contains(turn, tc.turnMod) {
			t.Errorf("mode %q: turn/start params %s, want %s", tc.mode, turn, tc.turnMod)
		}
	}
}

// Only a top-level model_provider of config.toml counts: one inside a
// table (a profile) does not make Codex ready without a login.
func TestReadinessModelProviderOnlyTopLevel(t *testing.T) {
	bin := testkit.CodexBinary(t)
	root := t.TempDir()
	home := filepath.Join(root, "codex-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[profiles.alt]\nmodel_provider = \"fake\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"CODEX_HOME": home, "HOME": root},
		Host: &runner.HostLauncher{}}).Readiness(context.Background())
	if r.Ready || r.LoggedIn || r.Auth != providers.AuthNone {
		t.Fatalf("got %+v, want not logged in (auth none)", r)
	}
}
