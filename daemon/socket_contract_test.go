package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"remote/api"
	"remote/providers"
)

// The four points of the chat socket that the original Remote frontend
// depends on (docs/api.md, "Chat WebSocket" and "Chat event").

// TestChatSocketSyntheticPrompt: the Test menu's prompt carries
// "synthetic":"autotest"; it is accepted and stored on the user event.
func TestChatSocketSyntheticPrompt(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: "claude"}})
	chat := ts.createChat("alice", "claude")
	c, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readEvent(t, c) // sync after replay
	if err := c.WriteMessage(1, []byte(`{"type":"prompt","text":"hi","clientId":"c1","synthetic":"autotest"}`)); err != nil {
		t.Fatal(err)
	}
	evs := readUntilIdle(t, c)
	if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Subtype == "prompt_accepted" }) {
		t.Fatalf("answers %v, want a prompt_accepted", types(evs))
	}
	stored := ts.events(chat.ID)
	if stored[0].Type != "user" || stored[0].Synthetic != "autotest" {
		t.Fatalf("user event %+v, want synthetic=autotest", stored[0])
	}
	// The stored JSON names the field exactly as the frontend reads it.
	raw, _ := json.Marshal(stored[0])
	if !json.Valid(raw) || !containsField(raw, "synthetic", "autotest") {
		t.Fatalf("stored user event %s lacks \"synthetic\":\"autotest\"", raw)
	}

	// A malformed marker is refused with a message naming the field: the
	// prompt is accepted and ends as a run of its own (prompt_rejected is
	// only "a run is active", which the frontend re-sends on idle).
	if err := c.WriteMessage(1, []byte(`{"type":"prompt","text":"hi","clientId":"c2","synthetic":"a b"}`)); err != nil {
		t.Fatal(err)
	}
	evs = readUntilIdle(t, c)
	if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Subtype == "prompt_accepted" }) {
		t.Fatalf("bad synthetic answered %v, want a prompt_accepted", types(evs))
	}
	stored = ts.events(chat.ID)
	last := stored[len(stored)-1]
	if u := stored[len(stored)-2]; u.Type != "user" || u.Synthetic != "" || u.Text != "hi" {
		t.Fatalf("refused prompt's user event %+v, want text hi without the malformed marker", u)
	}
	if last.Type != "error" || last.Message != "the prompt could not start: synthetic: must be 1 to 64 letters, digits, '.', '_' or '-'" {
		t.Fatalf("bad synthetic ended with %+v", last)
	}
}

func containsField(raw []byte, key, value string) bool {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	return m[key] == value
}

// TestChatSocketRefusedPromptCloses: a prompt refused before its run
// starts for a lasting reason (here: the loose chat's working directory
// is gone) is accepted and recorded as a run of its own, with or without
// a clientId: sync running:true, its user event, an error saying why and
// the closing sync, to every follower; never prompt_rejected, which a
// client re-sends (docs/api.md).
func TestChatSocketRefusedPromptCloses(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: "claude"}})
	cwd := filepath.Join(ts.dir, "work")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	status, body := ts.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Cwd: cwd})
	if status != 201 {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	_ = json.Unmarshal(body, &chat)
	if err := os.Remove(cwd); err != nil {
		t.Fatal(err)
	}
	c, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readEvent(t, c) // sync after replay

	for _, tc := range []struct {
		frame string
		want  []string
	}{
		{`{"type":"prompt","text":"hi","clientId":"c1"}`, []string{"system/prompt_accepted", "sync", "user", "error", "sync"}},
		{`{"type":"prompt","text":"hi"}`, []string{"sync", "user", "error", "sync"}},
	} {
		if err := c.WriteMessage(1, []byte(tc.frame)); err != nil {
			t.Fatal(err)
		}
		evs := readUntilIdle(t, c)
		got := types(evs)
		// The ack goes to this connection once the run lock is taken,
		// before the user event; the lock's sync may come before it.
		if len(got) > 1 && got[1] == "system/prompt_accepted" {
			got[0], got[1] = got[1], got[0]
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("%s: answered %v, want %v", tc.frame, got, tc.want)
		}
		if first := evs[slices.IndexFunc(evs, func(ev api.Event) bool { return ev.Type == "sync" })]; !first.Running {
			t.Fatalf("%s: first sync %+v, want running", tc.frame, first)
		}
		if e := evs[len(evs)-2]; e.Type != "error" || !strings.HasPrefix(e.Message, "the prompt could not start: ") || !strings.Contains(e.Message, cwd) {
			t.Fatalf("%s: error %+v, want it to say the prompt could not start and why", tc.frame, e)
		}
	}
	if got := types(ts.events(chat.ID)); !slices.Equal(got, []string{"user", "error", "user", "error"}) {
		t.Fatalf("stored %v, want each refused prompt as a run of its own", got)
	}
}

// TestUsageWireNames: complete.usage and usage_update.usage carry the
// original frontend's token names (docs/api.md).
func TestUsageWireNames(t *testing.T) {
	usage := json.RawMessage(`{"inputTokens":3,"cachedInputTokens":100,"cacheWriteInputTokens":7,"outputTokens":24,"totalTokens":134,"costUsd":0.25}`)
	p := &fakeProvider{id: "claude", run: func(_ context.Context, _ providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventUsageUpdated, Usage: usage})
		emit(providers.Event{Type: providers.EventRunCompleted, Usage: usage})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	if status, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); status != 202 {
		t.Fatalf("prompt: %d %s", status, body)
	}
	ts.waitIdle(chat.ID)
	stored := ts.events(chat.ID)
	want := `{"cache_creation_input_tokens":7,"cache_read_input_tokens":100,"costUsd":0.25,"input_tokens":3,"output_tokens":24,"totalTokens":134}`
	for _, ev := range stored {
		if ev.Type == "complete" || ev.Type == "usage_update" {
			if string(ev.Usage) != want {
				t.Errorf("%s usage %s, want %s", ev.Type, ev.Usage, want)
			}
		}
	}
	if got := types(stored); !slices.Equal(got, []string{"user", "usage_update", "complete"}) {
		t.Fatalf("stored %v", got)
	}
}

// TestCancelEndsWithComplete: a cancelled run whose provider stops at a
// turn_status (as Codex does) still ends with complete, status
// interrupted — never with no terminal event, never with an error.
func TestCancelEndsWithComplete(t *testing.T) {
	started := make(chan struct{})
	p := &fakeProvider{id: "codex", run: func(ctx context.Context, _ providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, Text: "working", MessageID: "m1"})
		close(started)
		<-ctx.Done()
		emit(providers.Event{Type: providers.EventTurnStatus, Status: "interrupted"})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "codex")
	c, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readEvent(t, c)
	if err := c.WriteJSON(api.ClientMessage{Type: "prompt", Text: "go"}); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.WriteJSON(api.ClientMessage{Type: "cancel"}); err != nil {
		t.Fatal(err)
	}
	live := persisted(readUntilIdle(t, c))
	last := live[len(live)-1]
	if last.Type != "complete" || last.Status != "interrupted" || last.Provider != "codex" {
		t.Fatalf("live run ended with %+v, want complete status=interrupted", last)
	}
	stored := ts.events(chat.ID)
	if got := types(stored); !slices.Equal(got, []string{"user", "assistant_text", "turn_status", "complete"}) {
		t.Fatalf("stored %v", got)
	}
	// A reconnecting client replays the same ending.
	r, _, err := ts.dialWS("/ws/chat/"+chat.ID+"?since=0", "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var replay []api.Event
	for ev := readEvent(t, r); ev.Type != "sync"; ev = readEvent(t, r) {
		replay = append(replay, ev)
	}
	if end := replay[len(replay)-1]; end.Type != "complete" || end.Status != "interrupted" {
		t.Fatalf("replay ends with %+v", end)
	}
}
