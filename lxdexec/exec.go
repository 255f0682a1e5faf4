package lxdexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// ExecRequest describes a command to run in an instance.
type ExecRequest struct {
	// Command is the argv, run without a shell. Required.
	Command []string
	// Env is added to the instance's environment.* config and LXD's
	// defaults (PATH, LANG, and HOME/USER for uid 0).
	Env map[string]string
	// Cwd is the start directory ("" = LXD's default).
	Cwd string
	// User and Group are numeric ids (nil = root).
	User, Group *uint32
	// Interactive runs the command on a pty; stdout and stderr are merged
	// on Stdout, and Stderr is empty.
	Interactive bool
	// Width and Height set the pty size when both are > 0.
	Width, Height int
	// KillGrace is the time between SIGTERM and SIGKILL after the context
	// is cancelled; 0 means DefaultKillGrace.
	KillGrace time.Duration
}

// DefaultKillGrace is ExecRequest.KillGrace's default.
const DefaultKillGrace = 3 * time.Second

// abortWait bounds how long Wait waits for LXD after SIGKILL before it
// drops the connections and returns anyway.
const abortWait = 2 * time.Second

// frameSize is the largest websocket frame written for stdin (LXD itself
// sends at most 64 KiB per frame).
const frameSize = 64 << 10

// Exec is a running command. Read Stdout and Stderr until EOF (both, and
// concurrently: output is streamed with backpressure, so an unread stream
// stalls the command), then call Wait.
type Exec struct {
	interactive bool
	control     *wsConn
	fd0         *wsConn
	conns       []*wsConn
	stdin       *execStdin
	stdout      io.Reader
	stderr      io.Reader
	streams     []*streamReader
	done        chan struct{}
	exitCode    int
	err         error
}

// wsConn is a websocket with serialized writes (gorilla allows one writer).
type wsConn struct {
	conn *websocket.Conn
	wmu  sync.Mutex
}

func (w *wsConn) write(typ int, data []byte, timeout time.Duration) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	var dl time.Time
	if timeout > 0 {
		dl = time.Now().Add(timeout)
	}
	_ = w.conn.SetWriteDeadline(dl)
	return w.conn.WriteMessage(typ, data)
}

type execPost struct {
	Command      []string          `json:"command"`
	Environment  map[string]string `json:"environment,omitempty"`
	Cwd          string            `json:"cwd,omitempty"`
	User         *uint32           `json:"user,omitempty"`
	Group        *uint32           `json:"group,omitempty"`
	WaitForWS    bool              `json:"wait-for-websocket"`
	Interactive  bool              `json:"interactive"`
	RecordOutput bool              `json:"record-output"`
	Width        int               `json:"width,omitempty"`
	Height       int               `json:"height,omitempty"`
}

type execMeta struct {
	FDs    map[string]string `json:"fds"`
	Return *int              `json:"return"`
}

// Exec starts a command in a running instance and connects its streams.
// Cancelling ctx sends SIGTERM, then SIGKILL after KillGrace; Wait then
// returns promptly with ctx's error.
func (c *Client) Exec(ctx context.Context, instance string, req ExecRequest) (*Exec, error) {
	if err := checkName(instance); err != nil {
		return nil, err
	}
	if len(req.Command) == 0 {
		return nil, fmt.Errorf("exec in %q: empty command: %w", instance, ErrBadRequest)
	}
	for k := range req.Env {
		// Only the key is named: values may be secrets.
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("exec %q in %q: invalid environment key %q: %w", req.Command[0], instance, k, ErrBadRequest)
		}
	}
	body := execPost{
		Command: req.Command, Environment: req.Env, Cwd: req.Cwd, User: req.User, Group: req.Group,
		WaitForWS: true, Interactive: req.Interactive,
	}
	if req.Width > 0 && req.Height > 0 {
		body.Width, body.Height = req.Width, req.Height
	}
	// Refused while a snapshot freezes the instance: retried up to 1 min.
	frozenUntil, pause := time.Now().Add(time.Minute), 50*time.Millisecond
	for attempt := 1; ; attempt++ {
		e, retry, err := c.execOnce(ctx, instance, req, body)
		if err != nil && strings.Contains(err.Error(), "Instance is frozen") && time.Now().Before(frozenUntil) && ctx.Err() == nil {
			time.Sleep(pause) // at most 1 s
			attempt, pause = attempt-1, min(2*pause, time.Second)
		} else if err == nil || !retry || attempt == execAttempts {
			return e, err
		}
	}
}

// execAttempts bounds how often Exec starts a command whose streams LXD
// gave up waiting for (the command never ran).
const execAttempts = 3

// execOnce starts the command and connects its streams. retry reports
// that the streams did not connect in time and LXD gave up on the
// operation before running the command, so starting again is safe.
func (c *Client) execOnce(ctx context.Context, instance string, req ExecRequest, body execPost) (_ *Exec, retry bool, _ error) {
	opURL, op, err := c.startOperation(ctx, http.MethodPost, c.instancePath(instance, "/exec", nil), body, "")
	if err != nil {
		return nil, false, fmt.Errorf("exec %q in %q: %w", req.Command[0], instance, err)
	}
	if op == nil {
		return nil, false, fmt.Errorf("exec %q in %q: server answered sync: %w", req.Command[0], instance, ErrProtocol)
	}
	var meta execMeta
	if err := json.Unmarshal(op.Metadata, &meta); err != nil {
		return nil, false, fmt.Errorf("exec %q in %q: decode fds: %v: %w", req.Command[0], instance, err, ErrProtocol)
	}
	names := []string{"control", "0", "1", "2"}
	if req.Interactive {
		names = names[:2]
	}
	secrets := make([]string, len(names))
	for i, n := range names {
		var ok bool
		if secrets[i], ok = meta.FDs[n]; !ok {
			return nil, false, fmt.Errorf("exec %q in %q: no secret for fd %s: %w", req.Command[0], instance, n, ErrProtocol)
		}
	}
	// Control first: LXD starts the command as soon as the data streams
	// are connected, and refuses a control stream that comes after a quick
	// command ended ("Only running operations can be connected"). Then the
	// data streams, at once. Until the last of them connects the command
	// has not started, so any failure here leaves nothing running.
	conns := make([]*wsConn, len(names))
	errs := make([]error, len(names))
	conns[0], errs[0] = c.dialOp(ctx, opURL, secrets[0])
	if errs[0] == nil {
		var wg sync.WaitGroup
		for i := 1; i < len(names); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conns[i], errs[i] = c.dialOp(ctx, opURL, secrets[i])
			}()
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		for _, w := range conns {
			if w != nil {
				w.conn.Close()
			}
		}
		// Transient: LXD was unreachable, or had already ended the
		// operation (LXD forgot it: 404; or it was ending: "Only running
		// operations can be connected") because it waited for the
		// streams in vain, e.g. through a stall of its API.
		transient := errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotFound) ||
			strings.Contains(err.Error(), "Only running operations can be connected")
		retry := transient && c.streamsTimedOut(ctx, opURL)
		return nil, retry, fmt.Errorf("exec %q in %q: connect streams: %w", req.Command[0], instance, err)
	}

	e := &Exec{interactive: req.Interactive, control: conns[0], fd0: conns[1], conns: conns, done: make(chan struct{})}
	e.stdin = &execStdin{conn: e.fd0, interactive: req.Interactive, done: e.done}
	delivered := make(chan struct{}, 2) // one send per output stream at its end
	if req.Interactive {
		e.stdout, e.stderr = e.newStream(e.fd0, delivered, true), eofReader{}
	} else {
		e.stdout, e.stderr = e.newStream(conns[2], delivered, false), e.newStream(conns[3], delivered, false)
		go drain(e.fd0)
	}
	go drain(e.control)

	grace := req.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	go e.supervise(ctx, c, opURL, grace, delivered)
	return e, false, nil
}

// streamsTimedOut reports whether LXD failed the exec operation because
// not every stream connected within its 5 s (a loaded host, slow TLS
// handshakes), or has ended and forgotten it: called when a stream failed
// to connect, so the command was never started and LXD ends the operation
// within those 5 s.
func (c *Client) streamsTimedOut(ctx context.Context, opURL string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.WaitOperation(ctx, opURL)
	// LXD forgets an ended operation after about 5 s: gone is ended too.
	return errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrOperationFailed) && strings.Contains(err.Error(), "Timed out waiting for websockets to connect")
}

// dialOp connects one exec websocket.
func (c *Client) dialOp(ctx context.Context, opURL, secret string) (*wsConn, error) {
	conn, resp, err := c.dialWS(ctx, opURL+"/websocket?secret="+url.QueryEscape(secret))
	if err != nil {
		return nil, errorFromHandshake(opURL+"/websocket", resp, err)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	keepReadingOnPongFailure(conn)
	return &wsConn{conn: conn}, nil
}

// keepReadingOnPongFailure replaces gorilla's ping handler, which turns a
// failed pong (LXD already closed its side) into a read error that throws
// away frames still buffered, e.g. the last output and the end-of-stream
// barrier.
func keepReadingOnPongFailure(conn *websocket.Conn) {
	conn.SetPingHandler(func(data string) error {
		_ = conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(5*time.Second))
		return nil
	})
}

// supervise waits for the operation and for every output stream to be
// delivered, handles cancellation, then closes everything and records the
// result.
func (e *Exec) supervise(ctx context.Context, c *Client, opURL string, grace time.Duration, delivered <-chan struct{}) {
	waitCtx, cancelWait := context.WithCancel(context.Background())
	defer cancelWait()
	type opResult struct {
		op  *Operation
		err error
	}
	opCh := make(chan opResult, 1)
	go func() {
		op, err := c.WaitOperation(waitCtx, opURL)
		opCh <- opResult{op, err}
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
			e.control.conn.Close()
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
	if res.op != nil {
		var meta execMeta
		if json.Unmarshal(res.op.Metadata, &meta) == nil && meta.Return != nil {
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
		w.conn.Close()
	}
}

// streamReader reads one output websocket directly in the caller's Read,
// so output flows with backpressure and no extra copy or goroutine, until
// the end-of-stream barrier (an empty Text message), a close, or a dropped
// connection. replyBarrier answers the server's barrier (interactive fd 0:
// the operation stays running until the client sends its own).
type streamReader struct {
	ws           *wsConn
	replyBarrier bool
	delivered    chan<- struct{}
	cur          io.Reader // the current Binary message
	ended        bool
	final        error // returned once ended; nil means io.EOF
	mu           sync.Mutex
	aborted      error // set by closeAll
}

func (e *Exec) newStream(ws *wsConn, delivered chan<- struct{}, replyBarrier bool) *streamReader {
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
	go drain(s.ws)
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
		typ, r, err := s.ws.conn.NextReader()
		if err != nil {
			s.end(s.classify(err))
			continue
		}
		switch typ {
		case websocket.BinaryMessage:
			s.cur = r
		case websocket.TextMessage:
			if s.replyBarrier {
				_ = s.ws.write(websocket.TextMessage, nil, 5*time.Second)
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

// drain reads a websocket whose incoming data is ignored, so pings are
// answered and closes are seen.
func drain(ws *wsConn) {
	for {
		if _, _, err := ws.conn.NextReader(); err != nil {
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

// Signal sends a signal (e.g. 15) to the command.
func (e *Exec) Signal(sig int) error {
	if sig <= 0 || sig > 64 {
		return fmt.Errorf("exec signal %d: out of range: %w", sig, ErrBadRequest)
	}
	return e.sendControl(controlMsg{Command: "signal", Signal: sig})
}

// Resize changes the pty's window size (interactive only).
func (e *Exec) Resize(width, height int) error {
	if !e.interactive {
		return fmt.Errorf("exec resize: not interactive: %w", ErrBadRequest)
	}
	if width <= 0 || height <= 0 {
		return fmt.Errorf("exec resize %dx%d: sizes must be positive: %w", width, height, ErrBadRequest)
	}
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
	if err := e.control.write(websocket.TextMessage, b, 5*time.Second); err != nil {
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
	conn        *wsConn
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
		if err := s.conn.write(websocket.BinaryMessage, chunk, 0); err != nil {
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
		err = s.conn.write(websocket.BinaryMessage, []byte{0x04}, 5*time.Second)
	} else {
		err = s.conn.write(websocket.TextMessage, nil, 5*time.Second)
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
