package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"remote/internal/testkit"
)

// received is what one client read of one stream, from offset off on.
type received struct {
	mu   sync.Mutex
	off  int64
	b    []byte
	err  error
	done chan struct{}
}

func (r *received) len() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.off + int64(len(r.b))
}

// readAll reads src into r; slow reads 4 KiB a millisecond, so that the
// shim's streamer falls behind the live window and back to the file.
func (r *received) readAll(src io.Reader, slow bool) {
	defer close(r.done)
	buf := make([]byte, 32<<10)
	if slow {
		buf = buf[:4<<10]
	}
	for {
		n, err := src.Read(buf)
		r.mu.Lock()
		r.b = append(r.b, buf[:n]...)
		r.mu.Unlock()
		if err != nil {
			if !errors.Is(err, io.EOF) || errors.Is(err, ErrLost) {
				r.err = err
			}
			return
		}
		if slow {
			time.Sleep(time.Millisecond) //nolint:forbidigo // a slow reader: the subject
		}
	}
}

// TestAttachDuringFloodGetsEveryByteOnce hammers the handoff between the
// spool files and the live window: while the CLI floods both streams, a
// client after client attaches — from 0 (the whole spool, then live),
// from where the previous client got to (as a re-attaching daemon does),
// from half way, and a slow reader that falls behind the window and
// catches up — each replacing the last. Every client must receive
// exactly the spools' bytes from its offsets on: each byte once, in
// order; and the last one everything up to the end.
func TestAttachDuringFloodGetsEveryByteOnce(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	// About 6 MB per stream (several live windows), in writes of many
	// sizes, interleaved between the streams.
	script := `i=0; while [ $i -lt 40 ]; do
		seq $((i*25000)) $((i*25000+24999)); seq $((i*25000)) $((i*25000+24999)) >&2
		printf 'x%.0s' $(seq 1 $((i*37))); echo; i=$((i+1)); done`
	type client struct {
		cl       *Client
		out, err *received
	}
	attach := func(cl *Client, off0, off1 int64, slow bool) client {
		c := client{cl: cl, out: &received{off: off0, done: make(chan struct{})},
			err: &received{off: off1, done: make(chan struct{})}}
		go c.out.readAll(cl.Stdout(), slow)
		go c.err.readAll(cl.Stderr(), slow)
		return c
	}
	cur := attach(start(t, dir, script), 0, 0, false)
	var files [2]*os.File
	for i, name := range []string{StdoutName, StderrName} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	// check compares what a client read with the spools, once the shim
	// has written that far (at the latest when the pipes end).
	var checks sync.WaitGroup
	check := func(k int, c client) {
		checks.Add(1)
		go func() {
			defer checks.Done()
			for i, r := range []*received{c.out, c.err} {
				<-r.done
				end := r.off + int64(len(r.b))
				// Not Eventually: this runs off the test's goroutine, and the
				// comparison below says what was missing.
				_ = testkit.Poll(time.Minute, func() bool {
					fi, err := files[i].Stat()
					return err != nil || fi.Size() >= end
				})
				want := make([]byte, len(r.b))
				if n, err := files[i].ReadAt(want, r.off); n != len(want) {
					t.Errorf("client %d, stream %d: got %d bytes from %d, the spool has %d there: %v", k, i, len(r.b), r.off, n, err)
					return
				}
				if !bytes.Equal(r.b, want) {
					t.Errorf("client %d, stream %d (from %d, %d bytes): %s", k, i, r.off, len(r.b), firstDiff(r.b, want))
					return
				}
				r.b = nil
			}
		}()
	}
	clients, midFlood := 1, 0
	for k := 1; k < 80; k++ {
		time.Sleep(time.Duration(k%5) * time.Millisecond) //nolint:forbidigo // staggers the hand-offs against the flood: the subject
		var off0, off1 int64
		switch k % 4 {
		case 1, 3: // where the previous client got to
			off0, off1 = cur.out.len(), cur.err.len()
		case 2: // half way
			off0, off1 = cur.out.len()/2, cur.err.len()/2
		}
		cl, err := Attach(context.Background(), dial(t, dir), off0, off1)
		if err != nil {
			t.Fatalf("attach %d at %d, %d: %v", k, off0, off1, err)
		}
		exited := cl.Info().Exited
		if !exited {
			midFlood++
		}
		// The shim closed the previous client's connection.
		prev := cur
		cur = attach(cl, off0, off1, k%4 == 3)
		clients++
		check(k-1, prev)
		prev.cl.Close()
		if exited && k >= 8 {
			break
		}
	}
	<-cur.out.done
	<-cur.err.done
	if st, err := cur.cl.Wait(); err != nil || st.Code != 0 {
		t.Fatalf("last client: status %+v, %v", st, err)
	}
	var sizes [2]int64
	for i, r := range []*received{cur.out, cur.err} {
		fi, err := files[i].Stat()
		if err != nil {
			t.Fatal(err)
		}
		sizes[i] = fi.Size()
		if got := r.off + int64(len(r.b)); r.err != nil || got != sizes[i] {
			t.Fatalf("last client, stream %d: ended at %d of %d: %v", i, got, sizes[i], r.err)
		}
	}
	check(clients-1, cur)
	checks.Wait()
	if sizes[0] < 6_000_000 || sizes[1] < 6_000_000 {
		t.Fatalf("spools of %d and %d bytes, want over 6 MB each", sizes[0], sizes[1])
	}
	if midFlood < 3 {
		t.Fatalf("only %d of %d clients attached before the CLI's exit; the flood is too short to test the handoff", midFlood, clients)
	}
	t.Logf("%d clients, %d of them during the flood; spools of %d and %d bytes", clients, midFlood, sizes[0], sizes[1])
}

// firstDiff describes where got first differs from want.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("first difference at byte %d: got %q, want %q", i,
		got[i:min(i+20, len(got))], want[i:min(i+20, len(want))])
}
