package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/webhook"
	"remote/providers"
)

// A body sent chunked (no Content-Length, as fetch sends a stream) without
// Content-Type: application/json is refused with 415 like any other
// undeclared body: the "no body, no type" pass must not open on an
// unknown length. Nothing is created.
func TestAttackChunkedBodyWithoutContentType(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}})
	before := ts.snapshot()
	for _, ct := range []string{"", "text/plain"} {
		// A reader of unknown length: net/http sends it chunked.
		body := io.MultiReader(strings.NewReader(`{"provider":"claude",`), strings.NewReader(`"title":"pwn"}`))
		req, _ := http.NewRequest("POST", "http://remoted/v1/chats", body)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set(api.HeaderUser, "alice")
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.ErrorResponse
		if err := json.Unmarshal(data, &e); err != nil || resp.StatusCode != 415 || e.Error.Code != "unsupported_media_type" {
			t.Errorf("chunked POST /v1/chats with Content-Type %q: %d %s; want 415 unsupported_media_type", ct, resp.StatusCode, data)
		}
	}
	if after := ts.snapshot(); after != before {
		t.Errorf("a chunked undeclared body changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// A project chat's webhook notification carries "project" (docs/api.md,
// "Notifications"), read from the chat through the server's wiring.
func TestNotifyProjectChatCarriesProject(t *testing.T) {
	rc, hook := newReceiver(t, 0)
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: "claude"}}, func(o *Options) {
		o.Notify = webhook.NotifierOptions{URL: hook.URL, Backoff: 10 * time.Millisecond}
	})
	chat := api.Chat{ID: "abcdef019876", Owner: "alice", Provider: "claude", Project: "webshop", Title: "fix the cart", CreatedAt: time.Now()}
	if err := ts.st.CreateChat(chat); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.srv.hub.Append(chat.ID, api.Event{Type: api.EventComplete}); err != nil {
		t.Fatal(err)
	}
	got := rc.wait(t, 1)
	if got[0]["event"] != "run_completed" || got[0]["project"] != "webshop" || got[0]["chatId"] != chat.ID || got[0]["title"] != "fix the cart" {
		t.Fatalf("notification %v; want run_completed with project webshop", got[0])
	}
}
