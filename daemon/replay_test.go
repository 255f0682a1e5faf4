package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/daemon/eventstream"
	"remote/providers"
)

// TestReplayArrayMatchesEncodedEvents checks that the JSON array replay,
// served from the stored wire JSON, is byte for byte the array of
// json.Marshal of each decoded event, across the store's read batches and
// for escapes, raw JSON fields and non-ASCII text.
func TestReplayArrayMatchesEncodedEvents(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}})
	chat := ts.createChat("alice", "claude")
	var evs []api.Event
	for i := range 1100 {
		evs = append(evs, api.Event{Type: api.EventAssistantText, Text: fmt.Sprintf("<b>%d</b> & \"q\" é\u2028", i), MessageID: "m"})
	}
	evs = append(evs,
		api.Event{Type: api.EventToolUseStart, ID: "t1", Name: "Bash", Input: json.RawMessage(`{"cmd": "echo <x>"}`)},
		api.Event{Type: api.EventSystem, Subtype: "init", Data: json.RawMessage(`[1, 2.50, "\u00e9"]`)},
		api.Event{Type: api.EventComplete, Provider: "claude", Usage: json.RawMessage(`{"in":1}`)},
	)
	if _, err := ts.st.Append(chat.ID, evs...); err != nil {
		t.Fatal(err)
	}
	stored := ts.events(chat.ID)
	for _, since := range []int64{0, 1, 511, 512, 1099, int64(len(stored)), int64(len(stored) + 5)} {
		t.Run(fmt.Sprintf("since %d", since), func(t *testing.T) {
			want := []byte("[")
			n := 0
			for _, ev := range stored {
				if ev.Seq <= since {
					continue
				}
				if n > 0 {
					want = append(want, ',')
				}
				n++
				b, err := json.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, b...)
			}
			want = append(want, "]\n"...)
			st, body := ts.do("GET", fmt.Sprintf("/v1/chats/%s/events?since=%d", chat.ID, since), "alice", nil)
			if st != 200 || !bytes.Equal(body, want) {
				t.Fatalf("replay since %d: %d, %d bytes, want %d bytes identical to the encoded events", since, st, len(body), len(want))
			}
		})
	}
}

// TestFollowReplayMatchesEncodedEvents checks that the NDJSON, SSE and
// WebSocket replays, served from the stored wire JSON, frame exactly
// json.Marshal of each decoded event, then the sync.
func TestFollowReplayMatchesEncodedEvents(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}})
	chat := ts.createChat("alice", "claude")
	var evs []api.Event
	for i := range 600 {
		evs = append(evs, api.Event{Type: api.EventAssistantText, Text: fmt.Sprintf("<%d> & é\u2028", i), Data: json.RawMessage(`{"k": [1, 2]}`)})
	}
	if _, err := ts.st.Append(chat.ID, evs...); err != nil {
		t.Fatal(err)
	}
	stored := ts.events(chat.ID)[3:] // since=3
	encoded := func(t *testing.T, ev api.Event) []byte {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	get := func(t *testing.T, accept string) *bufio.Reader {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://remoted/v1/chats/"+chat.ID+"/events?follow=true&since=3", nil)
		req.Header.Set(api.HeaderUser, "alice")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return bufio.NewReader(resp.Body)
	}
	isSync := func(t *testing.T, b []byte) {
		var ev api.Event
		if err := json.Unmarshal(b, &ev); err != nil || ev.Type != api.EventSync {
			t.Fatalf("after the replay: %s, want the sync", b)
		}
	}
	t.Run("ndjson", func(t *testing.T) {
		br := get(t, "")
		for _, ev := range stored {
			line, err := br.ReadBytes('\n')
			if want := append(encoded(t, ev), '\n'); err != nil || !bytes.Equal(line, want) {
				t.Fatalf("line %q (%v), want %q", line, err, want)
			}
		}
		line, _ := br.ReadBytes('\n')
		isSync(t, line)
	})
	t.Run("sse", func(t *testing.T) {
		br := get(t, "text/event-stream")
		for _, ev := range stored {
			want := fmt.Sprintf("id: %d\ndata: %s\n\n", ev.Seq, encoded(t, ev))
			got := make([]byte, len(want))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
				t.Fatalf("message %q (%v), want %q", got, err, want)
			}
		}
		line, _ := br.ReadString('\n')
		isSync(t, []byte(strings.TrimPrefix(line, "data: ")))
	})
	t.Run("websocket", func(t *testing.T) {
		conn, _, err := ts.dialWS("/ws/chat/"+chat.ID+"?since=3", "alice")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, ev := range stored {
			kind, msg, err := conn.ReadMessage()
			if want := append(encoded(t, ev), '\n'); err != nil || kind != websocket.TextMessage || !bytes.Equal(msg, want) {
				t.Fatalf("message %d %q (%v), want %q", kind, msg, err, want)
			}
		}
		_, msg, _ := conn.ReadMessage()
		isSync(t, msg)
	})
}

// discardResponse is an http.ResponseWriter that drops the body.
type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}

// BenchmarkReplayArray100k: GET /v1/chats/{id}/events of a chat of 100,000
// events, served from the stored wire JSON ("raw"), against decoding each
// event and encoding it again ("decode-encode", how it was served before).
func BenchmarkReplayArray100k(b *testing.B) {
	ts := newTestServer(b, []providers.Provider{&fakeProvider{id: providers.Claude}})
	chat := ts.createChat("alice", "claude")
	batch := make([]api.Event, 1000)
	for i := range batch {
		batch[i] = api.Event{Type: api.EventAssistantText, Text: "a token or two of streamed text", MessageID: "msg_01"}
	}
	for range 100 {
		if _, err := ts.st.Append(chat.ID, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("raw", func(b *testing.B) {
		for range b.N {
			_ = eventstream.ReplayArray(&discardResponse{h: http.Header{}}, ts.st, chat.ID, 0, ts.srv.log)
		}
	})
	b.Run("decode-encode", func(b *testing.B) {
		for range b.N {
			w := &discardResponse{h: http.Header{}}
			n := 0
			_ = ts.st.Events(chat.ID, 0, 0, func(ev api.Event) error {
				if n > 0 {
					_, _ = w.Write([]byte(","))
				}
				n++
				out, _ := json.Marshal(ev)
				_, err := w.Write(out)
				return err
			})
		}
	})
}
