package codexharness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
)

// Bounds of one app-server session.
const (
	MaxLineBytes    = 16 << 20 // one stdout line
	MaxStderrBytes  = 64 << 10 // stderr kept for error messages
	MaxPending      = 256      // server requests awaiting an answer
	DefaultInterval = 10 * time.Second
	// DefaultRetryLimit is Config.RetryLimit's default.
	DefaultRetryLimit = 2 * time.Minute
)

// ErrProtocol classifies a broken app-server session: the process exited
// or closed stdout early, a line exceeded MaxLineBytes, a request failed,
// or a required field was missing. Errors of this class are *ProtocolError.
var ErrProtocol = errors.New("app-server protocol failure")

// ProtocolError is a protocol failure with the stderr captured from the
// app-server (at most MaxStderrBytes).
type ProtocolError struct {
	Op     string // what failed, e.g. "thread/start"
	Err    error
	Stderr string
}

// Error names the failed step, the cause and the captured stderr.
func (e *ProtocolError) Error() string {
	msg := fmt.Sprintf("app-server %s: %v", e.Op, e.Err)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += "; stderr: " + s
	}
	return msg
}

// Unwrap returns ErrProtocol and the underlying error.
func (e *ProtocolError) Unwrap() []error { return []error{ErrProtocol, e.Err} }

// Settings are the thread and turn parameters of one run.
type Settings struct {
	Model          string // requested model; empty lets the server choose
	Cwd            string // working directory as the app-server sees it
	ApprovalPolicy string // AskForApproval: never | on-request | on-failure | untrusted
	Sandbox        string // SandboxMode: read-only | workspace-write | danger-full-access
	ServiceTier    string
	Effort         string
	Plan           bool // collaborationMode plan instead of default
}

// Config parameterizes Run for one adapter.
type Config struct {
	Provider providers.ProviderID // stamped on every event
	Logger   hclog.Logger         // nil discards
	Settings Settings
	// InterruptTimeout bounds the wait for turn/completed after a cancel;
	// the process is killed when it passes. Default DefaultInterval.
	InterruptTimeout time.Duration
	// ExitGrace bounds the wait for the process to exit once stdin was
	// closed after the turn ended (turn/completed): an app-server still
	// running then is stopped, and the turn it reported stands. Default
	// DefaultInterval.
	ExitGrace time.Duration
	// RetryLimit bounds how long a turn may only retry (Codex's
	// "Reconnecting..." notices, with nothing else happening) before the
	// run gives up: the turn is interrupted and the run fails with one
	// clear error. Codex itself keeps waiting for a network it believes is
	// down. Default DefaultRetryLimit.
	RetryLimit time.Duration
	// ClientName and ClientVersion fill initialize.clientInfo.
	ClientName, ClientVersion string
}

// Policies and sandboxes the app-server accepts (kebab-case AskForApproval
// and SandboxMode).
var (
	approvalPolicies = map[string]bool{"never": true, "on-request": true, "on-failure": true, "untrusted": true}
	sandboxModes     = map[string]bool{"read-only": true, "workspace-write": true, "danger-full-access": true}
)

// ErrBadPreference classifies an approval or sandbox preference the
// app-server would not accept.
var ErrBadPreference = errors.New("invalid run preference")

// ResolvePolicies decides a thread's approval policy and sandbox mode.
// Default (like the origin): approval "never", sandbox "danger-full-access".
// prefs.ApprovalPolicy is honoured everywhere, so a chat that asks for
// approvals ("on-request", "untrusted", "on-failure") gets interaction cards
// (S21). prefs.SandboxPolicy is honoured on the host only: inside a project
// container the container is the sandbox and the app-server has no
// bubblewrap, so it is always "danger-full-access" there.
func ResolvePolicies(prefs providers.RunPreferences, inContainer bool) (approval, sandbox string, err error) {
	approval, sandbox = "never", "danger-full-access"
	if p := prefs.ApprovalPolicy; p != "" {
		if !approvalPolicies[p] {
			return "", "", fmt.Errorf("%w: approval policy %q (want never, on-request, on-failure or untrusted)", ErrBadPreference, p)
		}
		approval = p
	}
	if s := prefs.SandboxPolicy; s != "" {
		if !sandboxModes[s] {
			return "", "", fmt.Errorf("%w: sandbox policy %q (want read-only, workspace-write or danger-full-access)", ErrBadPreference, s)
		}
		if !inContainer {
			sandbox = s
		}
	}
	return approval, sandbox, nil
}

// Run drives one turn of a fresh `codex app-server` started by launcher
// with cmd (S19): initialize, initialized, thread/start | thread/resume |
// thread/fork (req.ResumeID, req.Fork), turn/start with req.Prompt, then
// notifications until the parent thread's turn/completed. Server requests
// are emitted as interaction.request and stay pending until an explicit
// answer arrives on req.InteractionResponses (S21). Cancelling ctx sends
// turn/interrupt and waits for the interrupted turn (S22); the process is
// killed only on protocol failure or after cfg.InterruptTimeout.
//
// Run returns nil on completion or cancellation, an error wrapping
// providers.ErrRunFailed after emitting run.failed, one wrapping
// providers.ErrSessionNotFound when a resume or fork names an unknown
// thread (S23), and a *ProtocolError otherwise.
func Run(ctx context.Context, launcher providers.Launcher, cmd providers.Command, req providers.RunRequest,
	cfg Config, emit func(providers.Event)) error {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.InterruptTimeout <= 0 {
		cfg.InterruptTimeout = DefaultInterval
	}
	if cfg.ExitGrace <= 0 {
		cfg.ExitGrace = DefaultInterval
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return fmt.Errorf("%s run: empty prompt", cfg.Provider)
	}
	if cfg.RetryLimit <= 0 {
		cfg.RetryLimit = DefaultRetryLimit
	}
	// The retry watch: the first retry notice arms a timer, any other
	// progress disarms it; when it fires the turn is interrupted and the
	// run reported failed (giveUp holds the last notice).
	runCtx, giveUpCancel := context.WithCancel(ctx)
	defer giveUpCancel()
	var (
		retryMu    sync.Mutex
		retryTimer *time.Timer
		lastNotice string
		gaveUp     bool
	)
	watchRetries := func(ev providers.Event) {
		retryMu.Lock()
		defer retryMu.Unlock()
		switch {
		case ev.Type == providers.EventTurnStatus && ev.Status == StatusRetrying:
			lastNotice = ev.Message
			if retryTimer == nil {
				retryTimer = time.AfterFunc(cfg.RetryLimit, func() {
					retryMu.Lock()
					gaveUp = true
					retryMu.Unlock()
					giveUpCancel()
				})
			}
		case ev.Type == providers.EventAssistantDelta, ev.Type == providers.EventReasoningDelta,
			ev.Type == providers.EventToolStarted, ev.Type == providers.EventToolCompleted,
			ev.Type == providers.EventInteractionRequest, ev.Type == providers.EventUsageUpdated:
			if retryTimer != nil && !gaveUp {
				retryTimer.Stop()
				retryTimer = nil
			}
		}
	}
	defer func() {
		retryMu.Lock()
		if retryTimer != nil {
			retryTimer.Stop()
		}
		retryMu.Unlock()
	}()
	stamp := providers.StampEvents(func(ev providers.Event) {
		watchRetries(ev)
		retryMu.Lock()
		drop := gaveUp && ev.Type == providers.EventRunInterrupted
		retryMu.Unlock()
		if drop {
			return // the give-up is reported as run.failed instead
		}
		emit(ev)
	}, cfg.Provider, req)

	// The child outlives ctx: a cancel is answered by turn/interrupt, and
	// kill() is reserved for protocol failure and timeouts.
	procCtx, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	proc, err := launcher.Start(providers.MainProcess(procCtx), cmd)
	if err != nil {
		return fmt.Errorf("start %s app-server %q: %w", cfg.Provider, cmd.Path, err)
	}
	stderr := &capture{max: MaxStderrBytes}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		_, _ = io.Copy(stderr, proc.Stderr())
	}()
	quit := make(chan struct{})
	lines := make(chan lineResult, 64)
	go readLines(proc.Stdout(), lines, quit)

	s := &session{
		cfg: cfg, log: log, emit: stamp, req: req, stdin: proc.Stdin(), lines: lines,
		parser: NewParser(cfg.Provider), pending: map[string]pendingRequest{},
		responses: req.InteractionResponses,
	}
	if slot := providers.RunSlotFrom(ctx); slot != nil {
		s.cursor = slot.Cursor
	}
	stamp(providers.Event{Type: providers.EventRunStarted, Model: cfg.Settings.Model})
	runErr := s.run(runCtx)
	s.expirePending()
	for _, ev := range s.parser.Flush() {
		stamp(ev)
	}

	_ = proc.Stdin().Close()
	close(quit)
	if errors.Is(runErr, ErrProtocol) || errors.Is(runErr, errInterruptTimeout) {
		kill()
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- proc.Wait() }()
	var exitErr error
	select {
	case exitErr = <-waitErr:
	case <-time.After(cfg.ExitGrace):
		log.Warn("app-server did not exit after stdin closed; stopping it", "provider", cfg.Provider, "exit_grace", cfg.ExitGrace)
		kill()
		exitErr = <-waitErr
	}
	<-stderrDone

	retryMu.Lock()
	failedRetrying := gaveUp && ctx.Err() == nil
	retryMu.Unlock()
	if failedRetrying && (runErr == nil || errors.Is(runErr, errCancelled) || errors.Is(runErr, errInterruptTimeout)) {
		msg := fmt.Sprintf("%s could not reach its model endpoint: still retrying after %s (%s)", cfg.Provider, cfg.RetryLimit, lastNotice)
		stamp(providers.Event{Type: providers.EventRunFailed, Status: StatusFailed, Message: msg})
		return fmt.Errorf("%s: %w", msg, providers.ErrRunFailed)
	}
	switch {
	case errors.Is(runErr, errCancelled):
		stamp(providers.Event{Type: providers.EventRunInterrupted, Status: StatusInterrupted})
		return nil
	case errors.Is(runErr, errInterruptTimeout):
		log.Warn("app-server did not finish the interrupted turn in time; killed it",
			"provider", cfg.Provider, "timeout", cfg.InterruptTimeout)
		stamp(providers.Event{Type: providers.EventRunInterrupted, Status: StatusInterrupted,
			Message: "the turn did not stop in time and the app-server was killed"})
		return nil
	case runErr != nil:
		var pe *ProtocolError
		if errors.As(runErr, &pe) {
			pe.Stderr = stderr.String()
			if exitErr != nil && errors.Is(pe.Err, errClosed) {
				pe.Err = fmt.Errorf("%w (%v)", pe.Err, exitErr)
			}
		}
		return runErr
	}
	if exitErr != nil {
		log.Debug("app-server exited with an error after the turn ended", "provider", cfg.Provider, "error", exitErr)
	}
	status, _ := s.parser.Terminal()
	if status == StatusFailed {
		return fmt.Errorf("%s turn %s: %w", cfg.Provider, s.turnID, providers.ErrRunFailed)
	}
	return nil
}

var (
	errCancelled        = errors.New("run cancelled before the turn started")
	errInterruptTimeout = errors.New("interrupt timed out")
	errClosed           = errors.New("app-server closed its output before the turn completed")
)

type lineResult struct {
	line  []byte
	start int64 // byte offset of the line in stdout (providers.Pos)
	err   error
}

// readLines scans stdout into lines until EOF, then keeps draining after
// quit so the process can always exit.
func readLines(r io.Reader, out chan<- lineResult, quit <-chan struct{}) {
	defer func() { _, _ = io.Copy(io.Discard, r) }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	var lineStart, read int64
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		advance, token, err := bufio.ScanLines(data, atEOF)
		if advance > 0 {
			lineStart = read
			read += int64(advance)
		}
		return advance, token, err
	})
	for sc.Scan() {
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		select {
		case out <- lineResult{line: append([]byte(nil), b...), start: lineStart}:
		case <-quit:
			return
		}
	}
	if err := sc.Err(); err != nil {
		select {
		case out <- lineResult{err: err, start: read}:
		case <-quit:
			return
		}
	}
	close(out)
}

// capture keeps the first max bytes written and discards the rest.
type capture struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

type pendingRequest struct {
	method string
	itemID string
}

type session struct {
	cfg    Config
	log    hclog.Logger
	emit   func(providers.Event)
	req    providers.RunRequest
	stdin  io.Writer
	cursor *providers.Cursor // positions events of a supervised run; may be nil
	lines  <-chan lineResult
	parser *Parser

	nextID    int64
	pending   map[string]pendingRequest
	order     []string // pending ids in arrival order
	responses <-chan providers.InteractionResponse

	threadID, turnID string
	cancelled        bool
	interruptSent    bool
	deadline         <-chan time.Time
}

func (s *session) run(ctx context.Context) error {
	st := s.cfg.Settings
	if _, err := s.call(ctx, "initialize", map[string]any{
		"clientInfo": map[string]string{
			"name": nonEmpty(s.cfg.ClientName, "remote"), "title": "Remote",
			"version": nonEmpty(s.cfg.ClientVersion, "1"),
		},
		"capabilities": map[string]any{"experimentalApi": true},
	}); err != nil {
		return err
	}
	if err := s.write(-1, "initialized", map[string]any{}); err != nil {
		return err
	}
	if s.cancelled {
		return errCancelled
	}

	method := "thread/start"
	params := map[string]any{"approvalPolicy": st.ApprovalPolicy, "sandbox": st.Sandbox}
	switch {
	case s.req.ResumeID != "" && s.req.Fork:
		method = "thread/fork"
		params["threadId"] = s.req.ResumeID
	case s.req.ResumeID != "":
		method = "thread/resume"
		params["threadId"] = s.req.ResumeID
	default:
		params["serviceName"] = "remote"
	}
	if st.Model != "" {
		params["model"] = st.Model
	}
	if st.Cwd != "" {
		params["cwd"] = st.Cwd
	}
	if st.ServiceTier != "" {
		params["serviceTier"] = st.ServiceTier
	}
	res, err := s.call(ctx, method, params)
	if err != nil {
		var rpc *RPCError
		if method != "thread/start" && errors.As(err, &rpc) {
			msg := strings.ToLower(rpc.Message)
			// S23: the upstream message is the only signal of an unknown thread.
			if strings.Contains(msg, "not found") || strings.Contains(msg, "no rollout") {
				return fmt.Errorf("%s %s %q: %w: %s", s.cfg.Provider, method, s.req.ResumeID, providers.ErrSessionNotFound, rpc.Message)
			}
		}
		return err
	}
	var tr struct {
		Model  string `json:"model"`
		Thread struct {
			ID    string `json:"id"`
			Model string `json:"model"`
		} `json:"thread"`
	}
	if err := json.Unmarshal(res, &tr); err != nil {
		return &ProtocolError{Op: method, Err: fmt.Errorf("decode result: %w", err)}
	}
	model := nonEmpty(tr.Model, tr.Thread.Model)
	if tr.Thread.ID == "" || model == "" {
		return &ProtocolError{Op: method, Err: fmt.Errorf("result lacks thread id or model (thread %q, model %q)", tr.Thread.ID, model)}
	}
	s.threadID = tr.Thread.ID
	s.parser.SetThread(s.threadID)
	if s.threadID != s.req.ResumeID {
		s.emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: s.threadID, Model: model})
	}
	if s.cancelled {
		return errCancelled
	}

	mode := "default"
	if st.Plan {
		mode = "plan"
	}
	var effort any
	if st.Effort != "" {
		effort = st.Effort
	}
	turnParams := map[string]any{
		"threadId": s.threadID,
		"input":    []any{map[string]string{"type": "text", "text": s.req.Prompt}},
		"collaborationMode": map[string]any{"mode": mode, "settings": map[string]any{
			"model": model, "reasoning_effort": effort, "developer_instructions": nil,
		}},
	}
	if st.Effort != "" {
		turnParams["effort"] = st.Effort
	}
	res, err = s.call(ctx, "turn/start", turnParams)
	if err != nil {
		return err
	}
	var ts struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if err := json.Unmarshal(res, &ts); err != nil || ts.Turn.ID == "" {
		return &ProtocolError{Op: "turn/start", Err: errors.New("result lacks turn id")}
	}
	s.turnID = ts.Turn.ID
	s.parser.SetTurn(s.turnID)
	if err := s.maybeInterrupt(); err != nil {
		return err
	}
	_, err = s.pump(ctx, -1)
	return err
}

// call sends a request and processes everything else until its response.
// A JSON-RPC error answer is returned as a *ProtocolError wrapping *RPCError.
func (s *session) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	s.nextID++
	id := s.nextID
	if err := s.write(id, method, params); err != nil {
		return nil, err
	}
	m, err := s.pump(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.Error != nil {
		return nil, &ProtocolError{Op: method, Err: m.Error}
	}
	return m.Result, nil
}

func (s *session) write(id int64, method string, params any) error {
	b, err := encodeRequest(id, method, params)
	if err != nil {
		return &ProtocolError{Op: method, Err: err}
	}
	if _, err := s.stdin.Write(b); err != nil {
		return &ProtocolError{Op: method, Err: fmt.Errorf("write request: %w", err)}
	}
	return nil
}

// pump handles input until the response to id arrives, or (id < 0) until
// the parent turn is terminal.
func (s *session) pump(ctx context.Context, id int64) (Message, error) {
	want := strconv.FormatInt(id, 10)
	for {
		if id < 0 {
			if _, done := s.parser.Terminal(); done {
				return Message{}, nil
			}
		}
		var cancel <-chan struct{}
		if !s.cancelled {
			cancel = ctx.Done()
		}
		// A re-attached run answers nothing while it replays what the CLI
		// said before the restart: the request an answer names may not be
		// pending again yet.
		responses := s.responses
		if s.cursor.DropWrite() {
			responses = nil
		}
		select {
		case lr, ok := <-s.lines:
			if !ok {
				return Message{}, &ProtocolError{Op: "read", Err: errClosed}
			}
			s.cursor.Line(lr.start)
			if lr.err != nil {
				return Message{}, &ProtocolError{Op: "read", Err: fmt.Errorf("stdout: %w", lr.err)}
			}
			m, err := DecodeMessage(lr.line)
			if err != nil {
				s.log.Warn("skipping malformed app-server line", "provider", s.cfg.Provider, "bytes", len(lr.line), "error", err)
				continue
			}
			switch m.Kind {
			case KindResponse:
				if id >= 0 && m.ID == want {
					return m, nil
				}
				if m.Error != nil {
					s.log.Warn("app-server request failed", "provider", s.cfg.Provider, "id", m.ID, "error", m.Error.Message)
				}
			case KindRequest:
				if err := s.serverRequest(m); err != nil {
					return Message{}, err
				}
			case KindNotification:
				if m.Method == "serverRequest/resolved" && s.resolvedByServer(m) {
					continue
				}
				evs := s.parser.Parse(m)
				if _, done := s.parser.Terminal(); done {
					s.expirePending()
				}
				for _, ev := range evs {
					s.emit(ev)
				}
			}
		case r, ok := <-responses:
			if !ok {
				s.responses = nil
				continue
			}
			if err := s.answer(r); err != nil {
				return Message{}, err
			}
		case <-cancel:
			if errors.Is(context.Cause(ctx), providers.ErrDetached) {
				// The daemon stops and the run goes on under its shim:
				// nothing is sent, the next daemon re-attaches.
				return Message{}, providers.ErrDetached
			}
			s.cancelled = true
			s.deadline = time.After(s.cfg.InterruptTimeout)
			if err := s.maybeInterrupt(); err != nil {
				return Message{}, err
			}
		case <-s.deadline:
			return Message{}, errInterruptTimeout
		}
	}
}

// maybeInterrupt sends turn/interrupt once, when the run was cancelled and
// both native ids are known (S22).
func (s *session) maybeInterrupt() error {
	if !s.cancelled || s.interruptSent || s.threadID == "" || s.turnID == "" {
		return nil
	}
	s.interruptSent = true
	s.nextID++
	s.log.Debug("interrupting turn", "provider", s.cfg.Provider, "thread", s.threadID, "turn", s.turnID)
	return s.write(s.nextID, "turn/interrupt", map[string]string{"threadId": s.threadID, "turnId": s.turnID})
}

// serverRequest records a server→client request as pending and shows it.
// Every method, known or not, waits for an explicit answer: nothing is
// decided for the user (S21).
func (s *session) serverRequest(m Message) error {
	if _, dup := s.pending[m.ID]; dup {
		s.log.Warn("app-server repeated a pending request id", "provider", s.cfg.Provider, "id", m.ID, "method", m.Method)
	}
	if len(s.pending) >= MaxPending {
		return &ProtocolError{Op: m.Method, Err: fmt.Errorf("more than %d pending server requests", MaxPending)}
	}
	ev := s.parser.interactionRequest(m)
	if _, dup := s.pending[m.ID]; !dup {
		s.order = append(s.order, m.ID)
	}
	s.pending[m.ID] = pendingRequest{method: m.Method, itemID: ev.ItemID}
	s.emit(ev)
	return nil
}

// answer writes the client's explicit answer to the pending request it names.
func (s *session) answer(r providers.InteractionResponse) error {
	id := strings.TrimSpace(r.ID)
	if id != "" {
		if c, err := canonicalID(json.RawMessage(id)); err == nil {
			id = c
		}
	}
	pr, ok := s.pending[id]
	if !ok {
		s.log.Warn("interaction response names no pending request", "provider", s.cfg.Provider, "id", r.ID)
		return nil
	}
	hasResult, hasError := len(nonNull(r.Result)) > 0, len(nonNull(r.Error)) > 0
	if hasResult == hasError || (hasResult && !json.Valid(r.Result)) || (hasError && !json.Valid(r.Error)) {
		s.log.Warn("interaction response needs exactly one valid result or error; request stays pending",
			"provider", s.cfg.Provider, "id", id)
		return nil
	}
	var b []byte
	if hasError {
		b = encodeResponse(id, nil, r.Error)
	} else {
		b = encodeResponse(id, r.Result, nil)
	}
	if _, err := s.stdin.Write(b); err != nil {
		return &ProtocolError{Op: pr.method, Err: fmt.Errorf("write answer to request %s: %w", id, err)}
	}
	delete(s.pending, id)
	s.emit(providers.Event{Type: providers.EventInteractionResolved, InteractionID: id, ToolName: pr.method,
		ItemID: pr.itemID, Status: decisionStatus(r.Result, hasError),
		Native: &providers.NativeEnvelope{SchemaVersion: providers.NativeSchemaVersion, Method: pr.method,
			ThreadID: s.threadID, TurnID: s.turnID, ItemID: pr.itemID, RequestID: id}})
	return nil
}

// expirePending closes the cards of requests still pending when the turn
// ended (Codex does not settle them on an interrupt): interaction.resolved
// with status "expired". Nothing is answered on the user's behalf; the
// request simply can no longer be answered.
func (s *session) expirePending() {
	for _, id := range s.order {
		pr, ok := s.pending[id]
		if !ok {
			continue
		}
		delete(s.pending, id)
		s.emit(providers.Event{Type: providers.EventInteractionResolved, InteractionID: id, ToolName: pr.method,
			ItemID: pr.itemID, Status: "expired"})
	}
	s.order = s.order[:0]
}

// resolvedByServer handles serverRequest/resolved: a request still pending
// here was settled by the server itself (e.g. the turn was interrupted).
// It reports whether the notification was consumed.
func (s *session) resolvedByServer(m Message) bool {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil || len(p.RequestID) == 0 {
		return false
	}
	id, err := canonicalID(p.RequestID)
	if err != nil {
		return false
	}
	if pr, ok := s.pending[id]; ok {
		delete(s.pending, id)
		s.emit(providers.Event{Type: providers.EventInteractionResolved, InteractionID: id, ToolName: pr.method,
			ItemID: pr.itemID, Status: "resolved"})
	}
	return true
}

// decisionStatus summarizes an answer without keeping its content (answers
// may hold secrets): approved, denied, cancelled, answered or error.
func decisionStatus(result json.RawMessage, isError bool) string {
	if isError {
		return "error"
	}
	var r struct {
		Decision json.RawMessage `json:"decision"`
		Action   string          `json:"action"`
	}
	if json.Unmarshal(result, &r) != nil {
		return "answered"
	}
	var d string
	if json.Unmarshal(r.Decision, &d) != nil {
		d = r.Action
		if len(r.Decision) > 0 && r.Decision[0] == '{' {
			if strings.Contains(string(r.Decision), "denied") {
				return "denied"
			}
			return "approved"
		}
	}
	switch d {
	case "accept", "acceptForSession", "approved", "approved_for_session":
		return "approved"
	case "decline", "denied", "abort":
		return "denied"
	case "cancel":
		return "cancelled"
	}
	return "answered"
}
