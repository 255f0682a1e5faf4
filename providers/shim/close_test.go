package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// gateConn is a connection to a shim that the test plays: every Read
// first says it waits (waiting) and then gets the bytes the test sends
// (chunks), so the test knows when a reader has consumed everything sent
// and is blocked mid-frame. Close does not interrupt a Read: it stands for
// the read that completed just as Close ran, whose bytes then reach the
// reader after Close returned.
type gateConn struct {
	waiting chan struct{}
	chunks  chan []byte
	gone    chan struct{} // the test ended: a blocked Read returns
	pending []byte        // only the reader of the moment touches it

	mu     sync.Mutex
	wrote  bytes.Buffer // what the client sent: the hello line
	closed bool
}

func newGateConn(t *testing.T) *gateConn {
	g := &gateConn{waiting: make(chan struct{}), chunks: make(chan []byte), gone: make(chan struct{})}
	t.Cleanup(func() { close(g.gone) })
	return g
}

func (g *gateConn) Read(p []byte) (int, error) {
	if len(g.pending) == 0 {
		select {
		case g.waiting <- struct{}{}:
		case <-g.gone:
			return 0, net.ErrClosed
		}
		select {
		case g.pending = <-g.chunks:
		case <-g.gone:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

func (g *gateConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wrote.Write(p)
}

func (g *gateConn) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return nil
}

// waitRead returns once a Read of the client has consumed every byte
// sent and waits for more.
func (g *gateConn) waitRead() { <-g.waiting }

// send hands b to the Read that waits.
func (g *gateConn) send(b []byte) { g.chunks <- b }

// hello is the hello line the client sent.
func (g *gateConn) hello(t *testing.T) Hello {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	line, _, _ := bytes.Cut(g.wrote.Bytes(), []byte("\n"))
	h, err := DecodeHello(line)
	if err != nil {
		t.Fatalf("the client's hello %q: %v", line, err)
	}
	return h
}

// gateAttach attaches a client over a new gateConn, playing a shim that
// answers the hello and then sends tail, built from the hello.
func gateAttach(t *testing.T, off0, off1 int64, tail func(Hello) []byte) (*Client, *gateConn) {
	t.Helper()
	g := newGateConn(t)
	type result struct {
		cl  *Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cl, err := Attach(context.Background(), g, off0, off1)
		ch <- result{cl, err}
	}()
	g.waitRead() // the hello is written: handshake reads the answer
	h := g.hello(t)
	answer, _ := json.Marshal(Info{Version: MinProtocolVersion})
	g.send(append(append(answer, '\n'), tail(h)...))
	r := <-ch
	if r.err != nil {
		t.Fatalf("attach: %v", r.err)
	}
	return r.cl, g
}

// frameHeader is the header of an output frame of n bytes for stream i.
func frameHeader(i int, n int) []byte {
	return AppendFrame(nil, Frame{Type: [2]byte{FrameStdout, FrameStderr}[i], Payload: make([]byte, n)})[:5]
}

func outFrame(i int, p []byte) []byte {
	return AppendFrame(nil, Frame{Type: [2]byte{FrameStdout, FrameStderr}[i], Payload: p})
}

// numbered is n bytes of "tag0 tag1 tag2 ...": any offset shows in it.
func numbered(tag string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s%d ", tag, i)
	}
	return b.Bytes()[:n]
}

type readResult struct {
	b   []byte
	err error
}

// readOnce makes one Read of r in a goroutine.
func readOnce(r io.Reader) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		buf := make([]byte, 32<<10)
		n, err := r.Read(buf)
		ch <- readResult{buf[:n], err}
	}()
	return ch
}

// TestClosedClientAppendsNoFrameAfterClose: a reader blocked in the
// middle of a frame when Client.Close runs, whose read then completes,
// delivers nothing of that frame after Close returned — neither a frame
// of the other stream it was reading into memory (Close dropped that
// stream's earlier frames from memory: appending this one made the stream
// go on past a gap) nor the rest of its own. Every Read after Close ends
// with ErrLost; a client re-attaching from the bytes received (as the
// daemon's re-attach does) gets each stream whole, each byte once. The
// shim is played over a connection the test feeds byte by byte, so the
// race TestAttachDuringFloodGetsEveryByteOnce found in some runs only is
// set up every time.
func TestClosedClientAppendsNoFrameAfterClose(t *testing.T) {
	streams := [2][]byte{numbered("o", 300), numbered("e", 350)}
	cases := []struct {
		name string
		// before is sent first: the stdout reader consumes it and
		// blocks mid-frame; rest is sent after Close.
		before, rest []byte
		// got0 is what the stdout reader returns before Close.
		got0 []byte
	}{{
		// Stderr's reader has not come yet: stdout's reads stderr's
		// frames into memory, the first whole, the second in part.
		name:   "the other stream's frame, read into memory",
		before: append(append(outFrame(1, streams[1][:50]), frameHeader(1, 300)...), streams[1][50:150]...),
		rest:   streams[1][150:],
	}, {
		name:   "its own frame, read into the caller's buffer",
		before: append(frameHeader(0, 300), streams[0][:100]...),
		rest:   streams[0][100:],
		got0:   streams[0][:100],
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, g := gateAttach(t, 0, 0, func(Hello) []byte { return nil })
			var got [2][]byte
			res := readOnce(cl.Stdout())
			g.waitRead()
			g.send(tc.before)
			if tc.got0 != nil {
				r := <-res
				if r.err != nil || !bytes.Equal(r.b, tc.got0) {
					t.Fatalf("stdout's first read: %q, %v; want %q", r.b, r.err, tc.got0)
				}
				got[0] = r.b
				res = readOnce(cl.Stdout())
			}
			g.waitRead() // stdout's reader is mid-frame, waiting for the rest
			cl.Close()
			g.mu.Lock()
			if !g.closed {
				t.Errorf("Close returned without closing the connection")
			}
			g.mu.Unlock()
			g.send(tc.rest)
			var after [2][]byte
			r := <-res
			after[0] = r.b
			if !errors.Is(r.err, ErrLost) {
				t.Errorf("stdout's read in progress at Close ended with %v; want ErrLost", r.err)
			}
			// Nothing more is read from the connection: each stream's
			// reads end at once.
			for i, s := range []io.Reader{cl.Stdout(), cl.Stderr()} {
				b, err := io.ReadAll(s)
				after[i] = append(after[i], b...)
				if !errors.Is(err, ErrLost) {
					t.Errorf("stream %d read after Close ended with %v; want ErrLost", i, err)
				}
			}
			for i := range after {
				if len(after[i]) > 0 {
					t.Errorf("stream %d delivered %d bytes after Close returned: %q", i, len(after[i]), after[i])
				}
				got[i] = append(got[i], after[i]...)
			}
			if _, err := cl.Wait(); !errors.Is(err, ErrLost) {
				t.Errorf("Wait after Close: %v; want ErrLost", err)
			}

			// Re-attach from what was received: the shim sends each
			// stream from the hello's offsets on, then the exit.
			cl2, _ := gateAttach(t, int64(len(got[0])), int64(len(got[1])), func(h Hello) []byte {
				var b []byte
				for i, off := range []int64{h.Stdout, h.Stderr} {
					if off < int64(len(streams[i])) {
						b = append(b, outFrame(i, streams[i][off:])...)
					}
				}
				exit, _ := json.Marshal(ExitStatus{Code: 0})
				return append(b, AppendFrame(nil, Frame{Type: FrameExit, Payload: exit})...)
			})
			var wg sync.WaitGroup
			var errs [2]error
			var more [2][]byte
			for i, s := range []io.Reader{cl2.Stdout(), cl2.Stderr()} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					more[i], errs[i] = io.ReadAll(s)
				}()
			}
			wg.Wait()
			for i := range streams {
				if errs[i] != nil {
					t.Errorf("stream %d after the re-attach: %v", i, errs[i])
				}
				if all := append(got[i], more[i]...); !bytes.Equal(all, streams[i]) {
					t.Errorf("stream %d across the re-attach (%d bytes before, from offset %d after): %s", i, len(got[i]), len(got[i]), firstDiff(all, streams[i]))
				}
			}
			if st, err := cl2.Wait(); err != nil || st.Code != 0 {
				t.Errorf("Wait after the re-attach: %+v, %v", st, err)
			}
		})
	}
}
