package shim

import (
	"bytes"
	"testing"
)

func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range []Frame{
		{Type: FrameStdout, Payload: []byte("hello\n")},
		{Type: FrameStdin, Payload: nil},
		{Type: FrameStdinClose},
		{Type: FrameRelease},
		SignalFrame(15),
		{Type: FrameExit, Payload: []byte(`{"code":137,"signal":9}`)},
	} {
		f.Add(AppendFrame(nil, fr))
	}
	f.Add([]byte{'s', 0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{'o', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeFrame(b)
		if err != nil {
			return
		}
		if len(fr.Payload) > MaxFrame {
			t.Fatalf("decoded a payload of %d bytes", len(fr.Payload))
		}
		if !bytes.Equal(AppendFrame(nil, fr), b) {
			t.Fatalf("frame %q does not round-trip", b)
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add([]byte(`{"version":1,"spec":{"path":"claude","args":["-p"],"env":["A=b"],"dir":"/","uid":1000,"gid":1000}}`))
	f.Add([]byte(`{"version":1,"stdout":10,"stderr":3}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":3}`))
	f.Add([]byte(`{"version":1,"spec":{"path":""}}`))
	f.Add([]byte(`{"version":1,"spec":{"path":"claude","spool":true}}`))
	f.Add([]byte(`{"version":2,"spec":{"path":"claude","spool":true}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHello(b)
		if err != nil {
			return
		}
		if h.Version < 1 || h.Version > 2 || h.Stdout < 0 || h.Stderr < 0 {
			t.Fatalf("accepted %+v", h)
		}
		if h.Spec != nil && (h.Spec.Path == "" || h.Stdout != 0 || h.Stderr != 0 || (h.Spec.Spool && h.Version < 2)) {
			t.Fatalf("accepted start %+v", h)
		}
		if _, err := DecodeExit(b); err == nil {
			return
		}
	})
}
