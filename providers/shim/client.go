package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ErrLost means the connection to a shim ended before the CLI's exit
// frame: the shim died, or the connection was dropped (Client.Close).
var ErrLost = errors.New("the connection to remote-shim ended before the CLI's exit")

// ErrNoShim means no shim serves a run directory: it is gone, or nothing
// listens on its socket.
var ErrNoShim = errors.New("no remote-shim serves the run directory")

// Dial connects to the shim of run directory dir. An error wraps ErrNoShim
// when the directory or its socket is missing or nothing answers on it.
func Dial(ctx context.Context, dir string) (net.Conn, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: run directory %s is gone", ErrNoShim, dir)
	}
	sock := filepath.Join(dir, SocketName)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("%w: no shim answers on %s: %w", ErrNoShim, sock, err)
		}
		return nil, fmt.Errorf("connect to remote-shim on %s: %w", sock, err)
	}
	return c, nil
}

// Client is the daemon's side of one connection to a shim. Stdout and
// Stderr must both be read (concurrently) until they end; Wait then
// returns the CLI's exit status.
type Client struct {
	conn io.ReadWriteCloser
	r    io.Reader
	info Info
	wmu  sync.Mutex

	closeOnce sync.Once
	stdinOnce sync.Once
	done      chan struct{}

	// The output is demultiplexed in the readers' own Read calls (no
	// goroutine in between): the reader that finds its buffer empty reads
	// the next frame header; a frame of its stream it reads straight into
	// its caller's buffer, maybe over several calls. A frame of the other
	// stream is left to that reader while it is in Read or came back
	// within stealAfter, else read into memory for it.
	mu      sync.Mutex
	cond    *sync.Cond
	bufs    [2][][]byte  // frames' payloads read into memory, oldest first
	off     [2]int       // bytes read of each stream's first payload
	held    [2]int       // bytes in bufs not read yet
	spare   [][]byte     // read payloads' memory, for the next frames
	cur     int          // the stream of the frame being read
	left    int          // its payload bytes not read from r yet
	in      [2]bool      // each stream's reader is in Read
	last    [2]time.Time // when it last returned
	timer   *time.Timer  // wakes a reader waiting for the other one
	reading bool         // a reader is reading from r
	ended   bool         // the exit frame arrived or the connection ended
	status  ExitStatus
	err     error  // why the stream ended before the exit frame
	dropped bool   // Close was called
	wakes   [2]int // times each stream's reader woke from a wait

	spools [2]*spoolReader // a spool run's output (spoolclient.go)
	passed []int           // the descriptors the shim's answer passed
}

// wait waits for a change as stream i's reader; c.mu is held.
func (c *Client) wait(i int) {
	c.cond.Wait()
	c.wakes[i]++
}

// maxBuffered bounds the output read into memory for a stream whose
// reader lags; the other stream's reader then waits for it.
const maxBuffered = 4 << 20

// stealAfter is how long a reader leaves a frame of the other stream to
// that stream's reader, counted from its last Read.
const stealAfter = 5 * time.Millisecond

// Start sends spec over conn, which then streams the new CLI's output. The
// connection is closed when Start fails.
func Start(ctx context.Context, conn io.ReadWriteCloser, spec Spec) (*Client, error) {
	// Version 1: a shim in a container may be older than the daemon.
	return handshake(ctx, conn, Hello{Version: MinProtocolVersion, Spec: &spec})
}

// Attach asks the shim on conn for the output from the given offsets on.
// The connection is closed when Attach fails.
func Attach(ctx context.Context, conn io.ReadWriteCloser, stdoutOff, stderrOff int64) (*Client, error) {
	return handshake(ctx, conn, Hello{Version: MinProtocolVersion, Stdout: stdoutOff, Stderr: stderrOff})
}

func handshake(ctx context.Context, conn io.ReadWriteCloser, h Hello) (*Client, error) {
	var r *bufio.Reader
	type result struct {
		info   Info
		passed []int
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		if err := writeJSONLine(conn, h); err != nil {
			ch <- result{err: fmt.Errorf("send hello to remote-shim: %w", err)}
			return
		}
		var line []byte
		var passed []int
		var err error
		if uc, ok := conn.(*net.UnixConn); ok && h.Version >= 2 {
			// The answer may pass descriptors (spool.go).
			var rest []byte
			line, rest, passed, err = readAnswer(uc)
			r = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(rest), conn), 4<<10)
		} else {
			r = bufio.NewReaderSize(conn, 4<<10)
			line, err = readLine(r)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("%w: it closed the connection before answering", ErrLost)
			}
			ch <- result{err: fmt.Errorf("read remote-shim's answer: %w", err)}
			return
		}
		var info Info
		if err := json.Unmarshal(line, &info); err != nil {
			closeFDs(passed)
			ch <- result{err: fmt.Errorf("%w: answer: %w", ErrProtocol, err)}
			return
		}
		ch <- result{info: info, passed: passed}
	}()
	var res result
	select {
	case res = <-ch:
	case <-ctx.Done():
		conn.Close()
		closeFDs((<-ch).passed)
		return nil, fmt.Errorf("talk to remote-shim: %w", context.Cause(ctx))
	}
	if res.err == nil && res.info.Error != "" {
		res.err = fmt.Errorf("remote-shim refused: %s", res.info.Error)
		if res.info.Version < h.Version {
			res.err = fmt.Errorf("%w: %w", ErrVersion, res.err)
		}
	}
	if res.err != nil || !res.info.Spool {
		closeFDs(res.passed)
		res.passed = nil
	}
	if res.err != nil {
		conn.Close()
		return nil, res.err
	}
	c := &Client{conn: conn, r: r, info: res.info, passed: res.passed, done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	return c, nil
}

// Info is the shim's answer to the hello.
func (c *Client) Info() Info { return c.info }

// Stdout is the CLI's stdout from the attach offset on.
func (c *Client) Stdout() io.Reader { return streamReader{c, 0} }

// Stderr is the CLI's stderr from the attach offset on.
func (c *Client) Stderr() io.Reader { return streamReader{c, 1} }

type streamReader struct {
	c *Client
	i int
}

func (s streamReader) Read(p []byte) (int, error) {
	if sp := s.c.spools[s.i]; sp != nil {
		return s.c.readSpool(sp, s.i, p)
	}
	return s.c.read(s.i, p)
}

// read returns output of stream i: what is in memory, else the payload
// of the frame being read, else it reads frames until there is some or
// the stream ended.
func (c *Client) read(i int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in[i] = true
	defer func() { c.in[i], c.last[i] = false, time.Now() }()
	for {
		if q := c.bufs[i]; len(q) > 0 {
			n := copy(p, q[0][c.off[i]:])
			if c.off[i] += n; c.off[i] == len(q[0]) {
				c.recycle(q[0])
				q[0] = nil
				c.bufs[i], c.off[i] = q[1:], 0
			}
			if c.held[i] >= maxBuffered {
				c.cond.Broadcast() // the other reader may read into memory again
			}
			c.held[i] -= n
			return n, nil
		}
		if c.ended {
			if c.err != nil {
				return 0, c.err
			}
			return 0, io.EOF
		}
		if c.reading {
			c.wait(i)
			continue
		}
		if i == 1 && c.left == 0 && !c.in[0] && !c.last[0].IsZero() {
			// The next frame is most likely stdout's, and stdout's reader
			// comes back for it: leave the connection to it unless it
			// lags, rather than pass every frame between two goroutines.
			if wait := stealAfter - time.Since(c.last[0]); wait > 0 {
				c.wakeIn(wait)
				c.wait(i)
				continue
			}
		}
		j := c.cur
		if c.left > 0 && j != i {
			// The other stream's frame: its reader's, unless it lags.
			wait := stealAfter - time.Since(c.last[j])
			if c.in[j] || wait > 0 || c.held[j] >= maxBuffered {
				if !c.in[j] && wait > 0 {
					c.wakeIn(wait)
				}
				c.wait(i)
				continue
			}
		}
		c.reading = true
		var buf []byte
		if c.left > 0 && j != i {
			if k := len(c.spare); k > 0 && cap(c.spare[k-1]) >= c.left {
				buf, c.spare = c.spare[k-1][:c.left], c.spare[:k-1]
			} else {
				buf = make([]byte, c.left)
			}
		}
		inFrame := c.left > 0
		c.mu.Unlock()
		var n int
		var typ byte
		var err error
		switch {
		case buf != nil: // the other stream's frame, into memory
			n, err = io.ReadFull(c.r, buf)
		case inFrame: // this stream's frame, into p
			n, err = c.r.Read(p[:min(len(p), c.left)])
		default:
			typ, n, err = readHeader(c.r)
		}
		c.mu.Lock()
		c.reading = false
		// Wake the other reader only when it has something to do: a
		// wake-up per frame (of a reader that finds nothing) costs more
		// than the frame.
		switch {
		case c.ended:
			// Closed meanwhile: what was read is not delivered after the
			// output dropped from memory (end).
		case err != nil:
			if inFrame && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.end(err)
		case !inFrame:
			c.header(typ, n)
			if c.left == 0 || c.cur != i {
				c.cond.Broadcast()
			}
		case buf != nil:
			c.left = 0
			c.bufs[j] = append(c.bufs[j], buf)
			c.held[j] += n
			c.cond.Broadcast()
		default:
			c.left -= n
			if c.in[1-i] {
				if i == 1 && c.left == 0 {
					c.cond.Broadcast() // the connection is stdout's reader's
				} else {
					// The other reader waits: it takes over the connection
					// (reading this frame's rest into memory) if this
					// reader does not come back within stealAfter.
					c.wakeIn(stealAfter)
				}
			}
			return n, nil
		}
	}
}

// header takes in a frame's header: an output frame becomes the frame
// being read, an exit frame ends the stream; c.mu is held.
func (c *Client) header(typ byte, n int) {
	switch typ {
	case FrameStdout:
		c.cur, c.left = 0, n
	case FrameStderr:
		c.cur, c.left = 1, n
	case FrameExit:
		c.reading = true
		c.mu.Unlock()
		f, err := readPayload(c.r, typ, make([]byte, n))
		c.mu.Lock()
		c.reading = false
		if err != nil {
			c.end(err)
			return
		}
		c.status, _ = DecodeExit(f.Payload)
		c.end(nil)
	default:
		c.end(fmt.Errorf("%w: remote-shim sent a frame of type %q", ErrProtocol, typ))
	}
}

// wakeIn wakes the waiting readers after d; c.mu is held.
func (c *Client) wakeIn(d time.Duration) {
	if c.timer == nil {
		c.timer = time.AfterFunc(d, func() {
			c.mu.Lock()
			c.timer = nil
			c.cond.Broadcast()
			c.mu.Unlock()
		})
	}
}

// maxSpare bounds the read payloads' memory a client keeps for reuse.
const maxSpare = 4

// recycle keeps b, a read payload, for a next frame; c.mu is held.
func (c *Client) recycle(b []byte) {
	if cap(b) > 0 && len(c.spare) < maxSpare {
		c.spare = append(c.spare, b)
	}
}

// end records the end of the stream; c.mu is held.
func (c *Client) end(err error) {
	if c.ended {
		return
	}
	if err != nil {
		if c.dropped {
			err = fmt.Errorf("%w: the daemon dropped it", ErrLost)
		} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) {
			err = fmt.Errorf("%w: %w", ErrLost, err)
		}
		// What arrived is not delivered after a loss.
		c.bufs, c.off, c.held = [2][][]byte{}, [2]int{}, [2]int{}
	}
	c.ended, c.err = true, err
	c.cond.Broadcast()
	for _, sp := range c.spools {
		if sp != nil {
			sp.wake() // a spool reader waiting for output reads on
		}
	}
	close(c.done)
}

// Done is closed once the exit frame arrived or the connection ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Wait returns the CLI's exit status once the output was delivered, or
// the error that ended the connection first (wrapping ErrLost when it was
// lost or dropped).
func (c *Client) Wait() (ExitStatus, error) {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.err
}

func (c *Client) send(f Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := WriteFrame(c.conn, f); err != nil {
		return fmt.Errorf("write to remote-shim: %w", err)
	}
	return nil
}

// WriteStdin sends p for the CLI's stdin.
func (c *Client) WriteStdin(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		part := p[:min(len(p), chunk)]
		if err := c.send(Frame{Type: FrameStdin, Payload: part}); err != nil {
			return n, err
		}
		n += len(part)
		p = p[len(part):]
	}
	return n, nil
}

// CloseStdin asks the shim to close the CLI's stdin; only the first call
// sends anything.
func (c *Client) CloseStdin() error {
	var err error
	c.stdinOnce.Do(func() { err = c.send(Frame{Type: FrameStdinClose}) })
	return err
}

// Signal sends sig to the CLI's whole process group.
func (c *Client) Signal(sig syscall.Signal) error {
	if sig < 1 || sig > 64 {
		return fmt.Errorf("signal %d out of range", sig)
	}
	return c.send(SignalFrame(int(sig)))
}

// Release tells the shim the run's end is stored: it kills what is left
// of the CLI's group, removes the run directory and exits. The connection
// is closed.
func (c *Client) Release() error {
	err := c.send(Frame{Type: FrameRelease})
	c.Close()
	return err
}

// letGo closes the connection, after the last splice of a spool run's
// holder: the shim splices again once it sees the connection end.
func (c *Client) letGo() {
	for _, sp := range c.spools {
		if sp != nil {
			sp.stop()
		}
	}
	c.conn.Close()
}

// Close drops the connection without telling the shim anything: the CLI
// runs on, and reads end with an error wrapping ErrLost.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.dropped = true
		// Readers that are not reading now, or none at all, must not
		// hold Wait up.
		c.end(errors.New("dropped"))
		c.mu.Unlock()
		c.letGo()
		for _, sp := range c.spools {
			if sp != nil {
				sp.close()
			}
		}
	})
	return nil
}
