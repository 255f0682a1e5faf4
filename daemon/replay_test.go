package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"remote/api"
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
		batch[i] = benchEvent
	}
	for range 100 {
		if _, err := ts.st.Append(chat.ID, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("raw", func(b *testing.B) {
		for range b.N {
			_ = ts.srv.replayArray(&discardResponse{h: http.Header{}}, chat.ID, 0)
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
