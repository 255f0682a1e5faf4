package minimax

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"remote/internal/testkit"
	"remote/internal/testkit/fakeopenai"
	"remote/providers"
	"remote/providers/runner"
)

const testKey = "mm-test-key-0123"

type recorder struct {
	mu     sync.Mutex
	events []providers.Event
}

func (r *recorder) emit(ev providers.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// TestRealCLIAgainstFake runs MiniMax through the pinned Codex CLI against
// the fake Responses server: the request reaches the configured endpoint
// with the managed key, the requested catalog model, and a shell command
// shows the environment the child really saw.
func TestRealCLIAgainstFake(t *testing.T) {
	bin := testkit.CodexBinary(t)
	srv, err := fakeopenai.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.RequireAPIKey(testKey)
	root := t.TempDir()
	home := filepath.Join(root, "minimax-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// Offline: no plugin or app fetches at start-up.
	if err := os.WriteFile(filepath.Join(home, "config.toml"),
		[]byte("[features]\nplugins = false\napps = false\nremote_plugin = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "daemon-key-must-not-leak")
	p := New(providers.AdapterConfig{
		Binary: bin,
		Args: []string{"-c", "model_providers.minimax.request_max_retries=0",
			"-c", "model_providers.minimax.stream_max_retries=0"},
		Env: map[string]string{"HOME": root, "OPENAI_API_KEY": "config-key-must-not-leak",
			"CODEX_HOME": "/elsewhere", KeyVar: "overridden"},
		Host: &runner.HostLauncher{},
	}, Options{BaseURL: srv.URL, APIKey: testKey, HostHome: home})

	srv.Enqueue(
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Shell("env | cut -d= -f1 | sort")}},
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("MiniMax says hi")}},
	)
	rec := &recorder{}
	err = p.Run(context.Background(), providers.RunRequest{Provider: providers.MiniMax, Prompt: "hi", Cwd: work,
		RuntimeEnv: map[string]string{"OPENAI_API_KEY": "runtime-key", "REMOTE_CHAT": "c1"}}, rec.emit)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	var names []string
	var text strings.Builder
	var completed bool
	for _, ev := range rec.events {
		if ev.Provider != providers.MiniMax {
			t.Fatalf("event %s has provider %q", ev.Type, ev.Provider)
		}
		switch ev.Type {
		case providers.EventToolCompleted:
			names = strings.Fields(ev.Output)
		case providers.EventAssistantDelta:
			text.WriteString(ev.Text)
		case providers.EventRunCompleted:
			completed = true
		case providers.EventSessionUpdated:
			if ev.Model != DefaultModel {
				t.Fatalf("session model %q, want %q", ev.Model, DefaultModel)
			}
		}
	}
	if !completed || text.String() != "MiniMax says hi" {
		t.Fatalf("run completed=%v text=%q", completed, text.String())
	}
	for _, name := range []string{"CODEX_HOME", KeyVar, "REMOTE_CHAT"} {
		if !slices.Contains(names, name) {
			t.Fatalf("child environment lacks %s: %v", name, names)
		}
	}
	if slices.Contains(names, "OPENAI_API_KEY") {
		t.Fatalf("child environment has OPENAI_API_KEY: %v", names)
	}
	// The rollout lives in the isolated home.
	if _, err := os.Stat(filepath.Join(home, "sessions")); err != nil {
		t.Fatalf("no sessions under the isolated CODEX_HOME: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("fake saw %d requests, want 2", len(reqs))
	}
	var body struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(reqs[0].Body, &body)
	if body.Model != DefaultModel || !reqs[0].HasAuth {
		t.Fatalf("request model %q auth %v", body.Model, reqs[0].HasAuth)
	}
}

func TestArgsCarryNoKey(t *testing.T) {
	p := New(providers.AdapterConfig{Args: []string{"-c", "x=1"}}, Options{APIKey: testKey})
	args := p.Args("MiniMax-M3")
	joined := strings.Join(args, " ")
	if strings.Contains(joined, testKey) {
		t.Fatal("the API key appears in the arguments")
	}
	for _, want := range []string{
		`model_provider="minimax"`, `model="MiniMax-M3"`, `model_context_window=1000000`,
		`model_providers.minimax.base_url="https://api.minimax.io/v1"`,
		`model_providers.minimax.env_key="MINIMAX_API_KEY"`, `model_providers.minimax.wire_api="responses"`,
	} {
		if !slices.Contains(args, want) {
			t.Fatalf("args lack %s: %v", want, args)
		}
	}
	if args[0] != "app-server" || args[len(args)-1] != "x=1" {
		t.Fatalf("args order: %v", args)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		req  providers.RunRequest
		is   error
	}{
		{"no key", Options{}, providers.RunRequest{Prompt: "x"}, ErrNoAPIKey},
		{"unknown model", Options{APIKey: "k"}, providers.RunRequest{Prompt: "x", Model: "gpt-5"}, ErrUnknownModel},
		{"no host launcher", Options{APIKey: "k"}, providers.RunRequest{Prompt: "x"}, ErrNotWired},
		{"projects not wired", Options{APIKey: "k"}, providers.RunRequest{Prompt: "x", ProjectID: "p"}, ErrNotWired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(providers.AdapterConfig{}, tt.opts).Run(context.Background(), tt.req, func(providers.Event) {})
			if !errors.Is(err, tt.is) {
				t.Fatalf("Run = %v, want %v", err, tt.is)
			}
			if strings.Contains(err.Error(), "k\"") {
				t.Fatalf("error leaks the key: %v", err)
			}
		})
	}
}
