package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"

	"remote/api"
	"remote/internal/errdefs"
)

// DefaultSocket is where remoted listens unless configured otherwise.
const DefaultSocket = "/run/remote/remoted.sock"

// Bounds on what the client reads.
const (
	maxBody      = 64 << 20 // a JSON answer (a long chat's replay)
	maxErrorBody = 64 << 10 // an error answer
	maxLine      = 16 << 20 // one NDJSON line of a stream
)

// Error is an error answer of the daemon: its HTTP status and the code and
// message of the JSON envelope. Error() reads "code: message".
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the errdefs class of the envelope code (ToNative), so
// errors.Is(err, errdefs.ErrNotFound) and errdefs.IsNotFound work on the
// daemon's answers as on its own errors.
func (e *Error) Unwrap() error { return ToNative(e.Code) }

// ToNative maps an envelope code of the API to its errdefs class, or nil
// for internal and unknown codes. It is the inverse of the daemon's ToHTTP.
func ToNative(code string) error {
	switch code {
	case api.CodeNotFound:
		return errdefs.ErrNotFound
	case api.CodeConflict, api.CodePromptAlreadyRunning:
		return errdefs.ErrConflict
	case api.CodeBadRequest, api.CodeUnsupportedMediaType:
		return errdefs.ErrInvalidArgument
	case api.CodeUnavailable:
		return errdefs.ErrUnavailable
	case api.CodeForbidden:
		return errdefs.ErrPermissionDenied
	case api.CodeUnauthorized:
		return errdefs.ErrUnauthenticated
	case api.CodeStorageFull:
		return errdefs.ErrResourceExhausted
	}
	return nil
}

// Code returns the envelope code of err if it is (or wraps) a *Error, else "".
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err is the daemon's not_found answer.
func IsNotFound(err error) bool { return Code(err) == api.CodeNotFound }

// Client talks to remoted over its Unix socket. It is safe for concurrent
// use; a zero Client is not usable, call New.
type Client struct {
	socket string
	user   string
	hc     *http.Client
}

// New returns a client of the daemon listening on socketPath. Requests name
// the local user (from the OS, else $USER) in X-Remote-User; WithUser
// changes that. No connection is made until the first request.
func New(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:       4,
		DisableCompression: true,
	}
	return &Client{socket: socketPath, user: localUser(), hc: &http.Client{Transport: tr}}
}

func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// WithUser returns a copy of c that acts for name (X-Remote-User). It shares
// c's connections.
func (c *Client) WithUser(name string) *Client {
	cp := *c
	cp.user = name
	return &cp
}

// User returns the name the client sends in X-Remote-User.
func (c *Client) User() string { return c.user }

// Socket returns the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// do sends one request and returns the response if its status is 2xx; a
// non-2xx answer is returned as *Error and the body closed.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	ctype := ""
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		rd, ctype = bytes.NewReader(raw), "application/json"
	}
	return c.send(ctx, method, path, query, rd, -1, ctype, accept)
}

// send is do with a raw body of ctype (size bytes; -1: unknown).
func (c *Client) send(ctx context.Context, method, path string, query url.Values, rd io.Reader, size int64, ctype, accept string) (*http.Response, error) {
	u := "http://remoted" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if size >= 0 {
		req.ContentLength = size
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.user != "" {
		req.Header.Set(api.HeaderUser, c.user)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("connect to remoted at %s: %w", c.socket, unwrapURL(err))
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// unwrapURL drops net/http's *url.Error wrapper, whose text repeats the
// made-up URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decodeError turns a non-2xx answer into *Error. An answer without the
// envelope (a proxy, a crash) still gets a code from its status.
func decodeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, Code: codeForStatus(resp.StatusCode)}
	var env api.ErrorResponse
	if err := json.Unmarshal(raw, &env); err == nil && env.Error.Code != "" {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(raw))
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	if e.Message == "" {
		e.Message = "HTTP status " + strconv.Itoa(resp.StatusCode)
	}
	return e
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return api.CodeBadRequest
	case http.StatusUnauthorized:
		return api.CodeUnauthorized
	case http.StatusForbidden:
		return api.CodeForbidden
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusServiceUnavailable:
		return api.CodeUnavailable
	}
	return api.CodeInternal
}

// fetch is call decoding the answer into a fresh T. (It exists so no
// method returns `out, c.call(..., &out)`, whose reading of out before or
// after the call Go leaves unspecified.)
func fetch[T any](ctx context.Context, c *Client, method, path string, query url.Values, body any) (T, error) {
	var out T
	err := c.call(ctx, method, path, query, body, &out)
	return out, err
}

// call sends a request and decodes a JSON answer into out (if not nil).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.do(ctx, method, path, query, body, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func chatPath(id string, rest ...string) string {
	return "/v1/chats/" + url.PathEscape(id) + strings.Join(rest, "")
}

func projectPath(name string, rest ...string) string {
	return "/v1/projects/" + url.PathEscape(name) + strings.Join(rest, "")
}

// Info returns GET /v1/info: version, uptime, LXD reachability, providers.
func (c *Client) Info(ctx context.Context) (api.Info, error) {
	return fetch[api.Info](ctx, c, http.MethodGet, "/v1/info", nil, nil)
}

// Providers returns GET /v1/providers.
func (c *Client) Providers(ctx context.Context) ([]api.ProviderInfo, error) {
	return fetch[[]api.ProviderInfo](ctx, c, http.MethodGet, "/v1/providers", nil, nil)
}

// Doctor runs the daemon's host checks (GET /v1/doctor).
func (c *Client) Doctor(ctx context.Context) (api.DoctorReport, error) {
	return fetch[api.DoctorReport](ctx, c, http.MethodGet, "/v1/doctor", nil, nil)
}

// CreateChat creates a chat (POST /v1/chats) and returns it.
func (c *Client) CreateChat(ctx context.Context, req api.CreateChatRequest) (api.Chat, error) {
	return fetch[api.Chat](ctx, c, http.MethodPost, "/v1/chats", nil, req)
}

// Chats lists the caller's chats.
func (c *Client) Chats(ctx context.Context) ([]api.Chat, error) {
	return fetch[[]api.Chat](ctx, c, http.MethodGet, "/v1/chats", nil, nil)
}

// Chat returns one chat.
func (c *Client) Chat(ctx context.Context, id string) (api.Chat, error) {
	return fetch[api.Chat](ctx, c, http.MethodGet, chatPath(id), nil, nil)
}

// DeleteChat deletes a chat and its events.
func (c *Client) DeleteChat(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, chatPath(id), nil, nil, nil)
}

// ForkChat forks a chat (S27) and returns the new chat.
func (c *Client) ForkChat(ctx context.Context, id string) (api.Chat, error) {
	return fetch[api.Chat](ctx, c, http.MethodPost, chatPath(id, "/fork"), nil, nil)
}

// ForkChatAt forks the visible history before the turn holding seq
// atSeq; withContainer also copies that turn's checkpoint into a new
// project (named in the answer's Project).
func (c *Client) ForkChatAt(ctx context.Context, id string, atSeq int64, withContainer bool) (api.Chat, error) {
	body := map[string]any{"atSeq": atSeq, "withContainer": withContainer}
	return fetch[api.Chat](ctx, c, http.MethodPost, chatPath(id, "/fork"), nil, body)
}

// ChatDiff returns what turn (the seq of its user event) of a project
// chat changed in its repository; turn 0 is the working tree against the
// cloned base.
func (c *Client) ChatDiff(ctx context.Context, id string, turn int64) (api.Diff, error) {
	var q url.Values
	if turn > 0 {
		q = url.Values{"turn": {strconv.FormatInt(turn, 10)}}
	}
	return fetch[api.Diff](ctx, c, http.MethodGet, chatPath(id, "/diff"), q, nil)
}

// PushChat commits what is uncommitted on the chat's branch (what req's
// All and Paths say; message "" takes the daemon's default) and pushes it
// to the project's repository.
func (c *Client) PushChat(ctx context.Context, id string, req api.PushRequest) (api.PushResult, error) {
	return fetch[api.PushResult](ctx, c, http.MethodPost, chatPath(id, "/push"), nil, req)
}

// OpenPullRequest pushes the chat's branch (committing what is
// uncommitted, the title as the message) and opens a pull request of it
// into base ("" takes the project's repo.ref, else the repository's
// default branch) on the forge the daemon has configured for the
// repository's host.
func (c *Client) OpenPullRequest(ctx context.Context, id string, req api.PullRequestRequest) (api.PullRequestResult, error) {
	return fetch[api.PullRequestResult](ctx, c, http.MethodPost, chatPath(id, "/pull-request"), nil, req)
}

func sinceQuery(since int64) url.Values {
	q := url.Values{}
	if since > 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	return q
}

// Events returns the chat's stored events with seq > since.
func (c *Client) Events(ctx context.Context, id string, since int64) ([]api.Event, error) {
	out := []api.Event{}
	err := c.EachEvent(ctx, id, since, func(ev api.Event) error {
		out = append(out, ev)
		return nil
	})
	return out, err
}

// EachEvent calls fn for each of the chat's stored events with seq > since,
// decoding the replay one event at a time so a long chat never sits in
// memory whole. An error from fn stops the walk and is returned.
func (c *Client) EachEvent(ctx context.Context, id string, since int64, fn func(api.Event) error) error {
	path := chatPath(id, "/events")
	resp, err := c.do(ctx, http.MethodGet, path, sinceQuery(since), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fmt.Errorf("GET %s: decode answer: want a JSON array (%v)", path, err)
	}
	for dec.More() {
		var ev api.Event
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("GET %s: decode event: %w", path, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("GET %s: decode answer: %w", path, err)
	}
	return nil
}

// Follow streams the chat's events with seq > since, then live events
// (including transient sync events), until ctx ends or the stream is closed.
func (c *Client) Follow(ctx context.Context, id string, since int64) (*EventStream, error) {
	q := sinceQuery(since)
	q.Set("follow", "true")
	resp, err := c.do(ctx, http.MethodGet, chatPath(id, "/events"), q, nil, "application/x-ndjson")
	if err != nil {
		return nil, err
	}
	return &EventStream{body: resp.Body, lines: newLineReader(resp.Body)}, nil
}

// EventStream is a followed chat's event stream.
type EventStream struct {
	body  io.ReadCloser
	lines *bufio.Reader
}

// Next returns the next event. It returns io.EOF when the daemon ends the
// stream and the context's error after it is cancelled.
func (s *EventStream) Next() (api.Event, error) {
	var ev api.Event
	line, err := readLine(s.lines)
	if err != nil {
		return ev, err
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, fmt.Errorf("decode event %q: %w", clip(line), err)
	}
	return ev, nil
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

func newLineReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64<<10) }

// ErrLineTooLong means a stream line exceeded the client's bound (16 MiB).
var ErrLineTooLong = errors.New("stream line too long")

// readLine returns the next non-empty line without its newline.
func readLine(r *bufio.Reader) ([]byte, error) {
	for {
		var line []byte
		for {
			chunk, err := r.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > maxLine {
				return nil, fmt.Errorf("%w: over %d bytes", ErrLineTooLong, maxLine)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil {
				if err == io.EOF && len(bytes.TrimSpace(line)) > 0 {
					return nil, io.ErrUnexpectedEOF
				}
				return nil, err
			}
			break
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line, nil
		}
	}
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// Prompt starts a run on the chat (202). A chat that is already running
// answers *Error with code prompt_already_running.
func (c *Client) Prompt(ctx context.Context, id string, req api.PromptRequest) (api.PromptResponse, error) {
	return fetch[api.PromptResponse](ctx, c, http.MethodPost, chatPath(id, "/prompt"), nil, req)
}

// Cancel cancels the chat's active run; not_found when none is active.
func (c *Client) Cancel(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, chatPath(id, "/cancel"), nil, nil, nil)
}

// AnswerInteraction answers a pending interaction of the chat's run (S21).
func (c *Client) AnswerInteraction(ctx context.Context, id string, req api.InteractionRequest) error {
	return c.call(ctx, http.MethodPost, chatPath(id, "/interactions"), nil, req, nil)
}

// CreateProject creates a project and returns it.
func (c *Client) CreateProject(ctx context.Context, req api.CreateProjectRequest) (api.Project, error) {
	return fetch[api.Project](ctx, c, http.MethodPost, "/v1/projects", nil, req)
}

// Projects lists the caller's projects.
func (c *Client) Projects(ctx context.Context) ([]api.Project, error) {
	return fetch[[]api.Project](ctx, c, http.MethodGet, "/v1/projects", nil, nil)
}

// Project returns one project.
func (c *Client) Project(ctx context.Context, name string) (api.Project, error) {
	return fetch[api.Project](ctx, c, http.MethodGet, projectPath(name), nil, nil)
}

// DeleteProject removes a project; purge also deletes its container.
func (c *Client) DeleteProject(ctx context.Context, name string, purge bool) error {
	var q url.Values
	if purge {
		q = url.Values{"purge": {"true"}}
	}
	return c.call(ctx, http.MethodDelete, projectPath(name), q, nil, nil)
}

// StartProject reconcile-starts the project's container and returns the project.
func (c *Client) StartProject(ctx context.Context, name string) (api.Project, error) {
	return fetch[api.Project](ctx, c, http.MethodPost, projectPath(name, "/start"), nil, nil)
}

// StopProject stops the project's container and returns the project.
func (c *Client) StopProject(ctx context.Context, name string) (api.Project, error) {
	return fetch[api.Project](ctx, c, http.MethodPost, projectPath(name, "/stop"), nil, nil)
}

// Checkpoints lists the project's checkpoints, oldest first.
func (c *Client) Checkpoints(ctx context.Context, name string) ([]api.Checkpoint, error) {
	return fetch[[]api.Checkpoint](ctx, c, http.MethodGet, projectPath(name, "/checkpoints"), nil, nil)
}

// RestoreCheckpoint restores the project's container from a checkpoint.
func (c *Client) RestoreCheckpoint(ctx context.Context, name, checkpoint string) (api.Project, error) {
	return fetch[api.Project](ctx, c, http.MethodPost, projectPath(name, "/checkpoints/", url.PathEscape(checkpoint), "/restore"), nil, nil)
}

// SetProjectLimits replaces the project's resource limits.
func (c *Client) SetProjectLimits(ctx context.Context, name string, limits api.ProjectLimits) (api.Project, error) {
	return fetch[api.Project](ctx, c, http.MethodPatch, projectPath(name), nil, api.PatchProjectRequest{Limits: &limits})
}

// PutSecret stores a project secret. The value travels only in the body.
func (c *Client) PutSecret(ctx context.Context, project, key, value string) error {
	return c.call(ctx, http.MethodPut, projectPath(project, "/secrets/", url.PathEscape(key)), nil, api.PutSecretRequest{Value: value}, nil)
}

// Secrets lists a project's secret keys (never values).
func (c *Client) Secrets(ctx context.Context, project string) ([]api.SecretInfo, error) {
	out := []api.SecretInfo{} // an empty list, not nil, when there are none
	err := c.call(ctx, http.MethodGet, projectPath(project, "/secrets"), nil, nil, &out)
	return out, err
}

// DeleteSecret removes one project secret.
func (c *Client) DeleteSecret(ctx context.Context, project, key string) error {
	return c.call(ctx, http.MethodDelete, projectPath(project, "/secrets/", url.PathEscape(key)), nil, nil, nil)
}

// ErrExecNoExit means an exec stream ended without an exit code.
var ErrExecNoExit = errors.New("exec stream ended without an exit code")

// ExecError is an exec the daemon reported as failed mid-stream.
type ExecError struct{ Message string }

func (e *ExecError) Error() string { return e.Message }

// Exec runs a command in the project's container, copying its output to
// stdout and stderr as it streams, and returns its exit code. A non-zero
// exit code is not an error.
func (c *Client) Exec(ctx context.Context, project string, req api.ExecRequest, stdout, stderr io.Writer) (int, error) {
	resp, err := c.do(ctx, http.MethodPost, projectPath(project, "/exec"), nil, req, "application/x-ndjson")
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	lines := newLineReader(resp.Body)
	for {
		line, err := readLine(lines)
		if errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("exec in project %q: %w", project, ErrExecNoExit)
		}
		if err != nil {
			return -1, fmt.Errorf("exec in project %q: %w", project, err)
		}
		var f api.ExecFrame
		if err := json.Unmarshal(line, &f); err != nil {
			return -1, fmt.Errorf("exec in project %q: decode frame %q: %w", project, clip(line), err)
		}
		switch {
		case f.Error != "":
			return -1, fmt.Errorf("exec in project %q: %w", project, &ExecError{Message: f.Error})
		case f.ExitCode != nil:
			return *f.ExitCode, nil
		case f.Stream == "stdout" && stdout != nil:
			if _, err := stdout.Write(f.Data); err != nil {
				return -1, fmt.Errorf("exec in project %q: write stdout: %w", project, err)
			}
		case f.Stream == "stderr" && stderr != nil:
			if _, err := stderr.Write(f.Data); err != nil {
				return -1, fmt.Errorf("exec in project %q: write stderr: %w", project, err)
			}
		}
	}
}

// Environment is the state of the project's environment (its setup).
func (c *Client) Environment(ctx context.Context, name string) (api.EnvironmentStatus, error) {
	return fetch[api.EnvironmentStatus](ctx, c, http.MethodGet, projectPath(name, "/environment"), nil, nil)
}

// RebuildEnvironment runs the project's setup now (in the background).
func (c *Client) RebuildEnvironment(ctx context.Context, name string) (api.EnvironmentStatus, error) {
	return fetch[api.EnvironmentStatus](ctx, c, http.MethodPost, projectPath(name, "/environment/rebuild"), nil, nil)
}

// EnvironmentLog is the output of the project environment's last run.
func (c *Client) EnvironmentLog(ctx context.Context, name string) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, projectPath(name, "/environment/log"), nil, nil, "text/plain")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 2<<20))
	return string(b), err
}

// SetProjectEnvironment replaces the project's environment ({} removes it).
func (c *Client) SetProjectEnvironment(ctx context.Context, name string, env api.ProjectEnvironment) (api.Project, error) {
	return fetch[api.Project](ctx, c, http.MethodPatch, projectPath(name), nil, api.PatchProjectRequest{Environment: &env})
}
