package providers

import "testing"

// TestCursorReplay pins the exactly-once rule of a re-attached run: events
// before the stored position are dropped, the rest kept, and stdin writes
// are dropped only while the lines before the stored position replay.
func TestCursorReplay(t *testing.T) {
	// The original run: two events before any line, three on the line at
	// byte 0, two on the line at byte 40, one after the end (byte 90).
	type step struct {
		line   int64 // -2: no Line call
		events int
	}
	script := []step{{-2, 2}, {0, 3}, {40, 2}, {90, 1}}
	var positions []Pos
	c := NewCursor(false, Pos{}, false)
	for _, s := range script {
		if s.line != -2 {
			c.Line(s.line)
		}
		for range s.events {
			p, replay := c.Next()
			if replay {
				t.Fatalf("a fresh run replays at %+v", p)
			}
			positions = append(positions, p)
		}
	}
	want := []Pos{{-1, 0}, {-1, 1}, {0, 0}, {0, 1}, {0, 2}, {40, 0}, {40, 1}, {90, 0}}
	for i := range want {
		if positions[i] != want[i] {
			t.Fatalf("positions %v, want %v", positions, want)
		}
	}
	// Stored up to and including the second event of line 0: the next
	// position is {0, 2}. A replay drops exactly the first four events.
	for _, stdinSent := range []bool{false, true} {
		r := NewCursor(true, Pos{Line: 0, Index: 2}, stdinSent)
		if !r.DropWrite() {
			t.Error("a write before the first line of a replay is kept (the CLI got it before the restart)")
		}
		var kept []Pos
		for _, s := range script {
			if s.line != -2 {
				r.Line(s.line)
				if drop := r.DropWrite(); drop != false {
					t.Errorf("write while at line %d dropped=%v, want kept (the stored line is 0)", s.line, drop)
				}
			}
			for range s.events {
				if p, replay := r.Next(); !replay {
					kept = append(kept, p)
				}
			}
		}
		if len(kept) != 4 || kept[0] != (Pos{0, 2}) || kept[3] != (Pos{90, 0}) {
			t.Errorf("replay kept %v, want [{0 2} {40 0} {40 1} {90 0}]", kept)
		}
	}
	// Nothing stored before the restart: everything is emitted again, and
	// pre-line writes are dropped only when the shim had received stdin.
	if NewCursor(true, Pos{Line: -1}, false).DropWrite() {
		t.Error("pre-line write dropped though the shim never got stdin")
	}
	if !NewCursor(true, Pos{Line: -1}, true).DropWrite() {
		t.Error("pre-line write kept though the shim got it before the restart")
	}
	// A replay whose stored position is further on drops writes of the
	// lines before it.
	r := NewCursor(true, Pos{Line: 40, Index: 1}, false)
	r.Line(0)
	if !r.DropWrite() {
		t.Error("write at line 0 of a replay stored up to line 40 kept")
	}
	var nilCursor *Cursor
	nilCursor.Line(5)
	if p, replay := nilCursor.Next(); replay || p != (Pos{}) || nilCursor.DropWrite() {
		t.Error("a nil cursor does something")
	}
}

// BenchmarkCursorLine is what a supervised run's reader pays per stdout
// line for its positions: Line, then Next for the line's one event.
func BenchmarkCursorLine(b *testing.B) {
	c := NewCursor(false, Pos{}, false)
	var off int64
	for b.Loop() {
		c.Line(off)
		if _, replayed := c.Next(); replayed {
			b.Fatal("replayed")
		}
		off += 80
	}
}
