package lxdexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"remote/lxdexec/lxdws"
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

// Exec is a running command. Read Stdout and Stderr until EOF (both, and
// concurrently: output is streamed with backpressure, so an unread stream
// stalls the command), then call Wait. Its streams are lxdws.Exec's;
// Signal and Resize check their arguments first.
type Exec struct{ *lxdws.Exec }

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
		if HasMessage(err, MsgFrozen) && time.Now().Before(frozenUntil) && ctx.Err() == nil {
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
	conns := make([]*lxdws.Conn, len(names))
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
				w.Conn.Close()
			}
		}
		// Transient: LXD was unreachable, or had already ended the
		// operation (LXD forgot it: 404; or it was ending: "Only running
		// operations can be connected") because it waited for the
		// streams in vain, e.g. through a stall of its API.
		transient := errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotFound) ||
			HasMessage(err, MsgOperationEnded)
		retry := transient && c.streamsTimedOut(ctx, opURL)
		return nil, retry, fmt.Errorf("exec %q in %q: connect streams: %w", req.Command[0], instance, err)
	}

	grace := req.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	wait := func(ctx context.Context) (json.RawMessage, error) {
		op, err := c.WaitOperation(ctx, opURL)
		if op == nil {
			return nil, err
		}
		return op.Metadata, err
	}
	return &Exec{lxdws.Start(ctx, conns, req.Interactive, grace, wait)}, false, nil
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
		errors.Is(err, ErrOperationFailed) && HasMessage(err, MsgStreamsTimedOut)
}

// dialOp connects one exec websocket.
func (c *Client) dialOp(ctx context.Context, opURL, secret string) (*lxdws.Conn, error) {
	conn, resp, err := c.dialWS(ctx, opURL+"/websocket?secret="+url.QueryEscape(secret))
	if err != nil {
		return nil, errorFromHandshake(opURL+"/websocket", resp, err)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	lxdws.KeepReadingOnPongFailure(conn)
	return &lxdws.Conn{Conn: conn}, nil
}

// Signal sends a signal (e.g. 15) to the command.
func (e *Exec) Signal(sig int) error {
	if sig <= 0 || sig > 64 {
		return fmt.Errorf("exec signal %d: out of range: %w", sig, ErrBadRequest)
	}
	return e.Exec.Signal(sig)
}

// Resize changes the pty's window size (interactive only).
func (e *Exec) Resize(width, height int) error {
	if !e.Interactive() {
		return fmt.Errorf("exec resize: not interactive: %w", ErrBadRequest)
	}
	if width <= 0 || height <= 0 {
		return fmt.Errorf("exec resize %dx%d: sizes must be positive: %w", width, height, ErrBadRequest)
	}
	return e.Exec.Resize(width, height)
}
