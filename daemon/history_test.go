package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"remote/api"
	"remote/providers"
)

// TestHistoryPages: GET /v1/chats/{id}/history pages backwards from the
// newest event; pages join without gap or overlap into the whole log.
func TestHistoryPages(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: "claude"}})
	chat := ts.createChat("alice", "claude")
	for i := range 4 { // 4 runs × (user, assistant_text, complete) = 12 events
		if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: fmt.Sprint("p", i)}); st != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", st, body)
		}
		ts.waitIdle(chat.ID)
	}
	page := func(query string) api.HistoryPage {
		t.Helper()
		st, body := ts.do("GET", "/v1/chats/"+chat.ID+"/history"+query, "alice", nil)
		if st != http.StatusOK {
			t.Fatalf("history%s: %d %s", query, st, body)
		}
		var p api.HistoryPage
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seqs := func(p api.HistoryPage) []int64 {
		var out []int64
		for _, raw := range p.Events {
			var ev api.Event
			_ = json.Unmarshal(raw, &ev)
			out = append(out, ev.Seq)
		}
		return out
	}
	p := page("?limit=5")
	if fmt.Sprint(seqs(p)) != "[8 9 10 11 12]" || !p.HasMore || p.NextBefore != 8 || p.LastSeq != 12 {
		t.Fatalf("newest page: seqs %v hasMore %v nextBefore %d lastSeq %d", seqs(p), p.HasMore, p.NextBefore, p.LastSeq)
	}
	p = page("?limit=5&before=8")
	if fmt.Sprint(seqs(p)) != "[3 4 5 6 7]" || !p.HasMore || p.NextBefore != 3 {
		t.Fatalf("second page: %v %v %d", seqs(p), p.HasMore, p.NextBefore)
	}
	p = page("?limit=5&before=3")
	if fmt.Sprint(seqs(p)) != "[1 2]" || p.HasMore || p.NextBefore != 0 || p.LastSeq != 12 {
		t.Fatalf("last page: %v %v %d", seqs(p), p.HasMore, p.NextBefore)
	}
	// The wire JSON of each event is what the socket sends: "seq" first.
	if raw := string(page("?limit=1").Events[0]); raw[:9] != `{"seq":12` {
		t.Fatalf("event JSON %s", raw)
	}
	if p := page(""); len(p.Events) != 12 || p.HasMore {
		t.Fatalf("default page: %d events, hasMore %v", len(p.Events), p.HasMore)
	}
	for q, want := range map[string]string{
		"?limit=0":    `limit: want an integer from 1 to 1000, got "0"`,
		"?limit=1001": `limit: want an integer from 1 to 1000, got "1001"`,
		"?before=x":   `before: want a non-negative integer, got "x"`,
		"?before=0":   `before: want a seq of 1 or more, got "0"`,
	} {
		st, body := ts.do("GET", "/v1/chats/"+chat.ID+"/history"+q, "alice", nil)
		var e api.ErrorResponse
		_ = json.Unmarshal(body, &e)
		if st != http.StatusBadRequest || e.Error.Message != want {
			t.Errorf("history%s: %d %s, want 400 %q", q, st, body, want)
		}
	}
	if st, _ := ts.do("GET", "/v1/chats/"+chat.ID+"/history", "bob", nil); st != http.StatusNotFound {
		t.Errorf("another user's history: %d, want 404", st)
	}
	empty := ts.createChat("alice", "claude")
	st, body := ts.do("GET", "/v1/chats/"+empty.ID+"/history", "alice", nil)
	if st != http.StatusOK || string(body) != "{\"events\":[],\"lastSeq\":0,\"hasMore\":false}\n" {
		t.Errorf("empty chat history: %d %q", st, body)
	}
}

// TestRenameChat: PATCH /v1/chats/{id} with a title renames the chat.
func TestRenameChat(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: "claude"}})
	chat := ts.createChat("alice", "claude")
	st, body := ts.do("PATCH", "/v1/chats/"+chat.ID, "alice", map[string]string{"title": "Renamed"})
	var c api.Chat
	_ = json.Unmarshal(body, &c)
	if st != http.StatusOK || c.Title != "Renamed" {
		t.Fatalf("rename: %d %s", st, body)
	}
	if got, _ := ts.st.Chat(chat.ID); got.Title != "Renamed" {
		t.Fatalf("stored title %q", got.Title)
	}
	if st, _ := ts.do("PATCH", "/v1/chats/"+chat.ID, "bob", map[string]string{"title": "x"}); st != http.StatusNotFound {
		t.Errorf("bob renames alice's chat: %d, want 404", st)
	}
	if st, body := ts.do("PATCH", "/v1/chats/"+chat.ID, "alice", map[string]any{"title": 3}); st != http.StatusBadRequest {
		t.Errorf("numeric title: %d %s, want 400", st, body)
	}
}
