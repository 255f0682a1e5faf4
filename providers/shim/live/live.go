// Package live is remote-shim's live window: the recent output of one
// stream of a run with frames, held in memory blocks so a caught-up
// client is served from memory, not from the spool file (docs/benchmarks.md, "remote-shim"). The
// shim's server (providers/shim) owns the locking: a Window is guarded by
// the server's mutex.
//
// It imports the standard library only.
package live

import "sort"

// The spool goroutine of each stream reads the CLI's pipe straight into
// blocks of memory and publishes each read in the stream's live window
// under server.mu; it appends them to the spool file (for a client that
// attaches later) in pieces of flushAt bytes or more. A streamer sends
// from the window whatever it holds (no read back from the file) and
// reads the file only for bytes older than the window: a client that
// attaches late or lags behind. Both address a byte by the same absolute
// offset, and the window lets go of bytes only once they are in the
// file, so everything below the window's start is in the file and a
// streamer switches between the two at any offset without losing or
// repeating a byte.
//
// A block is read into again only once nothing refers to it: not the
// spool goroutine, not a span of the window, not a streamer sending from
// it outside server.mu. Reusing blocks spares the shim a fresh 256 KiB
// per block (zeroing, page faults, garbage), about a third of its CPU
// time in a flood (docs/benchmarks.md, "remote-shim").

// Sizes of the live window.
const (
	liveWindow = 1 << 20   // bytes of recent output held per stream
	BlockSize  = 256 << 10 // memory the spool goroutine reads into
	MinRead    = 16 << 10  // room under which it takes a fresh block
	FlushAt    = 64 << 10  // unwritten bytes it writes to the file
	maxFree    = 2         // unused blocks a window keeps for reuse
	// Chunk is the most a span grows to: the bytes one frame sends.
	Chunk = 64 << 10
)

// Block is memory the spool goroutine reads into. refs counts what holds
// it: the spool goroutine while it reads into it, each span of the
// window in it, each streamer sending from it.
type Block struct {
	B    []byte // BlockSize bytes
	Refs int
}

// span is published output: b holds the stream's bytes from offset off,
// in blk.
type span struct {
	off int64
	b   []byte
	blk *Block
}

// Window is a stream's recent output: contiguous spans from base to the
// stream's spooled size. Bytes below written are in the spool file.
type Window struct {
	Base    int64
	spans   []span
	held    int
	written int64
	free    []*Block // blocks nothing holds, for reuse
}

// Take returns a block for the spool goroutine, held once (by it): an
// unused one, or nil when the caller must allocate one.
func (w *Window) Take() *Block {
	n := len(w.free)
	if n == 0 {
		return nil
	}
	blk := w.free[n-1]
	w.free[n-1] = nil
	w.free = w.free[:n-1]
	blk.Refs = 1
	return blk
}

// Release drops one hold of blk; the last one makes it free for reuse.
func (w *Window) Release(blk *Block) {
	blk.Refs--
	if blk.Refs == 0 && len(w.free) < maxFree {
		w.free = append(w.free, blk)
	}
}

// Add publishes b, the stream's bytes from offset off (its spooled size),
// read into blk. next says b directly follows the last span's bytes in
// the same block: that span then grows, up to Chunk bytes.
func (w *Window) Add(off int64, blk *Block, b []byte, next bool) {
	if n := len(w.spans); next && n > 0 && len(w.spans[n-1].b)+len(b) <= Chunk {
		last := &w.spans[n-1]
		last.b = last.b[:len(last.b)+len(b)]
	} else {
		if n == 0 {
			w.Base = off
		}
		blk.Refs++
		w.spans = append(w.spans, span{off: off, b: b, blk: blk})
	}
	w.held += len(b)
	w.trim()
}

// Wrote records that the spool file holds the bytes below off.
func (w *Window) Wrote(off int64) {
	w.written = off
	w.trim()
}

// trim lets go of the oldest spans past the window's size that are in the
// file.
func (w *Window) trim() {
	for len(w.spans) > 1 && w.held-len(w.spans[0].b) >= liveWindow && w.spans[1].off <= w.written {
		w.held -= len(w.spans[0].b)
		w.Release(w.spans[0].blk)
		w.spans[0] = span{}
		w.spans = w.spans[1:]
		w.Base = w.spans[0].off
	}
}

// At returns the window's bytes from offset off to the end of the span
// holding it, and the span's block, or nil when off is outside the
// window. A caller that uses the bytes after server.mu is unlocked holds
// the block (refs) until it is done with them.
func (w *Window) At(off int64) ([]byte, *Block) {
	if len(w.spans) == 0 || off < w.Base {
		return nil, nil
	}
	i := sort.Search(len(w.spans), func(i int) bool { return w.spans[i].off > off }) - 1
	s := w.spans[i]
	if d := off - s.off; d < int64(len(s.b)) {
		return s.b[d:], s.blk
	}
	return nil, nil
}
