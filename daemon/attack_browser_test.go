package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/providers"
)

// rawDo sends body with exactly the Content-Type given ("" sends none).
func (ts *testServer) rawDo(method, path, user, contentType, body string) (int, []byte) {
	ts.t.Helper()
	req, _ := http.NewRequest(method, "http://remoted"+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		req.Header.Set(api.HeaderUser, user)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// TestAttackTextPlainBody: a form in a page (enctype text/plain, or the
// default urlencoded) can post a body that happens to be JSON without a
// CORS preflight. Every JSON body must be declared application/json:
// anything else is 415 unsupported_media_type and nothing is created.
func TestAttackTextPlainBody(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}})
	chat := ts.createChat("alice", "claude")
	before := ts.snapshot()
	create := `{"provider":"claude","title":"pwn="}` + "\r\n" // what a text/plain form sends
	for _, ct := range []string{
		"text/plain",
		"text/plain;charset=UTF-8",
		"application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x",
		"application/jsonp",
		"application/json; charset=iso-8859-1",
		"", // a body without any Content-Type
	} {
		for _, path := range []string{"/v1/chats", "/v1/chats/" + chat.ID + "/prompt", "/v1/chats/" + chat.ID + "/fork"} {
			st, body := ts.rawDo("POST", path, "alice", ct, create)
			var e api.ErrorResponse
			if err := json.Unmarshal(body, &e); err != nil || st != http.StatusUnsupportedMediaType || e.Error.Code != "unsupported_media_type" || !strings.Contains(e.Error.Message, "application/json") {
				t.Errorf("POST %s with Content-Type %q: %d %s; want 415 unsupported_media_type naming application/json", path, ct, st, body)
			}
		}
	}
	if after := ts.snapshot(); after != before {
		t.Errorf("a non-JSON body changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// What clients send still works, with or without a charset.
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"} {
		if st, body := ts.rawDo("POST", "/v1/chats", "alice", ct, `{"provider":"claude","title":"ok"}`); st != http.StatusCreated {
			t.Errorf("Content-Type %q: %d %s, want 201", ct, st, body)
		}
	}
	// A fork without a body needs no Content-Type.
	if st, body := ts.rawDo("POST", "/v1/chats/"+chat.ID+"/fork", "alice", "", ""); st != http.StatusCreated {
		t.Errorf("fork without a body: %d %s, want 201", st, body)
	}
}

// TestAttackInvalidUTF8: invalid UTF-8 in a JSON body or a chat socket
// frame is refused (400 / a transient error naming it), not turned into
// U+FFFD and accepted.
func TestAttackInvalidUTF8(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}})
	chat := ts.createChat("alice", "claude")
	before := ts.snapshot()
	bad := "{\"provider\":\"claude\",\"title\":\"bad \xff\xfe title\"}"
	st, body := ts.rawDo("POST", "/v1/chats", "alice", "application/json", bad)
	var e api.ErrorResponse
	if err := json.Unmarshal(body, &e); err != nil || st != http.StatusBadRequest || e.Error.Code != api.CodeBadRequest || e.Error.Message != "invalid UTF-8 at byte 34; JSON must be UTF-8" {
		t.Errorf("body with invalid UTF-8: %d %s; want 400 naming the byte", st, body)
	}
	st, body = ts.rawDo("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", "application/json", "{\"text\":\"hi \xc3\"}")
	if st != http.StatusBadRequest || !strings.Contains(string(body), "invalid UTF-8 at byte 12") {
		t.Errorf("prompt with invalid UTF-8: %d %s; want 400", st, body)
	}

	ws, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if ev := readEvent(t, ws); ev.Type != api.EventSync {
		t.Fatalf("first frame %+v", ev)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte("{\"type\":\"prompt\",\"text\":\"run \xed\xa0\x80 this\"}")); err != nil {
		t.Fatal(err)
	}
	ev := readEvent(t, ws)
	if ev.Type != api.EventError || ev.Seq != 0 || ev.Message != "invalid message: invalid UTF-8 at byte 29; JSON must be UTF-8" {
		t.Errorf("frame with invalid UTF-8: %+v; want a transient error naming it", ev)
	}
	if after := ts.snapshot(); after != before {
		t.Errorf("invalid UTF-8 changed the store:\nbefore %s\nafter  %s", before, after)
	}
}
