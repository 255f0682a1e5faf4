package shim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// A frame header announcing more than 1 MiB (1048576 bytes) of payload is
// refused as a protocol error from the header alone, before anything is
// allocated or read: a peer cannot make the shim or the daemon allocate
// 4 GiB with five bytes. Exactly 1 MiB still passes.
func TestFrameLengthRefusal(t *testing.T) {
	header := func(typ byte, n uint32) []byte {
		b := []byte{typ, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], n)
		return b
	}
	for _, n := range []uint32{1<<20 + 1, 1 << 31, 1<<32 - 1} {
		_, err := ReadFrame(bytes.NewReader(header(FrameStdin, n))) // the header only, no payload
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "is over 1048576") {
			t.Errorf("a stdin frame of %d bytes: %v; want the protocol error saying it is over 1048576", n, err)
		}
	}
	ok := append(header(FrameStdin, 1<<20), make([]byte, 1<<20)...)
	if f, err := ReadFrame(bytes.NewReader(ok)); err != nil || len(f.Payload) != 1<<20 {
		t.Fatalf("a stdin frame of exactly 1048576 bytes: %v", err)
	}
}
