package codexharness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/providers"
	"remote/providers/runner"
)

// summarize renders the fields of an event a test asserts on.
func summarize(ev providers.Event) string {
	var b strings.Builder
	b.WriteString(string(ev.Type))
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	add("session", ev.SessionID)
	add("model", ev.Model)
	add("item", ev.ItemID)
	add("tool", ev.ToolName)
	if len(ev.Text) > 40 {
		add("text", fmt.Sprintf("<%d bytes>", len(ev.Text)))
	} else {
		add("text", ev.Text)
	}
	add("output", ev.Output)
	add("interaction", ev.InteractionID)
	add("status", ev.Status)
	add("message", ev.Message)
	if ev.IsError {
		add("isError", "true")
	}
	if ev.Type == providers.EventProviderNative && ev.Native != nil {
		add("method", ev.Native.Method)
	}
	return b.String()
}

type recorder struct {
	mu     sync.Mutex
	events []providers.Event
	hook   func(providers.Event)
}

func (r *recorder) emit(ev providers.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	if r.hook != nil {
		r.hook(ev)
	}
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		out = append(out, summarize(ev))
	}
	return out
}

func fakeCommand(scenario string) providers.Command {
	// atexit_sleep_ms=0: a race-enabled child would otherwise linger 1 s at exit.
	return providers.Command{Path: os.Args[0], Env: []string{fakeEnv + "=" + scenario, "GORACE=atexit_sleep_ms=0"}}
}

func runFake(t *testing.T, ctx context.Context, scenario string, req providers.RunRequest, rec *recorder, timeout time.Duration) error {
	t.Helper()
	if req.Prompt == "" {
		req.Prompt = "hello"
	}
	cfg := Config{Provider: providers.Codex, InterruptTimeout: timeout,
		Settings: Settings{Model: "gpt-fake", ApprovalPolicy: "never", Sandbox: "danger-full-access"}}
	return Run(ctx, &runner.HostLauncher{}, fakeCommand(scenario), req, cfg, rec.emit)
}

func diff(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n got:\n  %s\n want:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestRunFullTurn(t *testing.T) {
	rec := &recorder{}
	if err := runFake(t, context.Background(), "full", providers.RunRequest{}, rec, 0); err != nil {
		t.Fatalf("Run: %v", err)
	}
	diff(t, rec.lines(), []string{
		"run.started model=gpt-fake",
		"provider.native method=configWarning",
		"session.updated session=thr-1 model=gpt-fake",
		"provider.native method=thread/started",
		"turn.status status=inProgress",
		"reasoning.delta item=rs-1 text=think",
		"reasoning.delta item=rs-1 text=ing",
		"reasoning.delta item=rs-1 text=raw",
		"assistant.delta item=m-1 text=Hel",
		"assistant.delta item=m-1 text=lo",
		"collaboration item=cm-1 tool=item/completed",
		"collaboration tool=turn/completed status=completed",
		"assistant.delta item=m-1 text= world",
		"tool.started item=c-1 tool=Bash status=inProgress",
		"tool.completed item=c-1 tool=Bash output=a\n status=completed",
		"tool.started item=c-2 tool=Bash status=failed",
		"tool.completed item=c-2 tool=Bash status=failed isError=true",
		"provider.native method=item/started",
		"collaboration item=co-1 tool=spawnAgent status=inProgress",
		"provider.native method=fancy/newThing",
		"turn.status status=retrying message=reconnecting",
		"usage.updated",
		"run.completed status=completed",
	})
	evs := rec.events
	last := evs[len(evs)-1]
	var u Usage
	if err := json.Unmarshal(last.Usage, &u); err != nil || u.InputTokens != 10 || u.CachedInputTokens != 3 ||
		u.OutputTokens != 5 || u.ReasoningOutputTokens != 2 || u.ModelContextWindow != 1000 {
		t.Fatalf("run.completed usage = %s (%v)", last.Usage, err)
	}
	for _, ev := range evs {
		if ev.Provider != providers.Codex {
			t.Fatalf("event %s has provider %q", ev.Type, ev.Provider)
		}
		if ev.Type == providers.EventProviderNative && (ev.Native == nil || ev.Native.SchemaVersion != providers.NativeSchemaVersion) {
			t.Fatalf("native event without a versioned envelope: %+v", ev)
		}
	}
}

func TestRunApprovalsStayPendingUntilAnswered(t *testing.T) {
	responses := make(chan providers.InteractionResponse, 8)
	rec := &recorder{}
	var requests []string
	rec.hook = func(ev providers.Event) {
		if ev.Type != providers.EventInteractionRequest {
			return
		}
		requests = append(requests, ev.InteractionID)
		if len(requests) == 3 {
			// Answer out of order; an unknown id and an empty answer are ignored.
			responses <- providers.InteractionResponse{ID: `"nope"`, Result: json.RawMessage(`{"decision":"accept"}`)}
			responses <- providers.InteractionResponse{ID: `7`}
			responses <- providers.InteractionResponse{ID: `7`, Result: json.RawMessage(`{"decision":"decline"}`)}
			responses <- providers.InteractionResponse{ID: `"req-42"`, Result: json.RawMessage(`{ "decision": "accept" }`)}
			responses <- providers.InteractionResponse{ID: `8`, Error: json.RawMessage(`{"code":-32601,"message":"unsupported"}`)}
		}
	}
	err := runFake(t, context.Background(), "approvals", providers.RunRequest{InteractionResponses: responses}, rec, 0)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	var answers []string
	for _, ev := range rec.events {
		if ev.Type == providers.EventProviderNative && ev.Native.Method == "test/answer" {
			var p struct{ Line string }
			_ = json.Unmarshal(ev.Native.Payload, &p)
			answers = append(answers, p.Line)
			continue
		}
		if strings.HasPrefix(string(ev.Type), "interaction.") {
			got = append(got, summarize(ev))
		}
	}
	diff(t, got, []string{
		`interaction.request item=c-1 tool=item/commandExecution/requestApproval interaction="req-42" status=pending`,
		`interaction.request item=c-2 tool=item/commandExecution/requestApproval interaction=7 status=pending`,
		`interaction.request tool=brand/newRequest interaction=8 status=pending`,
		`interaction.resolved item=c-2 tool=item/commandExecution/requestApproval interaction=7 status=denied`,
		`interaction.resolved item=c-1 tool=item/commandExecution/requestApproval interaction="req-42" status=approved`,
		`interaction.resolved tool=brand/newRequest interaction=8 status=error`,
		`interaction.request item=q-1 tool=item/tool/requestUserInput interaction=9 status=pending`,
		`interaction.resolved item=q-1 tool=item/tool/requestUserInput interaction=9 status=resolved`,
	})
	diff(t, answers, []string{
		`{"id":7,"result":{"decision":"decline"}}`,
		`{"id":"req-42","result":{"decision":"accept"}}`,
		`{"error":{"code":-32601,"message":"unsupported"},"id":8}`,
	})
}

func TestRunExpiresRequestsPendingAtTurnEnd(t *testing.T) {
	rec := &recorder{}
	if err := runFake(t, context.Background(), "abandoned", providers.RunRequest{}, rec, 0); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := rec.lines()
	diff(t, got[len(got)-3:], []string{
		`interaction.request item=f-1 tool=item/fileChange/requestApproval interaction="a-1" status=pending`,
		`interaction.resolved item=f-1 tool=item/fileChange/requestApproval interaction="a-1" status=expired`,
		"run.completed status=completed",
	})
}

func TestRunCancelInterruptsTurn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventAssistantDelta {
			cancel()
		}
	}}
	if err := runFake(t, ctx, "interrupt", providers.RunRequest{}, rec, time.Minute); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	got := rec.lines()
	diff(t, got[len(got)-2:], []string{"assistant.delta item=m-1 text=partial", "run.interrupted status=interrupted"})
}

func TestRunInterruptTimeoutKills(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventAssistantDelta {
			cancel()
		}
	}}
	if err := runFake(t, ctx, "hang", providers.RunRequest{}, rec, 200*time.Millisecond); err != nil {
		t.Fatalf("Run after interrupt timeout = %v, want nil", err)
	}
	got := rec.lines()
	if last := got[len(got)-1]; !strings.HasPrefix(last, "run.interrupted status=interrupted message=") {
		t.Fatalf("last event %q, want run.interrupted with a message", last)
	}
}

// An app-server that finished its turn but does not exit once stdin is
// closed (S19) is stopped after ExitGrace; the turn stands.
func TestRunLingeringAppServerIsStopped(t *testing.T) {
	rec := &recorder{}
	cfg := Config{Provider: providers.Codex, ExitGrace: 200 * time.Millisecond,
		Settings: Settings{Model: "gpt-fake", ApprovalPolicy: "never", Sandbox: "danger-full-access"}}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), &runner.HostLauncher{}, fakeCommand("linger"), providers.RunRequest{Prompt: "hi"}, cfg, rec.emit)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(5 * time.Second): // well under DefaultInterval: ExitGrace is honoured
		t.Fatal("Run did not return: the lingering app-server was not stopped after ExitGrace")
	}
	got := rec.lines()
	diff(t, got[len(got)-2:], []string{"assistant.delta item=m-1 text=done", "run.completed status=completed"})
}

func TestRunCancelBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := &recorder{}
	if err := runFake(t, ctx, "full", providers.RunRequest{}, rec, time.Minute); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	for _, l := range rec.lines() {
		if strings.HasPrefix(l, "assistant.") || strings.HasPrefix(l, "run.completed") {
			t.Fatalf("a turn ran after an early cancel: %q", l)
		}
	}
	if got := rec.lines(); got[len(got)-1] != "run.interrupted status=interrupted" {
		t.Fatalf("last event %q", got[len(got)-1])
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name     string
		scenario string
		req      providers.RunRequest
		is       error
		contains string
		last     string
	}{
		{"resume unknown", "resume-missing", providers.RunRequest{ResumeID: "thr-gone"}, providers.ErrSessionNotFound, "no rollout", ""},
		{"fork unknown", "resume-missing", providers.RunRequest{ResumeID: "thr-gone", Fork: true}, providers.ErrSessionNotFound, "thread/fork", ""},
		{"fork other error", "fork-other-error", providers.RunRequest{ResumeID: "zz", Fork: true}, ErrProtocol, "state db locked", ""},
		{"missing model", "no-model", providers.RunRequest{}, ErrProtocol, "model", ""},
		{"turn failed", "failed", providers.RunRequest{}, providers.ErrRunFailed, "", "run.failed status=failed message=unexpected status 401 Unauthorized"},
		{"exit early", "exit-early", providers.RunRequest{}, ErrProtocol, "panic: boom", ""},
		{"line too long", "long-line", providers.RunRequest{}, ErrProtocol, "too long", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			err := runFake(t, context.Background(), tt.scenario, tt.req, rec, 5*time.Second)
			if !errors.Is(err, tt.is) {
				t.Fatalf("Run = %v, want %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("error %q lacks %q", err, tt.contains)
			}
			if tt.last != "" {
				got := rec.lines()
				if got[len(got)-1] != tt.last {
					t.Fatalf("last event %q, want %q", got[len(got)-1], tt.last)
				}
			}
			for _, l := range rec.lines() {
				if strings.HasPrefix(l, "session.updated") && tt.req.ResumeID != "" && errors.Is(tt.is, providers.ErrSessionNotFound) {
					t.Fatalf("session.updated for a missing session: %q", l)
				}
			}
		})
	}
}

func TestRunBigReplyDedupesSnapshot(t *testing.T) {
	rec := &recorder{}
	if err := runFake(t, context.Background(), "big", providers.RunRequest{}, rec, 0); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var text strings.Builder
	for _, ev := range rec.events {
		if ev.Type == providers.EventAssistantDelta {
			text.WriteString(ev.Text)
		}
	}
	if want := strings.Repeat("b", 2<<20) + "!"; text.String() != want {
		t.Fatalf("assistant text is %d bytes, want %d", text.Len(), len(want))
	}
}

func TestResolvePolicies(t *testing.T) {
	tests := []struct {
		prefs         providers.RunPreferences
		container     bool
		approval, sbx string
		wantErr       bool
	}{
		{providers.RunPreferences{}, false, "never", "danger-full-access", false},
		{providers.RunPreferences{}, true, "never", "danger-full-access", false},
		{providers.RunPreferences{ApprovalPolicy: "on-request", SandboxPolicy: "workspace-write"}, false, "on-request", "workspace-write", false},
		{providers.RunPreferences{ApprovalPolicy: "untrusted", SandboxPolicy: "read-only"}, true, "untrusted", "danger-full-access", false},
		{providers.RunPreferences{ApprovalPolicy: "always"}, false, "", "", true},
		{providers.RunPreferences{SandboxPolicy: "dangerFullAccess"}, false, "", "", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v/%v", tt.prefs, tt.container), func(t *testing.T) {
			a, s, err := ResolvePolicies(tt.prefs, tt.container)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrBadPreference)) {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if a != tt.approval || s != tt.sbx {
				t.Fatalf("got %q/%q, want %q/%q", a, s, tt.approval, tt.sbx)
			}
		})
	}
}
