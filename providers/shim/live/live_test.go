package live

import "testing"

// A block of the live window is read into again only once nothing holds
// it: after the window trimmed its spans, a streamer still sending from
// it keeps it from reuse until it lets go (docs/benchmarks.md, "remote-shim"). Reused too early,
// a caught-up client served from memory would get bytes of later output.
func TestWindowReusesOnlyUnheldBlocks(t *testing.T) {
	var w Window
	var off int64
	// fill reads BlockSize bytes into a block as the spool goroutine
	// does, writes them to the "file" and returns the block, released
	// by the spool goroutine.
	fill := func() *Block {
		blk := w.Take()
		if blk == nil {
			blk = &Block{B: make([]byte, BlockSize), Refs: 1}
		}
		for n := 0; n < BlockSize; n += Chunk {
			w.Add(off, blk, blk.B[n:n+Chunk:BlockSize], n > 0)
			off += Chunk
		}
		w.Wrote(off)
		w.Release(blk)
		return blk
	}
	first := fill()
	b, held := w.At(0)
	if held != first || len(b) != Chunk {
		t.Fatalf("at(0): %d bytes of block %p, want %d of the first block %p", len(b), held, Chunk, first)
	}
	held.Refs++ // a streamer sends from it outside the lock
	// Enough output after it that the window lets go of the first block.
	var later []*Block
	for off < 2*liveWindow {
		later = append(later, fill())
	}
	if w.Base <= BlockSize {
		t.Fatalf("the window still starts at %d, in the first block", w.Base)
	}
	for _, blk := range later {
		if blk == first {
			t.Fatal("the first block was read into again while a streamer held it")
		}
	}
	w.Release(held) // the streamer is done
	if blk := w.Take(); blk != first {
		t.Fatalf("take after the streamer let go: %p, want the first block %p", blk, first)
	}
}
