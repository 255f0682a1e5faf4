package projectapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/lxdexec"
)

// execChunk is the largest output piece one NDJSON frame carries.
const execChunk = 128 << 10

// exec runs a command in the project's container and streams its output
// as NDJSON frames, then the exit code. Frames of one stream keep their
// order and nothing is dropped: readers block (backpressure) while the
// client is slow. A client disconnect cancels the process.
func (p *Projects) exec(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	var req api.ExecRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return errdefs.InvalidArgument("command: must name a program")
	}
	for k := range req.Env {
		if !secretKeyRE.MatchString(k) {
			return errdefs.InvalidArgument("env: invalid key %q", k)
		}
	}
	if req.Cwd != "" && !path.IsAbs(req.Cwd) {
		return errdefs.InvalidArgument("cwd %q: must be absolute", req.Cwd)
	}
	ctx := r.Context()
	if _, err := p.o.Preparer.Start(ctx, proj); err != nil {
		return err
	}
	ex, err := p.o.Exec.Exec(ctx, proj.Container, lxdexec.ExecRequest{Command: req.Command, Env: req.Env, Cwd: req.Cwd})
	if err != nil {
		return fmt.Errorf("exec in project %q: %w", proj.Name, err)
	}
	go func() {
		stdin := ex.Stdin()
		if req.Stdin != "" {
			_, _ = io.WriteString(stdin, req.Stdin)
		}
		_ = stdin.Close()
	}()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw := &frameWriter{w: w, enc: json.NewEncoder(w), rc: http.NewResponseController(w)}
	_ = fw.rc.Flush()

	var wg sync.WaitGroup
	for _, s := range []struct {
		name string
		r    io.Reader
	}{{"stdout", ex.Stdout()}, {"stderr", ex.Stderr()}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			streamFrames(s.r, func(p []byte) error { return fw.data(s.name, p) })
		}()
	}
	wg.Wait()
	code, werr := ex.Wait()
	if werr != nil && !(errors.Is(werr, lxdexec.ErrOperationFailed) && code > 0) {
		if ctx.Err() == nil {
			_ = fw.write(api.ExecFrame{Error: "exec failed: " + werr.Error()})
		}
		p.log.Debug("exec ended with error", "project", proj.Name, "error", werr)
		return nil
	}
	_ = fw.write(api.ExecFrame{ExitCode: &code})
	return nil
}

// execReadAhead is how many chunks of one stream may wait for the client
// while LXD keeps delivering (bounded memory: execReadAhead × execChunk).
const execReadAhead = 4

// streamFrames copies r to send in order, chunk by chunk. A reader
// goroutine keeps reading while send writes the previous chunk, so LXD's
// stream and the client's socket work in parallel. When send fails (the
// client is gone) the rest of r is drained, so the exec can finish.
func streamFrames(r io.Reader, send func([]byte) error) {
	chunks := make(chan []byte, execReadAhead)
	free := make(chan []byte, execReadAhead+1)
	for range execReadAhead + 1 {
		free <- make([]byte, execChunk)
	}
	go func() {
		defer close(chunks)
		for {
			buf := <-free
			n, err := r.Read(buf)
			if n > 0 {
				chunks <- buf[:n]
			} else {
				free <- buf
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range chunks {
		if !failed && send(c) != nil {
			failed = true
		}
		free <- c[:cap(c)]
	}
}

// frameWriter serializes NDJSON frames from several goroutines and flushes
// after each (a frame is at most execChunk bytes of data).
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	enc *json.Encoder
	rc  *http.ResponseController
	buf []byte
	err error
}

// data writes one output frame, encoded by hand: it is the hot path of
// exec throughput and its shape is fixed ({"stream":..,"data":base64}).
func (f *frameWriter) data(stream string, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.buf = append(f.buf[:0], `{"stream":"`...)
	f.buf = append(f.buf, stream...)
	f.buf = append(f.buf, `","data":"`...)
	f.buf = base64.StdEncoding.AppendEncode(f.buf, p)
	f.buf = append(f.buf, "\"}\n"...)
	if _, err := f.w.Write(f.buf); err != nil {
		f.err = err
		return err
	}
	if err := f.rc.Flush(); err != nil {
		f.err = err
	}
	return f.err
}

func (f *frameWriter) write(fr api.ExecFrame) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if err := f.enc.Encode(fr); err != nil {
		f.err = err
		return err
	}
	if err := f.rc.Flush(); err != nil {
		f.err = err
	}
	return f.err
}

var terminalUpgrader = websocket.Upgrader{
	ReadBufferSize:  32 << 10,
	WriteBufferSize: 32 << 10,
	// The socket's peer-credential check and the frontend's proxy decide
	// who may connect; browsers never reach the socket directly.
	CheckOrigin: func(*http.Request) bool { return true },
}

// terminalReadLimit bounds one client frame.
const terminalReadLimit = 1 << 20

// terminal serves an interactive shell in the project's container over a
// WebSocket: binary frames carry bytes both ways, a text frame
// {"type":"resize","cols":C,"rows":R} resizes the pty. Query parameters
// cols and rows give the initial size. The socket closes when the shell
// exits; closing the socket ends the shell.
//
// Anything but a WebSocket upgrade is refused (400) before the project's
// container is touched: a GET has no side effect, so an <img src> in a
// page cannot create or start containers.
func (p *Projects) terminal(w http.ResponseWriter, r *http.Request) error {
	if !websocket.IsWebSocketUpgrade(r) || r.Header.Get("Sec-WebSocket-Version") != "13" || r.Header.Get("Sec-WebSocket-Key") == "" {
		return errdefs.InvalidArgument("%s is a WebSocket endpoint: send a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket, Sec-WebSocket-Version: 13, Sec-WebSocket-Key)", r.URL.Path)
	}
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	cols, rows := 80, 24
	for name, dst := range map[string]*int{"cols": &cols, "rows": &rows} {
		if v := r.URL.Query().Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				return errdefs.InvalidArgument("invalid %s %q: 1 to 1000", name, v)
			}
			*dst = n
		}
	}
	if _, err := p.o.Preparer.Start(r.Context(), proj); err != nil {
		return err
	}
	// The route table's writer implements http.Hijacker itself.
	conn, err := terminalUpgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil // the upgrader already answered
	}
	defer conn.Close()
	conn.SetReadLimit(terminalReadLimit)
	// The hijacked connection outlives r.Context's cancellation semantics:
	// end the shell when the socket goes away.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	ex, err := p.o.Exec.Exec(ctx, proj.Container, lxdexec.ExecRequest{
		Command: []string{"/bin/sh", "-l"}, Interactive: true, Width: cols, Height: rows,
		Env: map[string]string{"TERM": "xterm-256color"}, Cwd: "/workspace",
	})
	if err != nil {
		p.log.Warn("terminal exec", "project", proj.Name, "error", err)
		msg := websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "exec failed")
		_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		return nil
	}
	go terminalInput(conn, ex, cancel)
	// Only this goroutine writes to conn: the shell's output, then the
	// close frame with its exit status.
	out := &wsWriter{conn: conn}
	if _, _ = io.CopyBuffer(out, ex.Stdout(), make([]byte, 32<<10)); out.err != nil {
		cancel() // the client is gone: end the shell, drain what is left
		_, _ = io.Copy(io.Discard, ex.Stdout())
	}
	code, werr := ex.Wait()
	reason := "exit " + strconv.Itoa(code)
	if werr != nil && !errors.Is(werr, context.Canceled) {
		reason = strings.TrimSpace("exec: " + werr.Error())
		if len(reason) > 120 {
			reason = reason[:120]
		}
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, reason), time.Now().Add(time.Second))
	return nil
}

// terminalInput feeds the client's binary frames to the shell and applies
// its resize frames until the socket ends, then cancels the shell.
func terminalInput(conn *websocket.Conn, ex *lxdexec.Exec, cancel context.CancelFunc) {
	defer cancel()
	for {
		typ, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		switch typ {
		case websocket.BinaryMessage:
			if _, err := ex.Stdin().Write(data); err != nil {
				return
			}
		case websocket.TextMessage:
			var ctl api.TerminalControl
			if json.Unmarshal(data, &ctl) != nil || ctl.Type != "resize" || ctl.Cols < 1 || ctl.Rows < 1 || ctl.Cols > 1000 || ctl.Rows > 1000 {
				continue
			}
			_ = ex.Resize(ctl.Cols, ctl.Rows)
		}
	}
}

// wsWriter writes each chunk as one binary WebSocket message and keeps
// the first write error.
type wsWriter struct {
	conn *websocket.Conn
	err  error
}

func (w *wsWriter) Write(p []byte) (int, error) {
	if w.err = w.conn.WriteMessage(websocket.BinaryMessage, p); w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}
