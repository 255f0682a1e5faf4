package minimax

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"remote/providers"
	"remote/providers/runner/runnertest"
)

type fakePreparer struct {
	target providers.Target
	got    providers.PrepareRequest
	synced int
}

func (f *fakePreparer) Prepare(_ context.Context, req providers.PrepareRequest, _ func(providers.Event)) (providers.Target, error) {
	f.got = req
	return f.target, nil
}

func (f *fakePreparer) SyncCredentials(context.Context, providers.Target, providers.ProviderID) error {
	f.synced++
	return nil
}

// peer is an in-memory app-server that completes every turn.
type peer struct {
	inR, outR *io.PipeReader
	inW, outW *io.PipeWriter
	done      chan struct{}
	mu        sync.Mutex
	start     string
}

func newPeer() *peer {
	p := &peer{done: make(chan struct{})}
	p.inR, p.inW = io.Pipe()
	p.outR, p.outW = io.Pipe()
	go func() {
		defer close(p.done)
		defer p.outW.Close()
		sc := bufio.NewScanner(p.inR)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			_ = json.Unmarshal(sc.Bytes(), &m)
			switch m.Method {
			case "initialize":
				fmt.Fprintf(p.outW, `{"id":%s,"result":{}}`+"\n", m.ID)
			case "thread/start":
				p.mu.Lock()
				p.start = string(m.Params)
				p.mu.Unlock()
				fmt.Fprintf(p.outW, `{"id":%s,"result":{"thread":{"id":"t"},"model":"MiniMax-M2.7"}}`+"\n", m.ID)
			case "turn/start":
				fmt.Fprintf(p.outW, `{"id":%s,"result":{"turn":{"id":"u"}}}`+"\n", m.ID)
				fmt.Fprintln(p.outW, `{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"completed"}}}`)
			}
		}
	}()
	return p
}

func (p *peer) Stdin() io.WriteCloser       { return p.inW }
func (p *peer) Stdout() io.Reader           { return p.outR }
func (p *peer) Stderr() io.Reader           { return strings.NewReader("") }
func (p *peer) Signal(syscall.Signal) error { return nil }
func (p *peer) Wait() error                 { <-p.done; return nil }

// TestProjectRunProtectsOwnVariables: project secrets and runtime values
// named MINIMAX_API_KEY, OPENAI_API_KEY, HOME or CODEX_HOME never override
// the adapter's; the key is in the environment only; the thread runs with
// the container sandbox in /workspace.
func TestProjectRunProtectsOwnVariables(t *testing.T) {
	prep := &fakePreparer{target: providers.Target{ProjectID: "p", Container: "c1", SharedCredentials: true, Secrets: []providers.Secret{
		{Key: KeyVar, Value: "secret-key"}, {Key: "OPENAI_API_KEY", Value: "secret-openai"},
		{Key: "HOME", Value: "/tmp/x"}, {Key: "CODEX_HOME", Value: "/tmp/y"}, {Key: "DATABASE_URL", Value: "db"},
	}}}
	var cmd providers.Command
	pr := newPeer()
	p := New(providers.AdapterConfig{
		Env:        map[string]string{"CODEX_HOME": "/cfg", "EXTRA": "1"},
		ProjectEnv: []string{KeyVar, "EXTRA", "CODEX_HOME"},
		Preparer:   prep,
		Containers: runnertest.ContainersFunc(func(name string) providers.Launcher {
			if name != "c1" {
				t.Errorf("container %q", name)
			}
			return runnertest.LauncherFunc(func(_ context.Context, c providers.Command) (providers.Process, error) {
				cmd = c
				return pr, nil
			})
		}),
	}, Options{APIKey: testKey, BaseURL: "https://example.test/v1"})
	err := p.Run(context.Background(), providers.RunRequest{Prompt: "x", ProjectID: "p",
		RuntimeEnv: map[string]string{"HOME": "/rt", KeyVar: "rt-key", "REMOTE_RUN": "r"}}, func(providers.Event) {})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if prep.got.Provider != providers.MiniMax || prep.got.ProjectID != "p" {
		t.Fatalf("Prepare got %+v", prep.got)
	}
	for _, want := range []string{"HOME=/root", "CODEX_HOME=/root/.minimax", KeyVar + "=" + testKey,
		"DATABASE_URL=db", "EXTRA=1", "REMOTE_RUN=r"} {
		if !slices.Contains(cmd.Env, want) {
			t.Fatalf("env lacks %s: %v", want, cmd.Env)
		}
	}
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, "OPENAI_API_KEY=") {
			t.Fatalf("env has %s", kv)
		}
	}
	if strings.Contains(strings.Join(cmd.Args, " "), testKey) || !slices.Contains(cmd.Args, `model_providers.minimax.base_url="https://example.test/v1"`) {
		t.Fatalf("args %v", cmd.Args)
	}
	pr.mu.Lock()
	start := pr.start
	pr.mu.Unlock()
	if cmd.Dir != "/workspace" || !strings.Contains(start, `"sandbox":"danger-full-access"`) || !strings.Contains(start, `"cwd":"/workspace"`) {
		t.Fatalf("dir %q thread/start %s", cmd.Dir, start)
	}
	if prep.synced != 0 {
		t.Fatalf("MiniMax synced credentials %d times; its key is managed", prep.synced)
	}
}

// TestProjectRunOperatorKeyOnlyWhereAllowed: the operator's key and env
// reach a project container only when it shares the host's logins and
// project_env names them; otherwise the project's own secret
// MINIMAX_API_KEY is the CLI's key.
func TestProjectRunOperatorKeyOnlyWhereAllowed(t *testing.T) {
	for _, tt := range []struct {
		name       string
		shared     bool
		projectEnv []string
		want       []string
	}{
		{"own login, everything listed", false, []string{KeyVar, "EXTRA"}, []string{KeyVar + "=project-key"}},
		{"shared, nothing listed", true, nil, []string{KeyVar + "=project-key"}},
		{"shared, key listed", true, []string{KeyVar}, []string{KeyVar + "=" + testKey}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prep := &fakePreparer{target: providers.Target{ProjectID: "p", Container: "c1", SharedCredentials: tt.shared,
				Secrets: []providers.Secret{{Key: KeyVar, Value: "project-key"}}}}
			var cmd providers.Command
			pr := newPeer()
			p := New(providers.AdapterConfig{
				Env:        map[string]string{KeyVar: testKey, "EXTRA": "operator-extra"},
				ProjectEnv: tt.projectEnv,
				Preparer:   prep,
				Containers: runnertest.ContainersFunc(func(string) providers.Launcher {
					return runnertest.LauncherFunc(func(_ context.Context, c providers.Command) (providers.Process, error) {
						cmd = c
						return pr, nil
					})
				}),
			}, Options{BaseURL: "https://example.test/v1"})
			if err := p.Run(context.Background(), providers.RunRequest{Prompt: "x", ProjectID: "p"}, func(providers.Event) {}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, want := range tt.want {
				if !slices.Contains(cmd.Env, want) {
					t.Errorf("env lacks %s: %v", want, cmd.Env)
				}
			}
			env := strings.Join(cmd.Env, "\n")
			if !slices.Contains(tt.want, KeyVar+"="+testKey) && strings.Contains(env, testKey) {
				t.Errorf("the operator's key reached the container: %v", cmd.Env)
			}
			if strings.Contains(env, "operator-extra") != (tt.shared && slices.Contains(tt.projectEnv, "EXTRA")) {
				t.Errorf("EXTRA in env %v: want only in a shared project that lists it", cmd.Env)
			}
		})
	}
}
