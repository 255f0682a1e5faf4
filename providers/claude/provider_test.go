package claude

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit/fakeanthropic"
	"remote/providers"
	"remote/providers/runner/runnertest"
)

func TestArgs(t *testing.T) {
	t.Parallel()
	base := []string{"-p", "--output-format", "stream-json", "--include-partial-messages", "--verbose"}
	tests := []struct {
		name      string
		req       providers.RunRequest
		container bool
		extra     []string
		want      []string
	}{
		{"default", providers.RunRequest{}, false, nil, append(slices.Clone(base), "--dangerously-skip-permissions")},
		{"plan", providers.RunRequest{Mode: providers.ModePlan}, false, nil, append(slices.Clone(base), "--permission-mode", "plan")},
		{
			"model, effort, fast tier, resume, fork, extra",
			providers.RunRequest{Model: "opus", ResumeID: "s1", Fork: true, Preferences: providers.RunPreferences{ReasoningEffort: "high", ServiceTier: "fast"}},
			false, []string{"--x"},
			append(slices.Clone(base), "--dangerously-skip-permissions", "--model", "opus", "--effort", "high",
				"--settings", `{"fastMode":true}`, "--resume", "s1", "--fork-session", "--x"),
		},
		{"unknown effort dropped", providers.RunRequest{Preferences: providers.RunPreferences{ReasoningEffort: "ultra"}}, false, nil,
			append(slices.Clone(base), "--dangerously-skip-permissions")},
		{"fork without resume is plain", providers.RunRequest{Fork: true}, false, nil, append(slices.Clone(base), "--dangerously-skip-permissions")},
		{"browser only in a container", providers.RunRequest{EnableBrowser: true}, true, nil,
			append(slices.Clone(base), "--dangerously-skip-permissions", "--mcp-config", BrowserMCPConfigPath)},
		{"browser ignored on the host", providers.RunRequest{EnableBrowser: true}, false, nil,
			append(slices.Clone(base), "--dangerously-skip-permissions")},
	}
	for _, tt := range tests {
		if got := Args(tt.req, tt.extra, tt.container); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// fakeProcess is a finished child: scripted stdout and stderr, an exit
// code, and what was written to its stdin.
type fakeProcess struct {
	stdout, stderr io.Reader
	code           int
	stdin          *recorder
}

type recorder struct {
	mu     sync.Mutex
	buf    strings.Builder
	closed bool
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}
func (r *recorder) Close() error { r.mu.Lock(); defer r.mu.Unlock(); r.closed = true; return nil }

func (p *fakeProcess) Stdin() io.WriteCloser       { return p.stdin }
func (p *fakeProcess) Stdout() io.Reader           { return p.stdout }
func (p *fakeProcess) Stderr() io.Reader           { return p.stderr }
func (p *fakeProcess) Signal(syscall.Signal) error { return nil }
func (p *fakeProcess) Wait() error {
	if p.code != 0 {
		return &providers.ExitError{Code: p.code}
	}
	return nil
}

func TestRunProject(t *testing.T) {
	t.Parallel()
	const okStream = `{"type":"system","subtype":"init","session_id":"s-new","model":"claude-x"}
{"type":"stream_event","session_id":"s-new","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}}
{"type":"result","subtype":"success","is_error":false,"session_id":"s-new","usage":{"input_tokens":1,"output_tokens":2},"total_cost_usd":0.5}
`
	const notFound = `{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"x","errors":["No conversation found with session ID: 3f0e2a5c-1111-4222-8333-944455556666"]}
`
	tests := []struct {
		name       string
		req        providers.RunRequest
		stdout     string
		code       int
		wantTypes  []providers.EventType
		wantSynced bool
		wantErr    error
	}{
		{
			name:   "success syncs credentials",
			req:    providers.RunRequest{Prompt: "hello", ProjectID: "p1", RuntimeEnv: map[string]string{"REMOTE_TOKEN": "rt"}},
			stdout: okStream,
			wantTypes: []providers.EventType{providers.EventSystem, providers.EventSessionUpdated, providers.EventSystem,
				providers.EventAssistantDelta, providers.EventRunCompleted},
			wantSynced: true,
		},
		{
			name:      "unknown session",
			req:       providers.RunRequest{Prompt: "hello", ProjectID: "p1", ResumeID: "3f0e2a5c-1111-4222-8333-944455556666", RuntimeEnv: map[string]string{"REMOTE_TOKEN": "rt"}},
			stdout:    notFound,
			code:      1,
			wantTypes: []providers.EventType{providers.EventSystem},
			wantErr:   providers.ErrSessionNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var cmd providers.Command
			var container string
			stdin := &recorder{}
			synced := false
			p := New(providers.AdapterConfig{
				Env:        map[string]string{"EXTRA": "1", "ANTHROPIC_API_KEY": "sk-operator"},
				ProjectEnv: []string{"EXTRA"},
				Containers: runnertest.ContainersFunc(func(name string) providers.Launcher {
					container = name
					return runnertest.LauncherFunc(func(_ context.Context, c providers.Command) (providers.Process, error) {
						cmd = c
						return &fakeProcess{stdout: strings.NewReader(tt.stdout), stderr: strings.NewReader(""), code: tt.code, stdin: stdin}, nil
					})
				}),
				Preparer: runnertest.Preparer{
					PrepareFunc: func(_ context.Context, req providers.PrepareRequest, emit func(providers.Event)) (providers.Target, error) {
						if req.Provider != providers.Claude || req.ProjectID != "p1" {
							t.Errorf("prepare %+v", req)
						}
						emit(providers.Event{Type: providers.EventSystem, Subtype: "container_starting"})
						return providers.Target{ProjectID: "p1", Container: "proj-1", SharedCredentials: true, Secrets: []providers.Secret{
							{Key: "IS_SANDBOX", Value: "0"}, {Key: "HOME", Value: "/tmp"}, {Key: "GH_TOKEN", Value: "ghp"}, {Key: "REMOTE_TOKEN", Value: "secret"},
						}}, nil
					},
					SyncFunc: func(_ context.Context, tg providers.Target, id providers.ProviderID) error {
						synced = tg.Container == "proj-1" && id == providers.Claude
						return nil
					},
				},
			})
			var types []providers.EventType
			err := p.Run(context.Background(), tt.req, func(e providers.Event) { types = append(types, e.Type) })
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Run = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if !slices.Equal(types, tt.wantTypes) || synced != tt.wantSynced {
				t.Errorf("events %v synced %v", types, synced)
			}
			if container != "proj-1" || cmd.Path != "claude" || cmd.Dir != "/workspace" {
				t.Errorf("container %q command %+v", container, cmd)
			}
			for _, want := range []string{"IS_SANDBOX=1", "HOME=/root", "GH_TOKEN=ghp", "EXTRA=1", "REMOTE_TOKEN=rt"} {
				if !slices.Contains(cmd.Env, want) {
					t.Errorf("env %q lacks %s", cmd.Env, want)
				}
			}
			if strings.Contains(strings.Join(cmd.Env, " "), "sk-operator") {
				t.Errorf("env %q has the operator's key, which project_env does not name", cmd.Env)
			}
			if stdin.buf.String() != "hello" || !stdin.closed {
				t.Errorf("stdin %q closed %v: the prompt goes on stdin", stdin.buf.String(), stdin.closed)
			}
		})
	}

	t.Run("not wired", func(t *testing.T) {
		t.Parallel()
		err := New(providers.AdapterConfig{}).Run(context.Background(), providers.RunRequest{ProjectID: "p"}, func(providers.Event) {})
		if !errors.Is(err, ErrNotWired) {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	c, _ := New(providers.AdapterConfig{}).Capabilities(context.Background(), providers.CapabilityRequest{})
	if !c.Resume || !c.Fork || !c.PlanMode || c.Skills != providers.SkillsSlashCommand || !c.CredentialSync || !c.Browser || len(c.Efforts) == 0 {
		t.Fatalf("%+v", c)
	}
}

// Cancelling a run mid-stream with the real CLI is a normal stop: nil, no
// run.failed, no completion.
func TestCLICancel(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeanthropic.Slow(time.Second, fakeanthropic.Reply{Blocks: []fakeanthropic.Block{
		fakeanthropic.TextBlock("first"), fakeanthropic.TextBlock("second"), fakeanthropic.TextBlock("third"),
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var types []providers.EventType
	err := c.p.Run(ctx, providers.RunRequest{Prompt: "slow", Cwd: c.home}, func(e providers.Event) {
		mu.Lock()
		defer mu.Unlock()
		types = append(types, e.Type)
		if e.Type == providers.EventAssistantDelta {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("cancelled Run = %v, want nil", err)
	}
	if slices.Contains(types, providers.EventRunFailed) || slices.Contains(types, providers.EventRunCompleted) || !slices.Contains(types, providers.EventAssistantDelta) {
		t.Fatalf("events %v", types)
	}
}
