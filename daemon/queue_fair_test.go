package daemon

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"remote/api"
	"remote/providers"
)

// defaultQueueBounds are the queue bounds remoted's config defaults to
// ([daemon] max_queued_prompt_bytes, max_chat_queued_bytes,
// max_user_queued_bytes).
func defaultQueueBounds(o *Options) {
	o.Queue = QueueBounds{Prompt: 256 << 10, Chat: 1 << 20, User: 8 << 20}
}

// busyChat creates a chat of user's with a run that stays active.
func busyChat(t *testing.T, ts *testServer, user string) api.Chat {
	t.Helper()
	c := ts.createChat(user, "claude")
	if st, body := ts.do("POST", "/v1/chats/"+c.ID+"/prompt", user, api.PromptRequest{Text: "first"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	return c
}

// queueRaw posts a queued prompt and returns the status and body.
func queueRaw(ts *testServer, user, chatID, text string) (int, []byte) {
	return ts.do("POST", "/v1/chats/"+chatID+"/prompt", user, api.PromptRequest{Text: text, Queue: true})
}

// A queued prompt may hold 256 KiB and a chat's queue 1 MiB: a bigger
// prompt is a 400 naming max_queued_prompt_bytes, a fourth prompt of 256
// KiB a 409 naming max_chat_queued_bytes; neither is stored.
func TestQueueBytesBounds(t *testing.T) {
	step := make(chan string)
	ts := newTestServer(t, []providers.Provider{gated(step)}, defaultQueueBounds)
	chat := busyChat(t, ts, "alice")
	st, body := queueRaw(ts, "alice", chat.ID, strings.Repeat("x", 262145))
	if st != http.StatusBadRequest || !strings.Contains(string(body), "a queued prompt of 262145 bytes is over [daemon] max_queued_prompt_bytes (256 KiB)") {
		t.Fatalf("prompt of 256 KiB + 1: %d %.300s, want 400 naming max_queued_prompt_bytes", st, body)
	}
	for i := range 3 {
		if st, body := queueRaw(ts, "alice", chat.ID, strings.Repeat("x", 262144)); st != http.StatusAccepted {
			t.Fatalf("prompt %d of 256 KiB: %d %.300s", i, st, body)
		}
	}
	st, body = queueRaw(ts, "alice", chat.ID, strings.Repeat("x", 262144))
	if st != http.StatusConflict || !strings.Contains(string(body), "would pass [daemon] max_chat_queued_bytes (1 MiB)") {
		t.Fatalf("fourth prompt of 256 KiB: %d %.300s, want 409 naming max_chat_queued_bytes", st, body)
	}
	if c, err := ts.st.Chat(chat.ID); err != nil || c.Queued != 3 {
		t.Fatalf("queued %d, want 3 (%v)", c.Queued, err)
	}
}

// The attack of finding 9: alice queues 256 KiB prompts in chat after
// chat. Her queues stop at 8 MiB (409 naming max_user_queued_bytes), bob
// still queues, and alice's chat list stays small: it counts queued
// prompts and never carries their text (only the queue route does).
func TestQueueFloodIsBoundedPerUser(t *testing.T) {
	step := make(chan string)
	ts := newTestServer(t, []providers.Provider{gated(step)}, defaultQueueBounds)
	big := strings.Repeat("x", 256<<10)
	var refused []byte
	var first api.Chat
	accepted := 0
	for i := 0; i < 12 && refused == nil; i++ {
		c := busyChat(t, ts, "alice")
		if i == 0 {
			first = c
		}
		for range 3 {
			st, body := queueRaw(ts, "alice", c.ID, big)
			if st == http.StatusAccepted {
				accepted++
				continue
			}
			if st != http.StatusConflict {
				t.Fatalf("alice's queued prompt: %d %.300s", st, body)
			}
			refused = body
			break
		}
	}
	if refused == nil || !strings.Contains(string(refused), "would pass [daemon] max_user_queued_bytes (8 MiB)") {
		t.Fatalf("alice queued 9 MiB across 12 chats; last answer %.300s, want 409 naming max_user_queued_bytes (8 MiB)", refused)
	}
	if accepted < 30 || accepted > 32 {
		t.Fatalf("alice queued %d prompts of 256 KiB, want 8 MiB's worth (30 to 32)", accepted)
	}
	bob := busyChat(t, ts, "bob")
	if st, body := queueRaw(ts, "bob", bob.ID, big); st != http.StatusAccepted {
		t.Fatalf("bob's queued prompt after alice's flood: %d %.300s, want 202", st, body)
	}

	st, body := ts.do("GET", "/v1/chats", "alice", nil)
	if st != http.StatusOK || len(body) > 16<<10 || bytes.Contains(body, []byte("xxxxxxxx")) {
		t.Fatalf("GET /v1/chats: %d, %d bytes (want at most 16 KiB and no queued text)", st, len(body))
	}
	var list []api.Chat
	if err := json.Unmarshal(body, &list); err != nil || len(list) < 10 {
		t.Fatalf("chat list %v: %.300s", err, body)
	}
	for _, c := range list {
		if c.ID == first.ID && c.Queued != 3 {
			t.Fatalf("first chat lists %d queued, want 3", c.Queued)
		}
	}
	if st, body := ts.do("GET", "/v1/chats/"+first.ID, "alice", nil); st != http.StatusOK || len(body) > 4<<10 || !strings.Contains(string(body), `"queued":3`) {
		t.Fatalf("GET chat: %d %d bytes %.300s, want its count and no text", st, len(body), body)
	}
	st, body = ts.do("GET", "/v1/chats/"+first.ID+"/queue", "alice", nil)
	var q []api.QueuedPrompt
	if st != http.StatusOK || json.Unmarshal(body, &q) != nil || len(q) != 3 || q[0].Text != big {
		t.Fatalf("GET queue: %d, %d prompts", st, len(q))
	}
}

// Fair shares of the state directory: below twice [daemon] min_free, the
// user whose chats hold more than an equal share of what the daemon
// stores is refused (507 naming it), and another user's prompt is still
// admitted; below min_free itself everyone is refused, as before.
func TestStorageFairShare(t *testing.T) {
	dir := t.TempDir()
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	free := int64(sfs.Bavail) * sfs.Bsize
	// min_free at two thirds of the free space: above it, but below twice it.
	p, _, _ := streamer(400, 4096)
	ts := newTestServerIn(t, dir, []providers.Provider{p}, storageOpts(dir, free*2/3))
	alice := ts.createChat("alice", "claude")
	bob := ts.createChat("bob", "claude")
	if st, body := ts.do("POST", "/v1/chats/"+alice.ID+"/prompt", "alice", api.PromptRequest{Text: "stream"}); st != http.StatusAccepted {
		t.Fatalf("alice's first prompt (nobody over a share yet): %d %s", st, body)
	}
	ts.waitIdle(alice.ID)
	if n, _ := ts.st.EventBytes(alice.ID); n < 1<<20 {
		t.Fatalf("alice's chat holds %d bytes, want over 1 MiB", n)
	}
	st, body := ts.do("POST", "/v1/chats/"+alice.ID+"/prompt", "alice", api.PromptRequest{Text: "stream"})
	if st != http.StatusInsufficientStorage || errorCode(t, body) != api.CodeStorageFull ||
		!strings.Contains(string(body), "below twice [daemon] min_free") || !strings.Contains(string(body), "more than an equal share") {
		t.Fatalf("alice over her share: %d %s, want 507 storage_full naming the share", st, body)
	}
	if st, body := queueRaw(ts, "alice", alice.ID, "later"); st != http.StatusInsufficientStorage {
		t.Fatalf("alice queues over her share: %d %s, want 507", st, body)
	}
	if st, body := ts.do("POST", "/v1/chats/"+bob.ID+"/prompt", "bob", api.PromptRequest{Text: "hi"}); st != http.StatusAccepted {
		t.Fatalf("bob's prompt while alice is over her share: %d %s, want 202", st, body)
	}
	ts.waitIdle(bob.ID)
	ts.stop()

	// Below min_free nobody is admitted.
	ts = newTestServerIn(t, dir, []providers.Provider{p}, storageOpts(dir, free*2))
	if st, body := ts.do("POST", "/v1/chats/"+bob.ID+"/prompt", "bob", api.PromptRequest{Text: "hi"}); st != http.StatusInsufficientStorage {
		t.Fatalf("bob below min_free: %d %s, want 507", st, body)
	}
}
