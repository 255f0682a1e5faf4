package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"remote/providers"
	"remote/providers/runner/runnertest"
)

func TestCheckAuthRecord(t *testing.T) {
	tests := []struct {
		name   string
		record string // "" = no file
		refuse bool
	}{
		{"no record", "", false},
		{"api key login (codex login --with-api-key)", `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-x"}`, true},
		{"api key spelled apiKey", `{"auth_mode":"apiKey"}`, true},
		{"chatgpt login", `{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"x"}}`, false},
		{"chatgpt login that also kept a key", `{"auth_mode":"chatgpt","OPENAI_API_KEY":"sk-x","tokens":{}}`, false},
		{"legacy record with only a key", `{"OPENAI_API_KEY":"sk-x"}`, true},
		{"legacy record with key and tokens", `{"OPENAI_API_KEY":"sk-x","tokens":{"id_token":"x"}}`, false},
		{"legacy record with empty key", `{"OPENAI_API_KEY":""}`, false},
		{"malformed record", `{"auth_mode":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "auth.json")
			if tt.record != "" {
				if err := os.WriteFile(path, []byte(tt.record), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckAuthRecord(path)
			if got := errors.Is(err, ErrAPIKeyAuth); got != tt.refuse {
				t.Fatalf("CheckAuthRecord = %v, refuse want %v", err, tt.refuse)
			}
			if err != nil && strings.Contains(err.Error(), "sk-x") {
				t.Fatalf("error leaks the key: %v", err)
			}
		})
	}
}

func TestRunRefusesAPIKeyAuthBeforeStarting(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "auth.json"), []byte(`{"auth_mode":"apikey","OPENAI_API_KEY":"sk-secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := New(providers.AdapterConfig{Env: map[string]string{"CODEX_HOME": home},
		Host: runnertest.LauncherFunc(func(context.Context, providers.Command) (providers.Process, error) {
			t.Fatal("the CLI was started despite an API-key auth record")
			return nil, nil
		})})
	err := p.Run(context.Background(), providers.RunRequest{Prompt: "x"}, func(providers.Event) {})
	if !errors.Is(err, ErrAPIKeyAuth) || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("Run = %v, want ErrAPIKeyAuth without the key", err)
	}
}

// peerProcess is an in-memory app-server: it answers the handshake, streams
// one delta and completes the turn with status, recording what it got.
type peerProcess struct {
	inR, outR *io.PipeReader
	inW, outW *io.PipeWriter
	done      chan struct{}

	mu   sync.Mutex
	msgs []map[string]json.RawMessage
}

func startPeer(status string) *peerProcess {
	p := &peerProcess{done: make(chan struct{})}
	p.inR, p.inW = io.Pipe()
	p.outR, p.outW = io.Pipe()
	go func() {
		defer close(p.done)
		defer p.outW.Close()
		sc := bufio.NewScanner(p.inR)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			p.mu.Lock()
			p.msgs = append(p.msgs, m)
			p.mu.Unlock()
			var method string
			_ = json.Unmarshal(m["method"], &method)
			switch method {
			case "initialize":
				fmt.Fprintf(p.outW, `{"id":%s,"result":{}}`+"\n", m["id"])
			case "thread/start":
				fmt.Fprintf(p.outW, `{"id":%s,"result":{"thread":{"id":"thr-p"},"model":"gpt-x"}}`+"\n", m["id"])
			case "turn/start":
				fmt.Fprintf(p.outW, `{"id":%s,"result":{"turn":{"id":"turn-p"}}}`+"\n", m["id"])
				fmt.Fprintf(p.outW, `{"method":"item/agentMessage/delta","params":{"threadId":"thr-p","turnId":"turn-p","itemId":"m","delta":"ok"}}`+"\n")
				fmt.Fprintf(p.outW, `{"method":"turn/completed","params":{"threadId":"thr-p","turn":{"id":"turn-p","status":%q,"error":{"message":"boom"}}}}`+"\n", status)
			}
		}
	}()
	return p
}

func (p *peerProcess) Stdin() io.WriteCloser       { return p.inW }
func (p *peerProcess) Stdout() io.Reader           { return p.outR }
func (p *peerProcess) Stderr() io.Reader           { return strings.NewReader("") }
func (p *peerProcess) Signal(syscall.Signal) error { return nil }
func (p *peerProcess) Wait() error                 { <-p.done; return nil }
func (p *peerProcess) params(method string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.msgs {
		if strings.Contains(string(m["method"]), method) {
			return string(m["params"])
		}
	}
	return ""
}

// fakePreparer records calls; its behaviour comes from func fields.
type fakePreparer struct {
	prepare func(req providers.PrepareRequest) (providers.Target, error)
	synced  []providers.ProviderID
}

func (f *fakePreparer) Prepare(_ context.Context, req providers.PrepareRequest, emit func(providers.Event)) (providers.Target, error) {
	emit(providers.Event{Type: providers.EventSystem, Subtype: "container_starting"})
	return f.prepare(req)
}

func (f *fakePreparer) SyncCredentials(_ context.Context, _ providers.Target, p providers.ProviderID) error {
	f.synced = append(f.synced, p)
	return errors.New("sync is best effort")
}

func TestProjectRun(t *testing.T) {
	tests := []struct {
		name   string
		status string
		err    error
		synced int
	}{
		{"completed syncs credentials", "completed", nil, 1},
		{"failed does not sync", "failed", providers.ErrRunFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prep := &fakePreparer{prepare: func(req providers.PrepareRequest) (providers.Target, error) {
				if req.Provider != providers.Codex || req.ProjectID != "proj" || !req.EnableBrowser {
					t.Errorf("Prepare got %+v", req)
				}
				return providers.Target{ProjectID: "proj", Container: "remote-proj", Secrets: []providers.Secret{
					{Key: "OPENAI_API_KEY", Value: "secret-openai"}, {Key: "CODEX_HOME", Value: "/tmp/evil"},
					{Key: "HOME", Value: "/tmp/evil"}, {Key: "GITHUB_TOKEN", Value: "gh"}, {Key: "SHARED", Value: "secret"},
				}}, nil
			}}
			var cmd providers.Command
			var container string
			peer := startPeer(tt.status)
			p := New(providers.AdapterConfig{
				Env:      map[string]string{"CODEX_HOME": t.TempDir()}, // the host home, no auth record
				Preparer: prep,
				Containers: runnertest.ContainersFunc(func(name string) providers.Launcher {
					container = name
					return runnertest.LauncherFunc(func(_ context.Context, c providers.Command) (providers.Process, error) {
						cmd = c
						return peer, nil
					})
				}),
			})
			var events []string
			err := p.Run(context.Background(), providers.RunRequest{Prompt: "x", ProjectID: "proj", EnableBrowser: true,
				Cwd: "/host/dir", RuntimeEnv: map[string]string{"SHARED": "runtime", "OPENAI_API_KEY": "rt"}},
				func(ev providers.Event) { events = append(events, string(ev.Type)) })
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("Run = %v, want %v", err, tt.err)
			}
			if container != "remote-proj" || cmd.Dir != "/workspace" || cmd.Path != "codex" || cmd.Args[0] != "app-server" {
				t.Fatalf("container %q command %+v", container, cmd)
			}
			for _, want := range []string{"HOME=/root", "CODEX_HOME=/root/.codex", "GITHUB_TOKEN=gh", "SHARED=runtime"} {
				if !slices.Contains(cmd.Env, want) {
					t.Fatalf("env lacks %s: %v", want, cmd.Env)
				}
			}
			for _, kv := range cmd.Env {
				if strings.HasPrefix(kv, "OPENAI_API_KEY=") {
					t.Fatalf("env has %s", kv)
				}
			}
			start := peer.params("thread/start")
			if !strings.Contains(start, `"sandbox":"danger-full-access"`) || !strings.Contains(start, `"cwd":"/workspace"`) ||
				!strings.Contains(start, `"approvalPolicy":"never"`) {
				t.Fatalf("thread/start params %s", start)
			}
			if events[0] != "system" {
				t.Fatalf("preparation events not passed through: %v", events)
			}
			if len(prep.synced) != tt.synced {
				t.Fatalf("SyncCredentials called %d times, want %d", len(prep.synced), tt.synced)
			}
		})
	}
}

func TestProjectRunPrepareFailure(t *testing.T) {
	boom := errors.New("lxd unreachable")
	p := New(providers.AdapterConfig{
		Env:      map[string]string{"CODEX_HOME": t.TempDir()},
		Preparer: &fakePreparer{prepare: func(providers.PrepareRequest) (providers.Target, error) { return providers.Target{}, boom }},
		Containers: runnertest.ContainersFunc(func(string) providers.Launcher {
			t.Fatal("launcher asked for after a failed preparation")
			return nil
		}),
	})
	err := p.Run(context.Background(), providers.RunRequest{Prompt: "x", ProjectID: "proj"}, func(providers.Event) {})
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the preparation error", err)
	}
}
