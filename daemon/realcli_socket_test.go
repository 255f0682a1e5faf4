package daemon

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/fakeopenai"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/codex"
	"remote/providers/runner"
)

// usageRows returns GET /v1/usage?by=... for user.
func (ts *testServer) usageRows(user, by string) []api.UsageRow {
	ts.t.Helper()
	st, body := ts.do("GET", "/v1/usage?by="+by, user, nil)
	if st != http.StatusOK {
		ts.t.Fatalf("usage: %d %s", st, body)
	}
	var out api.UsageResponse
	if err := json.Unmarshal(body, &out); err != nil {
		ts.t.Fatal(err)
	}
	return out.Rows
}

// TestRealCodexCancelAndUsage: the real Codex app-server on the host
// against the fake Responses API. A completed turn stores its usage under
// the original frontend's names and as a usage row; a turn cancelled on
// the chat socket mid-stream (Codex ends it with turn_status interrupted)
// ends with complete, status interrupted, live and stored (docs/api.md).
func TestRealCodexCancelAndUsage(t *testing.T) {
	bin := testkit.CodexBinary(t)
	model, err := fakeopenai.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	home := t.TempDir()
	codexHome := t.TempDir()
	if err := fakeopenai.WriteCodexConfig(codexHome, fakeopenai.CodexConfig{BaseURL: model.URL}); err != nil {
		t.Fatal(err)
	}
	p := codex.New(providers.AdapterConfig{Binary: bin, Host: &runner.HostLauncher{},
		Env: map[string]string{"CODEX_HOME": codexHome, "HOME": home, "FAKE_OPENAI_API_KEY": "test-key"}})
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "codex")

	model.Enqueue(fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("first answer")},
		Usage: fakeopenai.Usage{InputTokens: 100, CachedTokens: 40, OutputTokens: 7}})
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "one"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	ts.waitIdle(chat.ID)
	stored := ts.events(chat.ID)
	last := stored[len(stored)-1]
	var u map[string]json.RawMessage
	if last.Type != api.EventComplete || json.Unmarshal(last.Usage, &u) != nil {
		t.Fatalf("first turn ends with %+v (%v)", last, types(stored))
	}
	for k, want := range map[string]string{"input_tokens": "100", "cache_read_input_tokens": "40", "output_tokens": "7"} {
		if string(u[k]) != want {
			t.Errorf("complete.usage %s = %s, want %s (usage %s)", k, u[k], want, last.Usage)
		}
	}
	if _, camel := u["inputTokens"]; camel {
		t.Errorf("complete.usage still has inputTokens: %s", last.Usage)
	}
	if rows := ts.usageRows("alice", "provider"); len(rows) != 1 || rows[0].Key != "codex" || rows[0].Runs != 1 ||
		rows[0].InputTokens != 100 || rows[0].CacheReadTokens != 40 || rows[0].OutputTokens != 7 {
		t.Fatalf("usage rows %+v", rows)
	}

	model.Enqueue(fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text(strings.Repeat("slow words ", 200))},
		ChunkSize: 8, ChunkDelay: 50 * time.Millisecond, Hang: true})
	c, _, err := ts.dialWS("/ws/chat/"+chat.ID+"?since="+itoa(last.Seq), "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readEvent(t, c) // sync
	if err := c.WriteJSON(api.ClientMessage{Type: "prompt", Text: "two", ClientID: "c2"}); err != nil {
		t.Fatal(err)
	}
	var live []api.Event
	for {
		ev := readEvent(t, c)
		live = append(live, ev)
		if ev.Type == api.EventAssistantText {
			break
		}
	}
	if err := c.WriteJSON(api.ClientMessage{Type: "cancel"}); err != nil {
		t.Fatal(err)
	}
	live = append(live, readUntilIdleFrom(t, c, true)...)
	end := persisted(live)[len(persisted(live))-1]
	if end.Type != api.EventComplete || end.Status != "interrupted" || end.Provider != "codex" {
		t.Fatalf("cancelled Codex run ends live with %+v (%v)", end, types(persisted(live)))
	}
	stored = ts.events(chat.ID)
	if s := stored[len(stored)-1]; s.Type != api.EventComplete || s.Status != "interrupted" {
		t.Fatalf("stored run ends with %+v (%v)", s, types(stored))
	}
	for _, ev := range stored[last.Seq:] {
		if ev.Type == api.EventError {
			t.Errorf("a cancel stored an error: %+v", ev)
		}
	}
}

// TestRealClaudeUsage: two turns of the real Claude Code CLI, the second
// resuming the session. Claude reports the session's running cost, so
// each run is charged only its own (the difference); tokens are per run.
func TestRealClaudeUsage(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	fake := fakeanthropic.New(t, fakeanthropic.Text("first"), fakeanthropic.Text("second"))
	p := claude.New(providers.AdapterConfig{Binary: bin, Host: &runner.HostLauncher{}, Env: map[string]string{
		"HOME": t.TempDir(), "ANTHROPIC_BASE_URL": fake.URL, "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}})
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	var totals []float64
	for _, text := range []string{"one", "two"} {
		if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: text}); st != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", st, body)
		}
		ts.waitIdle(chat.ID)
		evs := ts.events(chat.ID)
		last := evs[len(evs)-1]
		var u struct {
			In   *int64  `json:"input_tokens"`
			Out  *int64  `json:"output_tokens"`
			Cost float64 `json:"costUsd"`
		}
		if last.Type != api.EventComplete || json.Unmarshal(last.Usage, &u) != nil || u.In == nil || u.Out == nil {
			t.Fatalf("turn %q ends with %+v", text, last)
		}
		totals = append(totals, u.Cost)
	}
	if !(totals[0] > 0 && totals[1] > totals[0]) {
		t.Fatalf("Claude's reported costs %v: want a growing session total", totals)
	}
	rows := ts.usageRows("alice", "chat")
	if len(rows) != 1 || rows[0].Runs != 2 || rows[0].InputTokens != 20 || rows[0].OutputTokens != 10 {
		t.Fatalf("usage rows %+v: want 2 runs of 10 in / 5 out each", rows)
	}
	if math.Abs(rows[0].CostUSD-totals[1]) > 1e-12 {
		t.Fatalf("chat cost %v, want the session's total %v (each run charged the difference, not %v)", rows[0].CostUSD, totals[1], totals[0]+totals[1])
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
