package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/providers"
)

// blockingProvider's runs emit a delta and wait for their context.
func blockingProvider(started chan<- string) *fakeProvider {
	return &fakeProvider{id: providers.Claude, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, Text: "working", MessageID: "m"})
		started <- req.RunID
		<-ctx.Done()
		return nil
	}}
}

// queuePrompt posts a queued prompt and returns the answer.
func queuePrompt(t *testing.T, ts *testServer, user, chatID, text string) api.PromptResponse {
	t.Helper()
	st, body := ts.do("POST", "/v1/chats/"+chatID+"/prompt", user, api.PromptRequest{Text: text, Queue: true})
	var r api.PromptResponse
	if st != http.StatusAccepted || json.Unmarshal(body, &r) != nil {
		t.Fatalf("queue %q: %d %s", text, st, body)
	}
	return r
}

// userTexts returns the texts of the chat's stored user events.
func userTexts(evs []api.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == api.EventUser {
			out = append(out, ev.Text)
		}
	}
	return out
}

// Three prompts queued behind a run survive a daemon restart (close and
// reopen on the same state) and then run in the order they were queued.
func TestQueuedPromptsRunInOrderAcrossRestart(t *testing.T) {
	started := make(chan string, 8)
	dir := t.TempDir()
	ts := newTestServerIn(t, dir, []providers.Provider{blockingProvider(started)})
	chat := ts.createChat("alice", "claude")
	if r := queuePrompt(t, ts, "alice", chat.ID, "first"); r.RunID == "" || r.QueueID != "" {
		t.Fatalf("a queued prompt on an idle chat: %+v, want it started (runId)", r)
	}
	<-started
	var qids []string
	for _, text := range []string{"one", "two", "three"} {
		r := queuePrompt(t, ts, "alice", chat.ID, text)
		if r.QueueID == "" || r.RunID != "" {
			t.Fatalf("queued behind a run: %+v, want a queueId", r)
		}
		qids = append(qids, r.QueueID)
	}
	// Without queue, today's 409 stays.
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "now"}); st != http.StatusConflict || !json.Valid(body) {
		t.Fatalf("prompt without queue while running: %d %s, want 409", st, body)
	}
	st, body := ts.do("GET", "/v1/chats/"+chat.ID+"/queue", "alice", nil)
	var q []api.QueuedPrompt
	if st != http.StatusOK || json.Unmarshal(body, &q) != nil || len(q) != 3 || q[0].Text != "one" || q[2].Text != "three" || q[1].ID != qids[1] {
		t.Fatalf("GET queue: %d %s", st, body)
	}
	ts.stop() // the running "first" is interrupted; nothing queued starts

	// Restart on the same state: the queue runs, in order, one at a time.
	done := &fakeProvider{id: providers.Claude}
	ts2 := newTestServerIn(t, dir, []providers.Provider{done})
	testkit.Eventually(t, 20*time.Second, func() bool {
		c, err := ts2.st.Chat(chat.ID)
		return err == nil && c.Queued == 0 && !ts2.srv.hub.Running(chat.ID)
	}, "the queue to drain")
	evs := ts2.events(chat.ID)
	if got, want := userTexts(evs), []string{"first", "one", "two", "three"}; !slices.Equal(got, want) {
		t.Fatalf("user events %v, want %v (all events %v)", got, want, types(evs))
	}
	var queued, ran []string
	for _, ev := range evs {
		switch {
		case ev.Type == api.EventQueued:
			queued = append(queued, ev.ID)
		case ev.Type == api.EventUser && ev.Text != "first":
			ran = append(ran, ev.ID)
		}
	}
	if !slices.Equal(queued, qids) || !slices.Equal(ran, qids) {
		t.Fatalf("queued events %v, user events' ids %v, want both %v", queued, ran, qids)
	}
	// Each ran to its complete before the next one's user event.
	n := 0
	for i, ev := range evs {
		if ev.Type == api.EventUser && ev.Text != "first" {
			if evs[i-1].Type != api.EventComplete && evs[i-1].Type != api.EventError {
				t.Fatalf("user event %d follows %s, want the previous run's end: %v", i, evs[i-1].Type, types(evs))
			}
			n++
		}
	}
	if n != 3 || evs[len(evs)-1].Type != api.EventComplete {
		t.Fatalf("events %v", types(evs))
	}
	if st, body := ts2.do("GET", "/v1/chats/"+chat.ID+"/queue", "alice", nil); st != http.StatusOK || string(body) != "[]\n" && string(body) != "[]" {
		t.Fatalf("empty queue: %d %q", st, body)
	}
}

// The owner removes a queued prompt (it never runs, an unqueued event
// says so); another user sees neither the queue nor can remove from it.
func TestQueueRemovalAndOwnership(t *testing.T) {
	step := make(chan string)
	ts := newTestServer(t, []providers.Provider{gated(step)})
	chat := ts.createChat("alice", "claude")
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "first"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	a := queuePrompt(t, ts, "alice", chat.ID, "drop me").QueueID
	b := queuePrompt(t, ts, "alice", chat.ID, "keep me").QueueID
	if a == "" || b == "" {
		t.Fatal("prompts were not queued")
	}
	// bob: 404 on everything of alice's chat.
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/chats/" + chat.ID + "/queue"},
		{"DELETE", "/v1/chats/" + chat.ID + "/queue/" + a},
	} {
		if st, body := ts.do(req.method, req.path, "bob", nil); st != http.StatusNotFound {
			t.Fatalf("bob %s %s: %d %s, want 404", req.method, req.path, st, body)
		}
	}
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "bob", api.PromptRequest{Text: "mine", Queue: true}); st != http.StatusNotFound {
		t.Fatalf("bob queues in alice's chat: %d %s, want 404", st, body)
	}
	if st, body := ts.do("DELETE", "/v1/chats/"+chat.ID+"/queue/"+a, "alice", nil); st != http.StatusNoContent {
		t.Fatalf("alice removes: %d %s", st, body)
	}
	if st, body := ts.do("DELETE", "/v1/chats/"+chat.ID+"/queue/"+a, "alice", nil); st != http.StatusNotFound {
		t.Fatalf("remove twice: %d %s, want 404", st, body)
	}
	if st, body := ts.do("DELETE", "/v1/chats/"+chat.ID+"/queue/NOT-AN-ID", "alice", nil); st != http.StatusBadRequest {
		t.Fatalf("bad queue id: %d %s, want 400", st, body)
	}
	st, body := ts.do("GET", "/v1/chats/"+chat.ID+"/queue", "alice", nil)
	var q []api.QueuedPrompt
	if st != http.StatusOK || json.Unmarshal(body, &q) != nil || len(q) != 1 || q[0].ID != b || q[0].Text != "keep me" {
		t.Fatalf("queue after removal: %d %s", st, body)
	}
	close(step) // the first run completes; "keep me" runs
	testkit.Eventually(t, 20*time.Second, func() bool {
		c, err := ts.st.Chat(chat.ID)
		return err == nil && c.Queued == 0 && len(userTexts(ts.events(chat.ID))) == 2
	}, "the queue to drain")
	ts.waitIdle(chat.ID)
	evs := ts.events(chat.ID)
	if got := userTexts(evs); !slices.Equal(got, []string{"first", "keep me"}) {
		t.Fatalf("ran %v, want [first keep me]", got)
	}
	if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Type == api.EventUnqueued && ev.ID == a }) {
		t.Fatalf("no unqueued event for %s: %v", a, types(evs))
	}
}

// The chat socket's prompt with queue and clientId is acknowledged with
// the queue id while a run is active, and runs after it.
func TestChatSocketQueuedPrompt(t *testing.T) {
	step := make(chan string)
	ts := newTestServer(t, []providers.Provider{gated(step)})
	chat := ts.createChat("alice", "claude")
	ws, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	readEvent(t, ws) // sync
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "first"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	if err := ws.WriteJSON(map[string]any{"type": "prompt", "text": "later", "clientId": "c7", "queue": true}); err != nil {
		t.Fatal(err)
	}
	var qid string
	for qid == "" {
		ev := readEvent(t, ws)
		if ev.Type == api.EventSystem && ev.Subtype == api.SubtypePromptRejected {
			t.Fatalf("rejected: %s %s", ev.Message, ev.Data)
		}
		if ev.Type == api.EventSystem && ev.Subtype == api.SubtypePromptAccepted {
			var d map[string]string
			if json.Unmarshal(ev.Data, &d) != nil || d["clientId"] != "c7" || d["queueId"] == "" {
				t.Fatalf("ack data %s", ev.Data)
			}
			qid = d["queueId"]
		}
	}
	close(step)
	testkit.Eventually(t, 20*time.Second, func() bool { return len(userTexts(ts.events(chat.ID))) == 2 }, "the queued prompt to run")
	ts.waitIdle(chat.ID)
	evs := ts.events(chat.ID)
	if got := userTexts(evs); !slices.Equal(got, []string{"first", "later"}) {
		t.Fatalf("ran %v", got)
	}
	if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Type == api.EventQueued && ev.ID == qid && ev.Text == "later" }) {
		t.Fatalf("no queued event %s: %v", qid, types(evs))
	}
}

// A chat holds at most 32 queued prompts; the 33rd is refused with 409
// conflict naming the limit, and nothing is stored for it.
func TestQueueLimit(t *testing.T) {
	step := make(chan string)
	ts := newTestServer(t, []providers.Provider{gated(step)})
	chat := ts.createChat("alice", "claude")
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "first"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	for i := range 32 {
		if r := queuePrompt(t, ts, "alice", chat.ID, "q"); r.QueueID == "" {
			t.Fatalf("prompt %d not queued: %+v", i, r)
		}
	}
	st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "one too many", Queue: true})
	if st != http.StatusConflict || !strings.Contains(string(body), "already has 32 queued prompts") {
		t.Fatalf("33rd queued prompt: %d %s, want 409 naming the limit", st, body)
	}
	c, err := ts.st.Chat(chat.ID)
	if err != nil || c.Queued != 32 {
		t.Fatalf("queue holds %d, want 32 (%v)", c.Queued, err)
	}
}
