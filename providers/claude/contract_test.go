package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/providers"
)

// cliRun runs the real Claude CLI on the host against srv and returns the
// normalized events and Run's error.
type cliRun struct {
	t    *testing.T
	srv  *fakeanthropic.Server
	home string
	p    *Provider
}

func newCLI(t *testing.T, replies ...fakeanthropic.Reply) *cliRun {
	t.Helper()
	bin := testkit.ClaudeBinary(t)
	srv := fakeanthropic.New(t, replies...)
	home := t.TempDir()
	p := New(providers.AdapterConfig{
		Binary: bin,
		Env: map[string]string{
			"HOME":               home,
			"ANTHROPIC_BASE_URL": srv.URL,
			"ANTHROPIC_API_KEY":  "sk-ant-test-dummy",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
		},
	})
	return &cliRun{t: t, srv: srv, home: home, p: p}
}

func (c *cliRun) run(req providers.RunRequest) ([]providers.Event, error) {
	c.t.Helper()
	if req.Cwd == "" {
		req.Cwd = c.home
	}
	var mu sync.Mutex
	var evs []providers.Event
	err := c.p.Run(context.Background(), req, func(e providers.Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	})
	return evs, err
}

// normalize renders events as "type key=value" lines, with the session id
// replaced by <sid> and volatile fields dropped.
func normalize(evs []providers.Event) []string {
	var out []string
	for _, e := range evs {
		s := string(e.Type)
		switch e.Type {
		case providers.EventSessionUpdated:
			s += " session=<sid>"
			if e.Model != "" {
				s += " model=" + e.Model
			}
		case providers.EventSystem:
			s += "/" + e.Subtype
		case providers.EventAssistantDelta, providers.EventReasoningDelta:
			text := e.Text
			if len(text) > 40 {
				text = fmt.Sprintf("%s…(%d bytes)", text[:20], len(text))
			}
			s += fmt.Sprintf(" %q", text)
		case providers.EventToolStarted:
			s += fmt.Sprintf(" %s %s", e.ToolName, e.Input)
		case providers.EventToolCompleted:
			s += fmt.Sprintf(" %s %q error=%v", e.ToolName, e.Output, e.IsError)
		case providers.EventRunCompleted:
			var u Usage
			_ = json.Unmarshal(e.Usage, &u)
			u.DurationMs = 0 // wall-clock
			b, _ := json.Marshal(u)
			s += " " + string(b)
		case providers.EventRunFailed, providers.EventError:
			s += " " + e.Message
		case providers.EventProviderNative:
			s += " " + e.Native.Method
		}
		out = append(out, s)
	}
	return out
}

// The usage of one fake reply (10 in, 5 out) and of two.
const (
	usage1 = `run.completed {"inputTokens":10,"cachedInputTokens":0,"outputTokens":5,"totalTokens":15,"costUsd":0.00014000000000000001,"turns":1}`
	usage2 = `run.completed {"inputTokens":20,"cachedInputTokens":0,"outputTokens":10,"totalTokens":30,"costUsd":0.00028000000000000003,"turns":2}`
	model  = "claude-opus-5-5" // the CLI's default model, echoed by the fake server
)

func checkSeq(t *testing.T, evs []providers.Event, want []string) {
	t.Helper()
	got := normalize(evs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// sessionOf returns the session id of the first session.updated event.
func sessionOf(evs []providers.Event) string {
	for _, e := range evs {
		if e.Type == providers.EventSessionUpdated {
			return e.SessionID
		}
	}
	return ""
}

// The real Claude Code CLI against the fake Messages API: the full
// normalized event sequence for each scenario.
func TestCLIContract(t *testing.T) {
	t.Parallel()
	start := []string{"session.updated session=<sid> model=" + model, "system/init", "system/status"}
	seq := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}

	t.Run("plain text", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, fakeanthropic.Text("Hello world"))
		evs, err := c.run(providers.RunRequest{Prompt: "say hello"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkSeq(t, evs, seq(start, []string{`assistant.delta "Hello "`, `assistant.delta "world"`, usage1}))
		if reqs := c.srv.MessageRequests(); len(reqs) != 1 || !strings.Contains(reqs[0].UserText(), "say hello") {
			t.Errorf("the prompt did not reach the model via stdin: %d requests", len(reqs))
		}
		for _, e := range evs {
			if e.Provider != providers.Claude {
				t.Errorf("event %s without provider", e.Type)
			}
		}
	})

	t.Run("thinking then text", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, fakeanthropic.Thinking("let me think", "Answer"))
		evs, err := c.run(providers.RunRequest{Prompt: "think"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkSeq(t, evs, seq(start, []string{
			"system/thinking_tokens", `reasoning.delta "let me"`,
			"system/thinking_tokens", `reasoning.delta " think"`,
			`assistant.delta "Ans"`, `assistant.delta "wer"`, usage1,
		}))
	})

	t.Run("bash tool then answer", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t,
			fakeanthropic.ToolUse("Bash", `{"command":"echo contract-out","description":"print"}`),
			fakeanthropic.AfterToolResult(fakeanthropic.Text("done")))
		evs, err := c.run(providers.RunRequest{Prompt: "run echo"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkSeq(t, evs, seq(start, []string{
			`tool.started Bash {"command":"echo contract-out","description":"print"}`,
			`tool.completed Bash "contract-out" error=false`,
			"system/status",
			`assistant.delta "do"`, `assistant.delta "ne"`, usage2,
		}))
		reqs := c.srv.MessageRequests()
		if len(reqs) != 2 {
			t.Fatalf("%d model requests, want 2", len(reqs))
		}
		tr := reqs[1].LastToolResult()
		if len(tr) != 1 || tr[0].Content != "contract-out" || tr[0].IsError {
			t.Errorf("tool result sent to the model: %+v", tr)
		}
		var started, completed providers.Event
		for _, e := range evs {
			switch e.Type {
			case providers.EventToolStarted:
				started = e
			case providers.EventToolCompleted:
				completed = e
			}
		}
		if started.ItemID == "" || started.ItemID != completed.ItemID || started.ItemID != tr[0].ToolUseID {
			t.Errorf("tool ids: started %q completed %q model %q", started.ItemID, completed.ItemID, tr[0].ToolUseID)
		}
	})

	t.Run("failing bash tool", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t,
			fakeanthropic.ToolUse("Bash", `{"command":"echo oops >&2; exit 3","description":"fail"}`),
			fakeanthropic.Text("saw it"))
		evs, err := c.run(providers.RunRequest{Prompt: "fail"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkSeq(t, evs, seq(start, []string{
			`tool.started Bash {"command":"echo oops >&2; exit 3","description":"fail"}`,
			`tool.completed Bash "Exit code 3\noops" error=true`,
			"system/status",
			`assistant.delta "saw"`, `assistant.delta " it"`, usage2,
		}))
	})

	for _, tt := range []struct {
		status int
		msg    string
	}{
		{401, "Invalid API key · Fix external API key (HTTP 401)"},
		{529, "API Error: 529 Overloaded."},
	} {
		t.Run(fmt.Sprintf("api error %d", tt.status), func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, fakeanthropic.Error(tt.status))
			evs, err := c.run(providers.RunRequest{Prompt: "hi"})
			if !errors.Is(err, providers.ErrRunFailed) {
				t.Fatalf("Run = %v, want ErrRunFailed", err)
			}
			got := normalize(evs)
			if len(got) != 4 || strings.Join(got[:3], "\n") != strings.Join(start, "\n") || !strings.HasPrefix(got[3], "run.failed "+tt.msg) {
				t.Errorf("events:\n%s\nwant start then run.failed %s", strings.Join(got, "\n"), tt.msg)
			}
		})
	}

	t.Run("2 MiB reply", func(t *testing.T) {
		t.Parallel()
		big := strings.Repeat("0123456789abcdef", 2<<20/16)
		c := newCLI(t, fakeanthropic.Text(big))
		evs, err := c.run(providers.RunRequest{Prompt: "big"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		var text strings.Builder
		var types []string
		for _, e := range evs {
			if e.Type == providers.EventAssistantDelta {
				text.WriteString(e.Text)
				if len(types) > 0 && types[len(types)-1] == "assistant.delta*" {
					continue
				}
				types = append(types, "assistant.delta*")
				continue
			}
			types = append(types, normalize([]providers.Event{e})[0])
		}
		if text.String() != big {
			t.Errorf("assistant text: %d bytes, want the 2 MiB reply exactly", text.Len())
		}
		want := seq(start, []string{"assistant.delta*", usage1})
		if strings.Join(types, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(types, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("resume and fork", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, fakeanthropic.Text("first answer"), fakeanthropic.Text("second answer"), fakeanthropic.Text("forked answer"))
		evs, err := c.run(providers.RunRequest{Prompt: "first"})
		if err != nil {
			t.Fatalf("first Run: %v", err)
		}
		sid := sessionOf(evs)
		if sid == "" {
			t.Fatal("no session id from the first run")
		}
		evs, err = c.run(providers.RunRequest{Prompt: "second", ResumeID: sid})
		if err != nil {
			t.Fatalf("resumed Run: %v", err)
		}
		// Same session: no session.updated. The CLI reports the session's
		// cumulative cost.
		checkSeq(t, evs, []string{"system/init", "system/status", `assistant.delta "second "`, `assistant.delta "answer"`,
			`run.completed {"inputTokens":10,"cachedInputTokens":0,"outputTokens":5,"totalTokens":15,"costUsd":0.00028000000000000003,"turns":1}`})
		reqs := c.srv.MessageRequests()
		if got := reqs[len(reqs)-1].UserText(); !strings.Contains(got, "first") || !strings.Contains(got, "second") {
			t.Errorf("resumed request lacks the earlier turn: %q", got)
		}
		evs, err = c.run(providers.RunRequest{Prompt: "third", ResumeID: sid, Fork: true})
		if err != nil {
			t.Fatalf("forked Run: %v", err)
		}
		checkSeq(t, evs, seq(start, []string{`assistant.delta "forked "`, `assistant.delta "answer"`,
			`run.completed {"inputTokens":10,"cachedInputTokens":0,"outputTokens":5,"totalTokens":15,"costUsd":0.00042,"turns":1}`}))
		if fork := sessionOf(evs); fork == "" || fork == sid {
			t.Errorf("fork session %q, want a new id (not %q)", fork, sid)
		}
	})

	t.Run("resume unknown session", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, fakeanthropic.Text("never"))
		evs, err := c.run(providers.RunRequest{Prompt: "hi", ResumeID: "3f0e2a5c-1111-4222-8333-944455556666"})
		if !errors.Is(err, providers.ErrSessionNotFound) {
			t.Fatalf("Run = %v, want ErrSessionNotFound", err)
		}
		if len(evs) != 0 {
			t.Errorf("events %q, want none", normalize(evs))
		}
		if n := len(c.srv.MessageRequests()); n != 0 {
			t.Errorf("%d model requests, want 0", n)
		}
	})

	t.Run("plan mode", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, fakeanthropic.Text("a plan"))
		evs, err := c.run(providers.RunRequest{Prompt: "plan it", Mode: providers.ModePlan})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkSeq(t, evs, seq(start, []string{`assistant.delta "a p"`, `assistant.delta "lan"`, usage1}))
	})
}
