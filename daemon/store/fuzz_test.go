package store

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeEvent feeds arbitrary stored bytes to the event decoder: it must
// either fail with ErrCorrupt or return an event that re-encodes and decodes
// to itself.
func FuzzDecodeEvent(f *testing.F) {
	f.Add(seqKey(1), []byte(`{"t":1,"type":"user","text":"hi"}`))
	f.Add(seqKey(7), []byte(`{"type":"tool_use_start","id":"x","input":{"a":[1,2]}}`))
	f.Add(seqKey(0), []byte(`{"type":"user"}`))
	f.Add([]byte{1, 2}, []byte(`{}`))
	f.Add(seqKey(3), []byte(`{"type":`))
	f.Add(seqKey(1<<62), []byte(`{"type":"x","data":null,"usage":"s"}`))
	f.Fuzz(func(t *testing.T, key, val []byte) {
		ev, err := decodeEvent(key, val)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error is not ErrCorrupt: %v", err)
			}
			return
		}
		if ev.Seq <= 0 || ev.Type == "" {
			t.Fatalf("accepted event without seq or type: %+v", ev)
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		again, err := decodeEvent(key, raw)
		if err != nil || again.Seq != ev.Seq || again.Type != ev.Type || again.Text != ev.Text {
			t.Fatalf("round trip: %+v -> %+v, %v", ev, again, err)
		}
	})
}
