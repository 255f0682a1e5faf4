package lxdws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// ErrStreamBroken is returned when an exec output stream ended without its end-of-stream
// marker, so output may be incomplete (lxdexec.ErrStreamBroken).
var ErrStreamBroken = errors.New("lxd: exec stream broken")

// abortWait bounds how long Wait waits for LXD after SIGKILL before it
// drops the connections and returns anyway.
const abortWait = 2 * time.Second

// frameSize is the largest websocket frame written for stdin (LXD itself
// sends at most 64 KiB per frame).
const frameSize = 64 << 10

// Conn is a websocket with serialized writes (gorilla allows one writer).
type Conn struct {
	Conn *websocket.Conn
	wmu  sync.Mutex
}

// Write sends one message of type typ, with a write deadline timeout
// from now (none when 0).
func (w *Conn) Write(typ int, data []byte, timeout time.Duration) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	var dl time.Time
	if timeout > 0 {
		dl = time.Now().Add(timeout)
	}
	_ = w.Conn.SetWriteDeadline(dl)
	return w.Conn.WriteMessage(typ, data)
}

// KeepReadingOnPongFailure replaces gorilla's ping handler, which turns a
// failed pong (LXD already closed its side) into a read error that throws
// away frames still buffered, e.g. the last output and the end-of-stream
// barrier.
func KeepReadingOnPongFailure(conn *websocket.Conn) {
	conn.SetPingHandler(func(data string) error {
		_ = conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(5*time.Second))
		return nil
	})
}

// Exec is a running command's websockets: control, fd 0 and, unless
// interactive, fds 1 and 2. Read Stdout and Stderr until EOF (both, and
// concurrently: output is streamed with backpressure, so an unread stream
// stalls the command), then call Wait.
type Exec struct {
	interactive bool
	control     *Conn
	fd0         *Conn
	conns       []*Conn
	stdin       *execStdin
	stdout      io.Reader
	stderr      io.Reader
	streams     []*streamReader
	done        chan struct{}
	exitCode    int
	err         error
}

// Start wires the connected websockets of an exec (conns: control, fd 0
// and, unless interactive, fds 1 and 2) and supervises the command until
// it ended and its output was delivered: wait returns the exec
// operation's metadata (its "return" is the exit code) once it ended.
// Cancelling ctx sends SIGTERM, then SIGKILL after grace.
func Start(ctx context.Context, conns []*Conn, interactive bool, grace time.Duration, wait func(context.Context) (json.RawMessage, error)) *Exec {
	e := &Exec{interactive: interactive, control: conns[0], fd0: conns[1], conns: conns, done: make(chan struct{})}
	e.stdin = &execStdin{conn: e.fd0, interactive: interactive, done: e.done}
	delivered := make(chan struct{}, 2) // one send per output stream at its end
	if interactive {
		e.stdout, e.stderr = e.newStream(e.fd0, delivered, true), eofReader{}
	} else {
		e.stdout, e.stderr = e.newStream(conns[2], delivered, false), e.newStream(conns[3], delivered, false)
		go Drain(e.fd0)
	}
	go Drain(e.control)

	go e.supervise(ctx, wait, grace, delivered)
	return e
}

// supervise waits for the operation and for every output stream to be
// delivered, handles cancellation, then closes everything and records the
// result.
func (e *Exec) supervise(ctx context.Context, wait func(context.Context) (json.RawMessage, error), grace time.Duration, delivered <-chan struct{}) {
	waitCtx, cancelWait := context.WithCancel(context.Background())
	defer cancelWait()
	type opResult struct {
		meta json.RawMessage
		err  error
	}
	opCh := make(chan opResult, 1)
	go func() {
		meta, err := wait(waitCtx)
		opCh <- opResult{meta, err}
	}()
	var (
		res                opResult
		gotOp              bool
		pending            = len(e.streams)
		gotStreams         = pending == 0
		ctxDone            = ctx.Done()
		killTimer, aborted <-chan time.Time
		cancelled          bool
	)
	for !gotOp || !gotStreams {
		select {
		case res = <-opCh:
			gotOp = true
		case <-delivered:
			pending--
			gotStreams = pending == 0
		case <-ctxDone:
			ctxDone, cancelled = nil, true
			_ = e.Signal(int(syscall.SIGTERM))
			killTimer = time.After(grace)
		case <-killTimer:
			killTimer = nil
			_ = e.Signal(int(syscall.SIGKILL))
			// Closing control makes LXD SIGKILL the command for sure.
			e.control.Conn.Close()
			aborted = time.After(abortWait)
		case <-aborted:
			aborted = nil
			cancelWait()
			e.closeAll(fmt.Errorf("exec aborted: %w", ctx.Err()))
			// A caller that stopped reading must not keep Wait blocked.
			gotStreams, delivered = true, nil
		}
	}
	e.closeAll(nil)

	e.exitCode = -1
	if res.meta != nil {
		var meta struct {
			Return *int `json:"return"`
		}
		if json.Unmarshal(res.meta, &meta) == nil && meta.Return != nil {
			e.exitCode = *meta.Return
		}
	}
	switch {
	case cancelled:
		e.err = fmt.Errorf("exec cancelled: %w", ctx.Err())
	case res.err != nil:
		e.err = fmt.Errorf("exec: %w", res.err)
	}
	close(e.done)
}

// closeAll drops every websocket; with a non-nil err, output streams not
// yet at their end report err instead of EOF.
func (e *Exec) closeAll(err error) {
	if err != nil {
		for _, s := range e.streams {
			s.abort(err)
		}
	}
	for _, w := range e.conns {
		w.Conn.Close()
	}
}

// streamReader reads one output websocket directly in the caller's Read,
// so output flows with backpressure and no extra copy or goroutine, until
// the end-of-stream barrier (an empty Text message), a close, or a dropped
// connection. replyBarrier answers the server's barrier (interactive fd 0:
// the operation stays running until the client sends its own).
type streamReader struct {
	ws           *Conn
	replyBarrier bool
	delivered    chan<- struct{}
	cur          io.Reader // the current Binary message
	ended        bool
	final        error // returned once ended; nil means io.EOF
	mu           sync.Mutex
	aborted      error // set by closeAll
}

func (e *Exec) newStream(ws *Conn, delivered chan<- struct{}, replyBarrier bool) *streamReader {
	s := &streamReader{ws: ws, replyBarrier: replyBarrier, delivered: delivered}
	e.streams = append(e.streams, s)
	return s
}

func (s *streamReader) abort(err error) {
	s.mu.Lock()
	s.aborted = err
	s.mu.Unlock()
}

// end marks the stream delivered and keeps the socket read (pings,
// closes) in the background.
func (s *streamReader) end(err error) {
	s.ended, s.final, s.cur = true, err, nil
	s.delivered <- struct{}{} // buffered for every stream: never blocks
	go Drain(s.ws)
}

// Read returns output data; io.EOF after LXD's end-of-stream.
func (s *streamReader) Read(p []byte) (int, error) {
	for {
		if s.ended {
			if s.final != nil {
				return 0, s.final
			}
			return 0, io.EOF
		}
		if s.cur != nil {
			n, err := s.cur.Read(p)
			if err == io.EOF {
				s.cur = nil
				if n > 0 {
					return n, nil
				}
				continue
			}
			if err != nil {
				s.end(s.classify(err))
				return n, nil
			}
			return n, nil
		}
		typ, r, err := s.ws.Conn.NextReader()
		if err != nil {
			s.end(s.classify(err))
			continue
		}
		switch typ {
		case websocket.BinaryMessage:
			s.cur = r
		case websocket.TextMessage:
			if s.replyBarrier {
				_ = s.ws.Write(websocket.TextMessage, nil, 5*time.Second)
			}
			s.end(nil)
		}
	}
}

// classify maps a read error to the stream's final result: nil (EOF) for
// the ways LXD ends exec streams, the abort reason after closeAll, else
// ErrStreamBroken.
func (s *streamReader) classify(err error) error {
	s.mu.Lock()
	aborted := s.aborted
	s.mu.Unlock()
	switch {
	case aborted != nil:
		return aborted
	case normalEnd(err):
		return nil
	default:
		return fmt.Errorf("%w: %v", ErrStreamBroken, err)
	}
}

// Drain reads a websocket whose incoming data is ignored, so pings are
// answered and closes are seen.
func Drain(ws *Conn) {
	for {
		if _, _, err := ws.Conn.NextReader(); err != nil {
			return
		}
	}
}

// normalEnd reports whether err is how LXD ends an exec stream: a close
// frame, or dropping the connection (1006 / EOF / reset), or our own close.
func normalEnd(err error) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// Stdin returns the command's standard input. Close signals end of input:
// non-interactive, LXD's end-of-stream barrier; interactive, a ^D (0x04)
// byte, which a program reading the pty in canonical mode sees as EOF at
// the start of a line.
func (e *Exec) Stdin() io.WriteCloser { return e.stdin }

// Stdout returns the command's standard output (in interactive mode the
// pty's output, stderr included). It ends with io.EOF when all output was
// delivered.
func (e *Exec) Stdout() io.Reader { return e.stdout }

// Stderr returns the command's standard error; empty in interactive mode.
func (e *Exec) Stderr() io.Reader { return e.stderr }

type controlMsg struct {
	Command string            `json:"command"`
	Signal  int               `json:"signal,omitempty"`
	Args    map[string]string `json:"args,omitempty"`
}

// Interactive reports whether the command runs on a pty.
func (e *Exec) Interactive() bool { return e.interactive }

// Signal sends a signal (e.g. 15) to the command; the caller checks its
// range (lxdexec.Exec.Signal).
func (e *Exec) Signal(sig int) error {
	return e.sendControl(controlMsg{Command: "signal", Signal: sig})
}

// Resize changes the pty's window size; the caller checks that the
// command is interactive and the sizes positive (lxdexec.Exec.Resize).
func (e *Exec) Resize(width, height int) error {
	// LXD decodes width and height as strings; numbers are silently ignored.
	return e.sendControl(controlMsg{Command: "window-resize",
		Args: map[string]string{"width": strconv.Itoa(width), "height": strconv.Itoa(height)}})
}

func (e *Exec) sendControl(m controlMsg) error {
	select {
	case <-e.done:
		return fmt.Errorf("exec control %s: command already ended: %w", m.Command, io.ErrClosedPipe)
	default:
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := e.control.Write(websocket.TextMessage, b, 5*time.Second); err != nil {
		return fmt.Errorf("exec control %s: %w", m.Command, err)
	}
	return nil
}

// Wait returns the command's exit code once it ended and all of its output
// was delivered (the caller must keep reading Stdout and Stderr to EOF). A
// non-zero exit is not an error; signals give 128+N. err is set when the
// operation failed (e.g. command not found, exit code 127), the instance
// went away, or ctx was cancelled.
func (e *Exec) Wait() (exitCode int, err error) {
	<-e.done
	return e.exitCode, e.err
}

// execStdin writes binary frames to fd 0.
type execStdin struct {
	conn        *Conn
	interactive bool
	done        chan struct{}
	mu          sync.Mutex
	closed      bool
}

// Write sends p as binary frames of at most 64 KiB; it blocks while LXD
// does not take the data (backpressure).
func (s *execStdin) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("exec stdin: %w", io.ErrClosedPipe)
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), frameSize)]
		if err := s.conn.Write(websocket.BinaryMessage, chunk, 0); err != nil {
			return n, fmt.Errorf("exec stdin: %w", err)
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// Close ends the input (see Exec.Stdin). Closing after the command ended
// is not an error.
func (s *execStdin) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.interactive {
		err = s.conn.Write(websocket.BinaryMessage, []byte{0x04}, 5*time.Second)
	} else {
		err = s.conn.Write(websocket.TextMessage, nil, 5*time.Second)
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	if err != nil {
		return fmt.Errorf("exec stdin close: %w", err)
	}
	return nil
}
