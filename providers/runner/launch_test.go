package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"remote/providers"
	"remote/providers/runner/runnertest"
)

// namedLauncher is a Launcher that only says which container it is for.
type namedLauncher struct{ name string }

func (namedLauncher) Start(context.Context, providers.Command) (providers.Process, error) {
	return nil, errors.New("not started in this test")
}

// fakeContainers gives a namedLauncher per container.
var fakeContainers = runnertest.ContainersFunc(func(name string) providers.Launcher { return namedLauncher{name: name} })

var errTestNotWired = errors.New("test: project execution not configured")

func TestResolveLaunchHost(t *testing.T) {
	t.Setenv("HOME", "/home/daemon")
	host := &HostLauncher{}
	cfg := providers.AdapterConfig{Binary: "cli", Host: host, Env: map[string]string{"A": "cfg", "B": "cfg", "C": "cfg"}}
	spec := LaunchSpec{
		Provider: providers.Claude, NotWired: errTestNotWired,
		HostArgs: []string{"--host"}, ContainerArgs: []string{"--container"},
		Forced: map[string]string{"B": "forced", "C": "forced"},
	}
	tests := []struct {
		name    string
		req     providers.RunRequest
		wantDir string
	}{
		{"cwd given", providers.RunRequest{Cwd: "/srv/app", RuntimeEnv: map[string]string{"C": "runtime"}}, "/srv/app"},
		{"cwd defaults to home", providers.RunRequest{RuntimeEnv: map[string]string{"C": "runtime"}}, "/home/daemon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ResolveLaunch(context.Background(), cfg, spec, tt.req, func(providers.Event) {})
			if err != nil {
				t.Fatal(err)
			}
			if l.Launcher != host || l.Target.Container != "" || l.Target.Secrets != nil {
				t.Fatalf("launcher %v target %+v, want the host launcher and no target", l.Launcher, l.Target)
			}
			if l.Command.Path != "cli" || !slices.Equal(l.Command.Args, []string{"--host"}) || l.Command.Dir != tt.wantDir {
				t.Fatalf("command %+v", l.Command)
			}
			for _, want := range []string{"A=cfg", "B=forced", "C=runtime", "HOME=/home/daemon"} {
				if !slices.Contains(l.Command.Env, want) {
					t.Errorf("env %q lacks %s", l.Command.Env, want)
				}
			}
		})
	}
}

func TestResolveLaunchProject(t *testing.T) {
	var got providers.PrepareRequest
	var events []providers.Event
	cfg := providers.AdapterConfig{
		Binary: "cli", Env: map[string]string{"A": "cfg", "LANG": "en_US.UTF-8", "HOME": "/cfg", "API_KEY": "operator"},
		ProjectEnv: []string{"A", "LANG", "HOME"},
		Containers: fakeContainers,
		Preparer: runnertest.Preparer{PrepareFunc: func(_ context.Context, req providers.PrepareRequest, emit func(providers.Event)) (providers.Target, error) {
			got = req
			emit(providers.Event{Type: providers.EventSystem})
			return providers.Target{ProjectID: "p1", Container: "c1", SharedCredentials: true, Secrets: []providers.Secret{{Key: "S", Value: "secret"}, {Key: "HOME", Value: "/moved"}}}, nil
		}},
	}
	forced := map[string]string{"F": "forced"}
	spec := LaunchSpec{Provider: providers.Kimi, NotWired: errTestNotWired, HostArgs: []string{"--host"}, ContainerArgs: []string{"--container"}, Forced: forced}
	req := providers.RunRequest{ProjectID: "p1", EnableBrowser: true, EnableScheduleTools: true, Skills: []string{"s"}, RuntimeEnv: map[string]string{"R": "runtime"}}
	l, err := ResolveLaunch(context.Background(), cfg, spec, req, func(ev providers.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	wantReq := providers.PrepareRequest{Provider: providers.Kimi, ProjectID: "p1", EnableBrowser: true, EnableScheduleTools: true, Skills: []string{"s"}}
	if got.Provider != wantReq.Provider || got.ProjectID != wantReq.ProjectID || !got.EnableBrowser || !got.EnableScheduleTools || !slices.Equal(got.Skills, wantReq.Skills) {
		t.Errorf("prepare request %+v, want %+v", got, wantReq)
	}
	if len(events) != 1 {
		t.Errorf("preparation events %v, want the one emitted", events)
	}
	if l.Launcher != (namedLauncher{name: "c1"}) || l.Target.Container != "c1" {
		t.Fatalf("launcher %v target %+v", l.Launcher, l.Target)
	}
	wantEnv := []string{"A=cfg", "F=forced", "HOME=/root", "LANG=en_US.UTF-8", "R=runtime", "S=secret"}
	if !slices.Equal(l.Command.Env, wantEnv) || l.Command.Dir != DefaultContainerCwd || !slices.Equal(l.Command.Args, []string{"--container"}) {
		t.Fatalf("command %+v, want env %q", l.Command, wantEnv)
	}
	if len(forced) != 1 {
		t.Errorf("spec.Forced was modified: %v", forced)
	}
}

func TestResolveLaunchProjectErrors(t *testing.T) {
	errPrepare := errors.New("container unavailable")
	wired := providers.AdapterConfig{Binary: "cli", Containers: fakeContainers, Preparer: runnertest.Preparer{
		PrepareFunc: func(ctx context.Context, _ providers.PrepareRequest, _ func(providers.Event)) (providers.Target, error) {
			if ctx.Err() != nil {
				return providers.Target{}, ctx.Err()
			}
			return providers.Target{}, errPrepare
		}}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		cfg  providers.AdapterConfig
		want error
	}{
		{"no preparer", context.Background(), providers.AdapterConfig{Containers: fakeContainers}, errTestNotWired},
		{"no containers", context.Background(), providers.AdapterConfig{Preparer: runnertest.Preparer{}}, errTestNotWired},
		{"preparation fails", context.Background(), wired, errPrepare},
		{"cancelled while preparing", cancelled, wired, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ResolveLaunch(tt.ctx, tt.cfg, LaunchSpec{NotWired: errTestNotWired}, providers.RunRequest{ProjectID: "p1"}, func(providers.Event) {})
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), `"p1"`) {
				t.Fatalf("err %v, want %v naming the project", err, tt.want)
			}
		})
	}
}

func TestSyncCredentials(t *testing.T) {
	tests := []struct {
		name string
		sync func(ctx context.Context, t providers.Target, p providers.ProviderID) error
	}{
		{"success", nil},
		{"failure is only logged", func(context.Context, providers.Target, providers.ProviderID) error { return errors.New("copy failed") }},
		{"bounded by the timeout", func(ctx context.Context, _ providers.Target, _ providers.ProviderID) error {
			<-ctx.Done() // returns only because of the timeout
			return ctx.Err()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotTarget providers.Target
			var gotID providers.ProviderID
			sync := tt.sync
			p := runnertest.Preparer{SyncFunc: func(ctx context.Context, tg providers.Target, id providers.ProviderID) error {
				gotTarget, gotID = tg, id
				if _, ok := ctx.Deadline(); !ok {
					t.Error("sync context has no deadline")
				}
				if sync == nil {
					return nil
				}
				return sync(ctx, tg, id)
			}}
			SyncCredentials(context.Background(), p, providers.Target{Container: "c1"}, providers.Kimi, time.Millisecond, AdapterLogger(nil, "test"), nil)
			if gotTarget.Container != "c1" || gotID != providers.Kimi {
				t.Fatalf("synced %+v for %s", gotTarget, gotID)
			}
		})
	}
}

func TestWithoutEnv(t *testing.T) {
	env := []string{"A=1", "KEY=secret", "KEYS=kept", "KEY=again"}
	got := WithoutEnv(env, "KEY")
	if want := []string{"A=1", "KEYS=kept"}; !slices.Equal(got, want) {
		t.Fatalf("WithoutEnv = %q, want %q", got, want)
	}
	if env[1] != "KEY=secret" {
		t.Fatalf("input modified: %q", env)
	}
}

func TestHostDefaults(t *testing.T) {
	host := &HostLauncher{Grace: time.Second}
	tests := []struct {
		name       string
		cfg        providers.AdapterConfig
		wantBinary string
		wantHost   providers.Launcher
	}{
		{"empty", providers.AdapterConfig{}, "cli", nil},
		{"configured", providers.AdapterConfig{Binary: "/opt/cli", Host: host}, "/opt/cli", host},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HostDefaults(tt.cfg, "cli")
			if got.Binary != tt.wantBinary {
				t.Errorf("Binary = %q, want %q", got.Binary, tt.wantBinary)
			}
			if _, ok := got.Host.(*HostLauncher); !ok || (tt.wantHost != nil && got.Host != tt.wantHost) {
				t.Errorf("Host = %#v, want %#v or a new HostLauncher", got.Host, tt.wantHost)
			}
		})
	}
}

func TestTruncateOutput(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short", "abc", 3, "abc"},
		{"cut", "abcdef", 3, "abc\n…[truncated]"},
		{"not inside a rune", "aé", 2, "a\n…[truncated]"},
		{"zero", "é", 0, "\n…[truncated]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TruncateOutput(tt.s, tt.n); got != tt.want {
				t.Fatalf("TruncateOutput(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			}
		})
	}
}

func FuzzTruncateOutput(f *testing.F) {
	f.Add("aé日本語", 3)
	f.Add("", 0)
	f.Add("\xff\x80abc", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<20 {
			return
		}
		got := TruncateOutput(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("unchanged input altered: %q", got)
			}
			return
		}
		head, ok := strings.CutSuffix(got, "\n…[truncated]")
		if !ok || len(head) > n || !strings.HasPrefix(s, head) {
			t.Fatalf("TruncateOutput(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(head) {
			t.Fatalf("valid input cut inside a rune: %q", head)
		}
	})
}

// TestSyncCredentialsReportsRejection: a refused sync becomes one
// system/credential_sync_rejected event naming the provider and the
// reason; any other failure is only logged.
func TestSyncCredentialsReportsRejection(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{fmt.Errorf("codex credentials: %w: not a JSON object", providers.ErrCredentialSyncRejected), []string{CredentialSyncRejected}},
		{errors.New("lxd unavailable"), nil},
		{nil, nil},
	} {
		var got []providers.Event
		p := runnertest.Preparer{SyncFunc: func(context.Context, providers.Target, providers.ProviderID) error { return tc.err }}
		SyncCredentials(context.Background(), p, providers.Target{Container: "c1"}, providers.Codex, time.Second, AdapterLogger(nil, "test"),
			func(ev providers.Event) { got = append(got, ev) })
		var subtypes []string
		for _, ev := range got {
			subtypes = append(subtypes, ev.Subtype)
		}
		if !slices.Equal(subtypes, tc.want) {
			t.Fatalf("err %v: events %v, want %v", tc.err, subtypes, tc.want)
		}
		if len(got) == 1 {
			want := `{"provider":"codex","reason":"codex credentials: credential sync rejected: not a JSON object"}`
			if got[0].Type != providers.EventSystem || string(got[0].Data) != want {
				t.Fatalf("event %+v data %s, want %s", got[0], got[0].Data, want)
			}
		}
	}
}

// TestContainerEnv: the operator's env reaches a project container only
// for the keys project_env names, and only when the project shares the
// host's logins.
func TestContainerEnv(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-operator", "DISABLE_AUTOUPDATER": "1"}
	for _, tt := range []struct {
		name    string
		allowed []string
		shared  bool
		want    map[string]string
	}{
		{"own login gets nothing, even listed", []string{"ANTHROPIC_API_KEY", "DISABLE_AUTOUPDATER"}, false, map[string]string{}},
		{"shared gets nothing unlisted", nil, true, map[string]string{}},
		{"shared gets what is listed", []string{"DISABLE_AUTOUPDATER", "MISSING"}, true, map[string]string{"DISABLE_AUTOUPDATER": "1"}},
		{"shared gets a listed key", []string{"ANTHROPIC_API_KEY"}, true, map[string]string{"ANTHROPIC_API_KEY": "sk-operator"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ContainerEnv(env, tt.allowed, providers.Target{Container: "c", SharedCredentials: tt.shared})
			if !maps.Equal(got, tt.want) {
				t.Errorf("ContainerEnv = %v, want %v", got, tt.want)
			}
		})
	}
}
