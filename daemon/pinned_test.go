package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/providers"
)

// These tests pin behaviours that deliberate breakages of the product
// (docs/testing.md, "The breakages the old tests missed") left unnoticed. Each asserts the value a
// user relies on, not the constant implementing it.

// prompt posts text to the chat and waits for its run to end.
func (ts *testServer) promptIdle(chatID, text string, skills ...string) {
	ts.t.Helper()
	if st, body := ts.do("POST", "/v1/chats/"+chatID+"/prompt", "alice", api.PromptRequest{Text: text, Skills: skills}); st != http.StatusAccepted {
		ts.t.Fatalf("prompt: %d %s", st, body)
	}
	ts.waitIdle(chatID)
}

// TestTranscriptBoundIs24000Bytes (S6): with no transcript_bytes given, a
// run without a session to resume sees the last 24,000 bytes of visible
// history.
func TestTranscriptBoundIs24000Bytes(t *testing.T) {
	long := strings.Repeat("a", 40000)
	p := &fakeProvider{id: providers.Kimi, run: func(_ context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, Text: long, MessageID: "m1"})
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "kimi")
	ts.promptIdle(chat.ID, "first")
	ts.promptIdle(chat.ID, "second")
	reqs := p.requests()
	const marker = "[Earlier visible transcript omitted]\n"
	body := strings.TrimSuffix(reqs[1].Prompt, "\n\nCurrent user request:\nsecond")
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no omission marker in a %d-byte prompt", len(reqs[1].Prompt))
	}
	if n := len(body) - i - len(marker); n > 24000 || n < 23900 {
		t.Errorf("visible history is %d bytes, want the last 24,000", n)
	}
}

// TestSelectedSkillsReachTheProvider (S7): the service applies the
// provider's skill strategy to the prompt it sends.
func TestSelectedSkillsReachTheProvider(t *testing.T) {
	skills := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skills, "review"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skills, "review", "SKILL.md"), []byte("# review"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &fakeProvider{id: providers.Claude, caps: providers.Capabilities{Skills: providers.SkillsSlashCommand}}
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) { o.SkillsDir = skills })
	chat := ts.createChat("alice", "claude")
	ts.promptIdle(chat.ID, "go", "review")
	if got := p.requests()[0].Prompt; got != "/review\n\ngo" {
		t.Errorf("prompt %q, want %q", got, "/review\n\ngo")
	}
}

// TestSessionRecoveryScope (S28): a lost Claude session clears only
// Claude's session and the pending fork; Codex's session survives.
func TestSessionRecoveryScope(t *testing.T) {
	p := &fakeProvider{id: providers.Claude, caps: providers.Capabilities{Resume: true, Fork: true}}
	p.run = func(_ context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		if req.ResumeID != "" {
			return fmt.Errorf("resume %s: %w", req.ResumeID, providers.ErrSessionNotFound)
		}
		emit(providers.Event{Type: providers.EventRunCompleted}) // no new session
		return nil
	}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	if _, err := ts.st.UpdateChat(chat.ID, func(c *api.Chat) error {
		c.Sessions = map[string]string{"claude": "lost", "codex": "cx-keep"}
		c.ClaudeSessionID, c.CodexSessionID = "lost", "cx-keep"
		c.ForkPending = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ts.promptIdle(chat.ID, "hi")
	reqs := p.requests()
	if len(reqs) != 2 || reqs[0].ResumeID != "lost" || !reqs[0].Fork || reqs[1].ResumeID != "" || reqs[1].Fork {
		t.Fatalf("runs %+v, want a forking resume of \"lost\" then one retry without", reqs)
	}
	c, _ := ts.st.Chat(chat.ID)
	if c.Sessions["codex"] != "cx-keep" || c.CodexSessionID != "cx-keep" {
		t.Errorf("codex session %q / %q after Claude's recovery, want cx-keep", c.Sessions["codex"], c.CodexSessionID)
	}
	if c.Sessions["claude"] != "" || c.ForkPending {
		t.Errorf("claude session %q forkPending %v, want both cleared", c.Sessions["claude"], c.ForkPending)
	}
}

// TestNoResumeWithoutCapability (S27): a provider that does not declare
// Resume never gets a saved id, even with Fork declared and a fork pending,
// and forking its chat starts fresh.
func TestNoResumeWithoutCapability(t *testing.T) {
	p := &fakeProvider{id: providers.Kimi, caps: providers.Capabilities{Resume: false, Fork: true}}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "kimi")
	ts.promptIdle(chat.ID, "hi")
	if _, err := ts.st.UpdateChat(chat.ID, func(c *api.Chat) error {
		c.Sessions = map[string]string{"kimi": "saved"}
		c.KimiSessionID = "saved"
		c.ForkPending = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ts.promptIdle(chat.ID, "again")
	last := p.requests()[1]
	if last.ResumeID != "" || last.Fork || !strings.Contains(last.Prompt, "User:\nhi") {
		t.Errorf("run: resume %q fork %v prompt %q; want no resume, no fork, visible history", last.ResumeID, last.Fork, last.Prompt)
	}
	if _, err := ts.st.UpdateChat(chat.ID, func(c *api.Chat) error { c.ForkPending = false; return nil }); err != nil {
		t.Fatal(err)
	}
	st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", nil)
	if st != http.StatusCreated {
		t.Fatalf("fork: %d %s", st, body)
	}
	var fork api.Chat
	_ = json.Unmarshal(body, &fork)
	if fork.ForkPending || fork.Sessions["kimi"] != "" {
		t.Errorf("fork of a provider without Resume kept the session: %+v", fork)
	}
}

// TestSessionUpdatedKeepsChosenModel (S27): session.updated fills an empty
// chat model but never replaces the one the chat has.
func TestSessionUpdatedKeepsChosenModel(t *testing.T) {
	p := &fakeProvider{id: providers.Claude, caps: providers.Capabilities{Resume: true}, run: func(_ context.Context, _ providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "s1", Model: "reported-model"})
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	empty := ts.createChat("alice", "claude")
	chosen := ts.createChat("alice", "claude")
	if _, err := ts.st.UpdateChat(chosen.ID, func(c *api.Chat) error { c.Model = "chosen-model"; return nil }); err != nil {
		t.Fatal(err)
	}
	ts.promptIdle(empty.ID, "hi")
	ts.promptIdle(chosen.ID, "hi")
	if c, _ := ts.st.Chat(empty.ID); c.Model != "reported-model" {
		t.Errorf("empty model became %q, want reported-model", c.Model)
	}
	if c, _ := ts.st.Chat(chosen.ID); c.Model != "chosen-model" {
		t.Errorf("chosen model became %q, want chosen-model kept", c.Model)
	}
}

// TestChatSocketRejectedAckOnlyToSender (S2): a prompt_rejected ack goes to
// the socket that sent the prompt, never to a second subscriber.
func TestChatSocketRejectedAckOnlyToSender(t *testing.T) {
	step := make(chan string)
	p := gated(step)
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	sender, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	other, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	readEvent(t, sender)
	readEvent(t, other) // the syncs after replay
	ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "busy"})
	if err := sender.WriteMessage(1, []byte(`{"type":"prompt","text":"second","clientId":"c2"}`)); err != nil {
		t.Fatal(err)
	}
	gotAck := false
	for !gotAck {
		ev := readEvent(t, sender)
		gotAck = ev.Type == api.EventSystem && ev.Subtype == api.SubtypePromptRejected
	}
	step <- "marker"
	close(step)
	for _, ev := range readUntilIdle(t, other) {
		if ev.Type == api.EventSystem && (ev.Subtype == api.SubtypePromptRejected || ev.Subtype == api.SubtypePromptAccepted) {
			t.Fatalf("second socket got the sender's ack: %+v", ev)
		}
	}
}

// TestChatSocketCancelStopsOnlyItsChat (S1, S29): the page's Cancel (a
// cancel frame on the chat socket) stops that chat's run and no other.
func TestChatSocketCancelStopsOnlyItsChat(t *testing.T) {
	stepA, stepB := make(chan string), make(chan string)
	pa, pb := gated(stepA), gated(stepB)
	pb.id = providers.Kimi
	ts := newTestServer(t, []providers.Provider{pa, pb})
	a, b := ts.createChat("alice", "claude"), ts.createChat("alice", "kimi")
	ts.do("POST", "/v1/chats/"+a.ID+"/prompt", "alice", api.PromptRequest{Text: "a"})
	ts.do("POST", "/v1/chats/"+b.ID+"/prompt", "alice", api.PromptRequest{Text: "b"})
	c, _, err := ts.dialWS("/ws/chat/"+a.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMessage(1, []byte(`{"type":"cancel"}`)); err != nil {
		t.Fatal(err)
	}
	ts.waitIdle(a.ID)
	evs := ts.events(a.ID)
	if last := evs[len(evs)-1]; last.Type != "complete" || last.Status != "interrupted" {
		t.Errorf("chat a ended with %+v, want complete interrupted", last)
	}
	select {
	case stepB <- "still running":
	case <-time.After(10 * time.Second):
		t.Fatal("chat b's run is gone after a cancel on chat a's socket")
	}
	close(stepB)
	ts.waitIdle(b.ID)
	evs = ts.events(b.ID)
	if last := evs[len(evs)-1]; last.Type != "complete" || last.Status == "interrupted" {
		t.Errorf("chat b ended with %+v, want a normal complete", last)
	}
}
