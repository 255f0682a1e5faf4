package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
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
		if _, _, err := wireEvent(key, val); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("wireEvent error is not ErrCorrupt: %v", err)
		}
		ev, err := decodeEvent(key, val)
		if err == nil {
			// What the store writes for this event (no seq: it lives in
			// the key) must splice into wire JSON equal to its encoding.
			stored := ev
			stored.Seq = 0
			val, _ := json.Marshal(stored)
			want, _ := json.Marshal(ev)
			seq, raw, err := wireEvent(key, val)
			if err != nil || seq != ev.Seq || !bytes.Equal(raw, want) {
				t.Fatalf("wireEvent(%s) = %d %s, %v; want %s", val, seq, raw, err, want)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error is not ErrCorrupt: %v", err)
			}
			return
		}
		if ev.Seq <= 0 || ev.Type == "" {
			t.Fatalf("accepted event without seq or type: %+v", ev)
		}
		enc, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		again, err := decodeEvent(key, enc)
		if err != nil || again.Seq != ev.Seq || again.Type != ev.Type || again.Text != ev.Text {
			t.Fatalf("round trip: %+v -> %+v, %v", ev, again, err)
		}
	})
}

// FuzzOpenSecret feeds arbitrary stored bytes to the secret record decoder
// and decrypter: they must fail with ErrCorrupt or ErrWrongKey, never panic
// or return a value that was not sealed under the key.
func FuzzOpenSecret(f *testing.F) {
	s := &Store{}
	aead, err := newAEAD(testKey)
	if err != nil {
		f.Fatal(err)
	}
	s.aead = aead
	good, _ := s.seal("web", "TOKEN", []byte("value"), time.Unix(0, 0))
	raw, _ := json.Marshal(good)
	f.Add(raw)
	f.Add([]byte(`{"nonce":"AAAAAAAAAAAAAAAA","sealed":""}`))
	f.Add([]byte(`{"updatedAt":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v sealed
		if err := json.Unmarshal(raw, &v); err != nil {
			return
		}
		plain, err := s.open("web", "TOKEN", v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrWrongKey) {
				t.Fatalf("error class: %v", err)
			}
			return
		}
		if string(plain) != "value" {
			t.Fatalf("forged plaintext %q accepted", plain)
		}
	})
}
