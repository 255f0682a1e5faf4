package shim

import "sort"

// The spool goroutine of each stream reads the CLI's pipe straight into
// blocks of memory that are never rewritten and publishes each read in
// the stream's live window under server.mu; it appends them to the spool
// file (for a client that attaches later) in pieces of flushAt bytes or
// more. A streamer sends from the window whatever it holds (no read back
// from the file) and reads the file only for bytes older than the
// window: a client that attaches late or lags behind. Both address a
// byte by the same absolute offset, and the window lets go of bytes only
// once they are in the file, so everything below the window's start is
// in the file and a streamer switches between the two at any offset
// without losing or repeating a byte.

// Sizes of the live window.
const (
	liveWindow = 1 << 20   // bytes of recent output held per stream
	blockSize  = 256 << 10 // memory the spool goroutine reads into
	minRead    = 16 << 10  // room under which it takes a fresh block
	flushAt    = 64 << 10  // unwritten bytes it writes to the file
)

// span is published output: b holds the stream's bytes from offset off.
type span struct {
	off int64
	b   []byte
}

// window is a stream's recent output: contiguous spans from base to the
// stream's spooled size. Bytes below written are in the spool file.
type window struct {
	base    int64
	spans   []span
	held    int
	written int64
}

// add publishes b, the stream's bytes from offset off (its spooled size).
// next says b directly follows the last span's bytes in the same block:
// that span then grows, up to chunk bytes.
func (w *window) add(off int64, b []byte, next bool) {
	if n := len(w.spans); next && n > 0 && len(w.spans[n-1].b)+len(b) <= chunk {
		last := &w.spans[n-1]
		last.b = last.b[:len(last.b)+len(b)]
	} else {
		if n == 0 {
			w.base = off
		}
		w.spans = append(w.spans, span{off: off, b: b})
	}
	w.held += len(b)
	w.trim()
}

// wrote records that the spool file holds the bytes below off.
func (w *window) wrote(off int64) {
	w.written = off
	w.trim()
}

// trim lets go of the oldest spans past the window's size that are in the
// file.
func (w *window) trim() {
	for len(w.spans) > 1 && w.held-len(w.spans[0].b) >= liveWindow && w.spans[1].off <= w.written {
		w.held -= len(w.spans[0].b)
		w.spans[0] = span{}
		w.spans = w.spans[1:]
		w.base = w.spans[0].off
	}
}

// at returns the window's bytes from offset off to the end of the span
// holding it, or nil when off is outside the window.
func (w *window) at(off int64) []byte {
	if len(w.spans) == 0 || off < w.base {
		return nil
	}
	i := sort.Search(len(w.spans), func(i int) bool { return w.spans[i].off > off }) - 1
	s := w.spans[i]
	if d := off - s.off; d < int64(len(s.b)) {
		return s.b[d:]
	}
	return nil
}
