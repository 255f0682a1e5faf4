package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"remote/internal/testkit"
	"remote/internal/testkit/fakeopenai"
	"remote/providers"
	"remote/providers/runner"
)

// env is one real-Codex test environment: a fake Responses server and an
// isolated CODEX_HOME pointing at it.
type env struct {
	srv  *fakeopenai.Server
	home string
	p    *Provider
	cwd  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	bin := testkit.CodexBinary(t)
	srv, err := fakeopenai.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	root := t.TempDir()
	home := filepath.Join(root, "codex-home")
	if err := fakeopenai.WriteCodexConfig(home, fakeopenai.CodexConfig{BaseURL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(root, "work")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	p := New(providers.AdapterConfig{
		Binary: bin,
		Env: map[string]string{"CODEX_HOME": home, "HOME": root, "FAKE_OPENAI_API_KEY": "test-key",
			"OPENAI_API_KEY": "must-not-leak"},
		Host:   &runner.HostLauncher{},
		Logger: testLogger(t),
	})
	return &env{srv: srv, home: home, p: p, cwd: cwd}
}

// testLogger sends the adapter's log to the test log.
func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: tlogWriter{t}, DisableTime: true})
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type recorder struct {
	cwd    string // shown as <cwd>
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

// noise are native notifications Codex 0.169 sends around every turn;
// the sequence assertions list everything else.
var noise = map[string]bool{
	"configWarning": true, "remoteControl/status/changed": true, "thread/started": true,
	"thread/settings/updated": true, "warning": true, "account/rateLimits/updated": true,
	"thread/readState/changed": true, "mcpServer/startupStatus/updated": true,
	"deprecationNotice": true, "thread/goal/cleared": true, "turn/diff/updated": true,
	"thread/tokenUsage/updated": true, // a resumed thread replays its last usage
}

// sequence renders every event except the expected native noise; a thread
// id is shown as <thread>. Unexpected native methods are listed.
func (r *recorder) sequence(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	thread := ""
	for _, ev := range r.events {
		if ev.Provider != providers.Codex {
			t.Errorf("event %s has provider %q", ev.Type, ev.Provider)
		}
		if ev.Type == providers.EventProviderNative {
			if ev.Native == nil || ev.Native.SchemaVersion != providers.NativeSchemaVersion {
				t.Errorf("native event without a versioned envelope: %+v", ev)
			} else if !noise[ev.Native.Method] {
				out = append(out, "provider.native method="+ev.Native.Method)
			}
			continue
		}
		if ev.Type == providers.EventSessionUpdated {
			thread = ev.SessionID
		}
		s := summarize(ev)
		if thread != "" {
			s = strings.ReplaceAll(s, thread, "<thread>")
		}
		if r.cwd != "" {
			s = strings.ReplaceAll(s, r.cwd, "<cwd>")
		}
		out = append(out, s)
	}
	return out
}

func (r *recorder) text(typ providers.EventType) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ev := range r.events {
		if ev.Type == typ {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (r *recorder) session() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Type == providers.EventSessionUpdated {
			return ev.SessionID
		}
	}
	return ""
}

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
	if len(ev.Text) > 60 {
		add("text", fmt.Sprintf("<%d bytes>", len(ev.Text)))
	} else {
		add("text", ev.Text)
	}
	if ev.Type == providers.EventToolStarted {
		add("input", string(ev.Input))
	}
	add("output", ev.Output)
	add("interaction", ev.InteractionID)
	add("status", ev.Status)
	add("message", ev.Message)
	if ev.IsError {
		add("isError", "true")
	}
	return b.String()
}

func (e *env) run(t *testing.T, ctx context.Context, req providers.RunRequest, rec *recorder) error {
	t.Helper()
	req.Provider = providers.Codex
	if req.Prompt == "" {
		req.Prompt = "say hello"
	}
	req.Cwd = e.cwd
	rec.cwd = e.cwd
	return e.p.Run(ctx, req, rec.emit)
}

func want(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("event sequence:\n got:\n  %s\n want:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func reply(items ...fakeopenai.Item) fakeopenai.Reply {
	return fakeopenai.Reply{Items: items, Usage: fakeopenai.Usage{InputTokens: 10, CachedTokens: 2, OutputTokens: 5, ReasoningTokens: 1}}
}

func answerWith(decision string, responses chan<- providers.InteractionResponse) func(providers.Event) {
	return func(ev providers.Event) {
		if ev.Type == providers.EventInteractionRequest {
			responses <- providers.InteractionResponse{ID: ev.InteractionID, Result: []byte(`{"decision":"` + decision + `"}`)}
		}
	}
}

// TestRealCodex runs the pinned Codex CLI against the fake Responses
// server and asserts the whole normalized event sequence of each scenario.
func TestRealCodex(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 2<<20/16) // 2 MiB
	slow := strings.Repeat("slow ", 400)
	tests := []struct {
		name    string
		replies []fakeopenai.Reply
		req     providers.RunRequest
		answer  string // answer every interaction.request with this decision
		cancel  bool   // cancel the run at the first assistant.delta
		err     error
		want    []string
	}{
		{
			name:    "plain text",
			replies: []fakeopenai.Reply{reply(fakeopenai.Text("Hello from fake"))},
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				"assistant.delta item=msg_1_0 text=Hello from fake",
				"usage.updated",
				"turn.status status=idle",
				"run.completed status=completed",
			},
		},
		{
			name:    "plan mode",
			replies: []fakeopenai.Reply{reply(fakeopenai.Text("1. read\n2. change"))},
			req:     providers.RunRequest{Mode: providers.ModePlan},
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				"assistant.delta item=msg_1_0 text=1. read\n2. change",
				"usage.updated",
				"turn.status status=idle",
				"run.completed status=completed",
			},
		},
		{
			name:    "reasoning then text",
			replies: []fakeopenai.Reply{reply(fakeopenai.Reasoning("Thinking about it"), fakeopenai.Text("The answer"))},
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				"reasoning.delta item=rs_1_0 text=Thinking about it",
				"assistant.delta item=msg_1_1 text=The answer",
				"usage.updated",
				"turn.status status=idle",
				"run.completed status=completed",
			},
		},
		{
			name: "shell tool call then answer",
			replies: []fakeopenai.Reply{
				reply(fakeopenai.Shell("echo contract-ok")),
				reply(fakeopenai.Text("It printed contract-ok")),
			},
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				`tool.started item=call_1_0 tool=Bash input={"command":"/bin/bash -lc 'echo contract-ok'","cwd":"<cwd>"} status=inProgress`,
				"tool.completed item=call_1_0 tool=Bash output=contract-ok\n status=completed",
				"usage.updated",
				"assistant.delta item=msg_2_0 text=It printed contract-ok",
				"usage.updated",
				"turn.status status=idle",
				"run.completed status=completed",
			},
		},
		{
			name:    "api error 401",
			replies: []fakeopenai.Reply{{Status: 401, ErrorCode: "invalid_api_key", ErrorMessage: "Incorrect API key provided"}},
			err:     providers.ErrRunFailed,
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				"turn.status status=systemError",
				"run.failed status=failed message=unexpected status 401 Unauthorized: Incorrect API key provided, url: <url>/responses",
			},
		},
		{
			name:    "overloaded",
			replies: []fakeopenai.Reply{{FailCode: "server_is_overloaded"}},
			err:     providers.ErrRunFailed,
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				"turn.status status=systemError",
				"run.failed status=failed message=Selected model is at capacity. Please try a different model.",
			},
		},
		{
			name:    "overloaded http 503",
			replies: []fakeopenai.Reply{{Status: 503, ErrorCode: "server_is_overloaded", ErrorMessage: "The server is overloaded"}},
			err:     providers.ErrRunFailed,
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				"turn.status status=systemError",
				"run.failed status=failed message=Selected model is at capacity. Please try a different model.",
			},
		},
		{
			name: "approval accepted",
			replies: []fakeopenai.Reply{
				reply(fakeopenai.Shell("echo approved-run")),
				reply(fakeopenai.Text("ran")),
			},
			req:    providers.RunRequest{Preferences: providers.RunPreferences{ApprovalPolicy: "untrusted"}},
			answer: "accept",
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				`tool.started item=call_1_0 tool=Bash input={"command":"/bin/bash -lc 'echo approved-run'","cwd":"<cwd>"} status=inProgress`,
				"interaction.request item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=pending",
				"interaction.resolved item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=approved",
				"tool.completed item=call_1_0 tool=Bash output=approved-run\n status=completed",
				"usage.updated",
				"assistant.delta item=msg_2_0 text=ran",
				"usage.updated",
				"turn.status status=idle",
				"run.completed status=completed",
			},
		},
		{
			name: "approval declined",
			replies: []fakeopenai.Reply{
				reply(fakeopenai.Shell("echo declined-run")),
				reply(fakeopenai.Text("not run")),
			},
			req:    providers.RunRequest{Preferences: providers.RunPreferences{ApprovalPolicy: "untrusted"}},
			answer: "decline",
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				`tool.started item=call_1_0 tool=Bash input={"command":"/bin/bash -lc 'echo declined-run'","cwd":"<cwd>"} status=inProgress`,
				"interaction.request item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=pending",
				"interaction.resolved item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=denied",
				"tool.completed item=call_1_0 tool=Bash status=declined isError=true",
				"usage.updated",
				"assistant.delta item=msg_2_0 text=not run",
				"usage.updated",
				"turn.status status=idle",
				"run.completed status=completed",
			},
		},
		{
			name:    "approval cancelled",
			replies: []fakeopenai.Reply{reply(fakeopenai.Shell("echo cancelled-run")), reply(fakeopenai.Text("unused"))},
			req:     providers.RunRequest{Preferences: providers.RunPreferences{ApprovalPolicy: "untrusted"}},
			answer:  "cancel",
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				`tool.started item=call_1_0 tool=Bash input={"command":"/bin/bash -lc 'echo cancelled-run'","cwd":"<cwd>"} status=inProgress`,
				"interaction.request item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=pending",
				"interaction.resolved item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=cancelled",
				"tool.completed item=call_1_0 tool=Bash status=declined isError=true",
				"usage.updated",
				"turn.status status=idle",
				"run.interrupted status=interrupted",
			},
		},
		{
			name:    "interrupt during slow stream",
			replies: []fakeopenai.Reply{{Items: []fakeopenai.Item{fakeopenai.Text(slow)}, ChunkSize: 5, ChunkDelay: 20 * 1e6, Hang: true}},
			cancel:  true,
			want: []string{
				"run.started",
				"session.updated session=<thread> model=gpt-fake",
				"turn.status status=active",
				"turn.status status=inProgress",
				"assistant.delta item=msg_1_0 text=slow ",
				"turn.status status=idle",
				"run.interrupted status=interrupted",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.srv.Enqueue(tt.replies...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			responses := make(chan providers.InteractionResponse, 4)
			req := tt.req
			req.InteractionResponses = responses
			rec := &recorder{}
			switch {
			case tt.answer != "":
				rec.hook = answerWith(tt.answer, responses)
			case tt.cancel:
				rec.hook = func(ev providers.Event) {
					if ev.Type == providers.EventAssistantDelta {
						cancel()
					}
				}
			}
			err := e.run(t, ctx, req, rec)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("Run = %v, want %v", err, tt.err)
			}
			got := rec.sequence(t)
			if tt.cancel {
				got = firstDeltaOnly(got)
			}
			if tt.answer != "" {
				got = withoutMidTurnActive(got)
				if !rec.waitedOnApproval() {
					t.Fatal("no turn.status reported waitingOnApproval")
				}
			}
			for i := range got {
				got[i] = strings.ReplaceAll(got[i], e.srv.URL, "<url>")
			}
			want(t, got, tt.want...)
			if tt.req.Mode == providers.ModePlan {
				reqs := e.srv.Requests()
				if body := strings.ToLower(string(reqs[0].Body)); !strings.Contains(body, "plan mode") {
					t.Fatalf("plan mode did not reach the model's instructions: %.300s", body)
				}
			}
			_ = big
			_ = slow
		})
	}
}

// firstDeltaOnly drops assistant deltas after the first: how many arrive
// before the interrupt lands depends on timing.
func firstDeltaOnly(seq []string) []string {
	var out []string
	seen := false
	for _, s := range seq {
		if strings.HasPrefix(s, "assistant.delta") {
			if seen {
				continue
			}
			seen = true
		}
		out = append(out, s)
	}
	return out
}

func TestRealCodexBigReply(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("0123456789abcdef", 2<<20/16) // 2 MiB
	e.srv.Enqueue(fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text(big)}, ChunkSize: 64 << 10})
	rec := &recorder{}
	if err := e.run(t, context.Background(), providers.RunRequest{}, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := rec.text(providers.EventAssistantDelta); got != big {
		t.Fatalf("assistant text is %d bytes, want the %d-byte reply exactly once", len(got), len(big))
	}
	var kinds []string
	for _, s := range rec.sequence(t) {
		if !strings.HasPrefix(s, "assistant.delta") {
			kinds = append(kinds, s)
		}
	}
	want(t, kinds,
		"run.started",
		"session.updated session=<thread> model=gpt-fake",
		"turn.status status=active",
		"turn.status status=inProgress",
		"usage.updated",
		"turn.status status=idle",
		"run.completed status=completed",
	)
}

func TestRealCodexResumeAndFork(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(reply(fakeopenai.Text("first answer")), reply(fakeopenai.Text("second answer")), reply(fakeopenai.Text("forked answer")))

	first := &recorder{}
	if err := e.run(t, context.Background(), providers.RunRequest{Prompt: "first question"}, first); err != nil {
		t.Fatalf("first run: %v", err)
	}
	thread := first.session()
	if thread == "" {
		t.Fatal("first run reported no session")
	}

	second := &recorder{}
	if err := e.run(t, context.Background(), providers.RunRequest{Prompt: "second question", ResumeID: thread}, second); err != nil {
		t.Fatalf("resume: %v", err)
	}
	// Resuming keeps the thread: no session.updated.
	want(t, second.sequence(t),
		"run.started",
		"turn.status status=idle",
		"turn.status status=active",
		"turn.status status=inProgress",
		"assistant.delta item=msg_2_0 text=second answer",
		"usage.updated",
		"turn.status status=idle",
		"run.completed status=completed",
	)
	reqs := e.srv.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "first answer") || !strings.Contains(body, "second question") {
		t.Fatalf("resumed request does not carry the earlier turn: %.300s", body)
	}

	forked := &recorder{}
	if err := e.run(t, context.Background(), providers.RunRequest{Prompt: "third question", ResumeID: thread, Fork: true}, forked); err != nil {
		t.Fatalf("fork: %v", err)
	}
	if s := forked.session(); s == "" || s == thread {
		t.Fatalf("fork session = %q, want a new thread id (parent %q)", s, thread)
	}
	reqs = e.srv.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "second answer") {
		t.Fatalf("forked request does not carry the parent history: %.300s", body)
	}
}

func TestRealCodexResumeUnknownSession(t *testing.T) {
	tests := []struct {
		name string
		fork bool
	}{{"resume", false}, {"fork", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rec := &recorder{}
			err := e.run(t, context.Background(), providers.RunRequest{ResumeID: "01a23790-0000-7000-8000-000000000000", Fork: tt.fork}, rec)
			if !errors.Is(err, providers.ErrSessionNotFound) {
				t.Fatalf("Run = %v, want ErrSessionNotFound", err)
			}
			want(t, rec.sequence(t), "run.started")
			if n := len(e.srv.Requests()); n != 0 {
				t.Fatalf("the model was called %d times for an unknown session", n)
			}
		})
	}
}

// TestRealCodexChildEnvironment shows the environment the CLI really ran
// with: OPENAI_API_KEY is gone even when the daemon and the adapter config
// set it (S13), and CODEX_HOME is the configured home.
func TestRealCodexChildEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "daemon-key-must-not-leak")
	e := newEnv(t)
	e.srv.Enqueue(reply(fakeopenai.Shell(`env | grep -E '^(OPENAI_API_KEY|CODEX_HOME)=' | cut -d= -f1; echo "home=$CODEX_HOME"`)),
		reply(fakeopenai.Text("done")))
	rec := &recorder{}
	if err := e.run(t, context.Background(), providers.RunRequest{RuntimeEnv: map[string]string{"OPENAI_API_KEY": "rt"}}, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var out string
	for _, ev := range rec.events {
		if ev.Type == providers.EventToolCompleted {
			out = ev.Output
		}
	}
	if out != "CODEX_HOME\nhome="+e.home+"\n" {
		t.Fatalf("child environment output %q", out)
	}
}

// withoutMidTurnActive drops turn.status active events after the turn
// started: Codex sends them around approvals in an order that races with
// the item notifications.
func withoutMidTurnActive(seq []string) []string {
	var out []string
	started := false
	for _, s := range seq {
		if started && s == "turn.status status=active" {
			continue
		}
		if s == "turn.status status=inProgress" {
			started = true
		}
		out = append(out, s)
	}
	return out
}

// waitedOnApproval reports whether a turn.status carried the
// waitingOnApproval flag.
func (r *recorder) waitedOnApproval() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Type == providers.EventTurnStatus && strings.Contains(string(ev.Data), "waitingOnApproval") {
			return true
		}
	}
	return false
}

// TestRealCodexCancelWhileApprovalPending: a cancel never answers the
// pending request for the user. Codex 0.169 ends the interrupted turn
// without settling the request, so the harness closes its card as expired.
func TestRealCodexCancelWhileApprovalPending(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(reply(fakeopenai.Shell("echo never-run")), reply(fakeopenai.Text("unused")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventInteractionRequest {
			cancel()
		}
	}}
	req := providers.RunRequest{Preferences: providers.RunPreferences{ApprovalPolicy: "untrusted"},
		InteractionResponses: make(chan providers.InteractionResponse)}
	if err := e.run(t, ctx, req, rec); err != nil {
		t.Fatalf("Run = %v, want nil after a cancel", err)
	}
	var tail []string
	for _, s := range withoutMidTurnActive(rec.sequence(t)) {
		if strings.HasPrefix(s, "interaction.") || strings.HasPrefix(s, "run.") || strings.HasPrefix(s, "tool.") {
			tail = append(tail, s)
		}
	}
	want(t, tail,
		"run.started",
		`tool.started item=call_1_0 tool=Bash input={"command":"/bin/bash -lc 'echo never-run'","cwd":"<cwd>"} status=inProgress`,
		"interaction.request item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=pending",
		"interaction.resolved item=call_1_0 tool=item/commandExecution/requestApproval interaction=0 status=expired",
		"run.interrupted status=interrupted",
	)
}

// TestRealCodexPreferences: model, reasoning effort and service tier from
// the request reach the model call.
func TestRealCodexPreferences(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(reply(fakeopenai.Text("ok")))
	rec := &recorder{}
	req := providers.RunRequest{Model: "gpt-other", Preferences: providers.RunPreferences{ReasoningEffort: "high", ServiceTier: "flex"}}
	if err := e.run(t, context.Background(), req, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var body struct {
		Model       string `json:"model"`
		ServiceTier string `json:"service_tier"`
		Reasoning   struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
	}
	if err := json.Unmarshal(e.srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "gpt-other" || body.Reasoning.Effort != "high" || body.ServiceTier != "flex" {
		t.Fatalf("model call carried %+v", body)
	}
	if s := rec.sequence(t); s[1] != "session.updated session=<thread> model=gpt-other" {
		t.Fatalf("session event %q", s[1])
	}
}
