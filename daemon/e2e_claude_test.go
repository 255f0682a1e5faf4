package daemon

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/prompt"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/runner"
)

// TestClaudeEndToEnd runs the real Claude Code CLI against the fake model
// server through the whole daemon: socket, prompt service, hub, store and
// two chat WebSockets (S1, S4, S26, S28).
func TestClaudeEndToEnd(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	slow := fakeanthropic.Reply{Blocks: []fakeanthropic.Block{
		fakeanthropic.TextBlock("Hello from the fake model. "),
		fakeanthropic.TextBlock("This is the second paragraph. "),
		fakeanthropic.TextBlock("And the third."),
	}, Delay: 300 * time.Millisecond, ChunkSize: 8}
	fake := fakeanthropic.New(t, slow, fakeanthropic.Text("second answer"), fakeanthropic.Text("recovered answer"))
	home := t.TempDir()
	p := claude.New(providers.AdapterConfig{
		Binary: bin,
		Env: map[string]string{
			"HOME":               home,
			"ANTHROPIC_BASE_URL": fake.URL,
			"ANTHROPIC_API_KEY":  "sk-ant-test-dummy",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
		},
		Host: &runner.HostLauncher{},
	})
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")

	// A follows from the start and sends the prompt.
	a, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	readEvent(t, a) // sync
	a.WriteJSON(api.ClientMessage{Type: "prompt", Text: "say hello", ClientID: "c1"})
	var seenA []api.Event
	for {
		ev := readEvent(t, a)
		seenA = append(seenA, ev)
		if ev.Type == api.EventAssistantText {
			break
		}
	}
	// B joins mid-stream with since = the last seq A has seen.
	since := persisted(seenA)[len(persisted(seenA))-1].Seq
	b, _, err := ts.dialWS(fmt.Sprintf("/ws/chat/%s?since=%d", chat.ID, since), "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var seenB []api.Event
	bRunning := false
	for {
		ev := readEvent(t, b)
		seenB = append(seenB, ev)
		if ev.Type == api.EventSync {
			bRunning = ev.Running
			break
		}
	}
	seenA = append(seenA, readUntilIdleFrom(t, a, true)...)
	if bRunning {
		seenB = append(seenB, readUntilIdleFrom(t, b, true)...)
	} else {
		t.Log("the run ended before B joined; B got everything from its replay")
	}

	stored := ts.events(chat.ID)
	checkGapless(t, stored, 1)
	same := func(x, y api.Event) bool { return x.Seq == y.Seq && x.Type == y.Type && x.Text == y.Text }
	if !slices.EqualFunc(persisted(seenA), stored, same) {
		t.Errorf("A saw %v\nstored %v", types(persisted(seenA)), types(stored))
	}
	if !slices.EqualFunc(persisted(seenB), stored[since:], same) {
		t.Errorf("B saw %v\nwant %v", types(persisted(seenB)), types(stored[since:]))
	}
	var text strings.Builder
	for _, ev := range stored {
		if ev.Type == api.EventAssistantText {
			text.WriteString(ev.Text)
		}
	}
	if text.String() != "Hello from the fake model. This is the second paragraph. And the third." {
		t.Errorf("assistant text %q", text.String())
	}
	if stored[0].Type != api.EventUser || stored[len(stored)-1].Type != api.EventComplete {
		t.Fatalf("stored %v: want user first and complete last", types(stored))
	}
	c, _ := ts.st.Chat(chat.ID)
	sid := c.Sessions["claude"]
	if sid == "" || c.ClaudeSessionID != sid {
		t.Fatalf("no session saved: %+v", c)
	}

	// Second prompt resumes the saved session.
	send := func(text string) []api.Event {
		t.Helper()
		n := len(ts.events(chat.ID))
		if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: text}); st != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", st, body)
		}
		ts.waitIdle(chat.ID)
		evs := ts.events(chat.ID)
		checkGapless(t, evs, 1)
		return evs[n:]
	}
	evs := send("and again")
	if slices.Contains(types(evs), "system/session_recovered") || evs[len(evs)-1].Type != api.EventComplete {
		t.Fatalf("resumed turn: %v", types(evs))
	}
	reqs := fake.MessageRequests()
	if last := reqs[len(reqs)-1].UserText(); !strings.Contains(last, "say hello") || !strings.Contains(last, "and again") {
		t.Errorf("resumed request lacks the first turn: %q", last)
	}
	if strings.Contains(reqs[len(reqs)-1].UserText(), "visible chat transcript") {
		t.Error("a resumed prompt carried the visible transcript")
	}

	// A deleted session is recovered from visible history (S28).
	if _, err := ts.st.UpdateChat(chat.ID, func(c *api.Chat) error {
		prompt.SetSession(c, "claude", "3f0e2a5c-1111-4222-8333-944455556666")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	evs = send("after loss")
	if !slices.Contains(types(evs), "system/session_recovered") || evs[len(evs)-1].Type != api.EventComplete {
		t.Fatalf("recovery turn: %v", types(evs))
	}
	reqs = fake.MessageRequests()
	if last := reqs[len(reqs)-1].UserText(); !strings.Contains(last, "visible chat transcript") || !strings.Contains(last, "second answer") {
		t.Errorf("retry lacks the visible transcript: %q", last)
	}
	c, _ = ts.st.Chat(chat.ID)
	if c.Sessions["claude"] == "" || c.Sessions["claude"] == "3f0e2a5c-1111-4222-8333-944455556666" {
		t.Errorf("session after recovery: %v", c.Sessions)
	}
}
