package shim

import "testing"

// A block of the live window is read into again only once nothing holds
// it: after the window trimmed its spans, a streamer still sending from
// it keeps it from reuse until it lets go (issue 28). Reused too early,
// a caught-up client served from memory would get bytes of later output.
func TestWindowReusesOnlyUnheldBlocks(t *testing.T) {
	var w window
	var off int64
	// fill reads blockSize bytes into a block as the spool goroutine
	// does, writes them to the "file" and returns the block, released
	// by the spool goroutine.
	fill := func() *block {
		blk := w.take()
		if blk == nil {
			blk = &block{b: make([]byte, blockSize), refs: 1}
		}
		for n := 0; n < blockSize; n += chunk {
			w.add(off, blk, blk.b[n:n+chunk:blockSize], n > 0)
			off += chunk
		}
		w.wrote(off)
		w.release(blk)
		return blk
	}
	first := fill()
	b, held := w.at(0)
	if held != first || len(b) != chunk {
		t.Fatalf("at(0): %d bytes of block %p, want %d of the first block %p", len(b), held, chunk, first)
	}
	held.refs++ // a streamer sends from it outside the lock
	// Enough output after it that the window lets go of the first block.
	var later []*block
	for off < 2*liveWindow {
		later = append(later, fill())
	}
	if w.base <= blockSize {
		t.Fatalf("the window still starts at %d, in the first block", w.base)
	}
	for _, blk := range later {
		if blk == first {
			t.Fatal("the first block was read into again while a streamer held it")
		}
	}
	w.release(held) // the streamer is done
	if blk := w.take(); blk != first {
		t.Fatalf("take after the streamer let go: %p, want the first block %p", blk, first)
	}
}
