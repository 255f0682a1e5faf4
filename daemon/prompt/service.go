package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/metrics"
	"remote/daemon/prompt/projection"
	"remote/daemon/runhub"
	"remote/daemon/storageguard"
	"remote/daemon/store"
	"remote/daemon/store/eventjson"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/providers"
)

// Causes a run's context is cancelled with.
var (
	errCancelledByUser = errors.New("cancelled by the user")
	errDaemonStopping  = errdefs.New(errdefs.ErrUnavailable, "the daemon is shutting down")
)

// Terminal messages the daemon itself persists.
const (
	msgInterruptedByShutdown = "the run was interrupted because the daemon shut down"
	// statusInterrupted is the status of the complete event that ends a
	// cancelled run.
	statusInterrupted = "interrupted"
)

// runStopped is the cause a run's context is cancelled with when the
// daemon itself stops it: an append failed (storage), or the run or its
// chat outgrew its byte bound.
type runStopped struct {
	msg     string // the terminal error event's message
	storage bool   // the run's events could not be stored
}

func (e *runStopped) Error() string { return e.msg }

// ProjectChats lets chats be bound to projects. The projects work supplies
// it; without it a chat naming a project is refused with bad_request.
type ProjectChats interface {
	// CheckChatProject returns the project's id when owner may create
	// req (a chat in req.Project, with its branch), errdefs.ErrNotFound when
	// it does not exist for owner, or another classified error.
	CheckChatProject(ctx context.Context, owner string, req api.CreateChatRequest) (string, error)
	// CheckChatRun returns nil when the project chat may run now: its
	// project still exists with the chat's project id and owner; else an
	// error wrapping errdefs.ErrNotFound or errdefs.ErrConflict, and nothing runs.
	CheckChatRun(ctx context.Context, chat api.Chat) error
}

// ServiceOptions configures the prompt service.
type ServiceOptions struct {
	Store    Store
	Hub      *runhub.Hub
	Registry *Registry
	Logger   hclog.Logger
	Metrics  *metrics.Metrics
	// TranscriptBytes bounds visible history (S6); 0 = DefaultTranscriptBytes.
	TranscriptBytes int
	// SkillsDir holds <name>/SKILL.md for every selectable skill (S7).
	SkillsDir string
	// Roots are the directories loose chats may run in (S8).
	Roots Roots
	// IdleTimeout stops a run whose provider produced no output for that
	// long ([agent] idle_timeout); 0 = never.
	IdleTimeout time.Duration
	// StateDir is the directory whose filesystem holds the store; prompts
	// are refused (507 storage_full) while it has less than MinFree bytes
	// free. "" or 0 turns the check off.
	StateDir string
	MinFree  int64
	// MaxRunBytes and MaxChatBytes bound the event bytes one run and one
	// chat may store (0 = unbounded): a run that outgrows either is
	// stopped with an error event, a full chat takes no new prompts.
	MaxRunBytes, MaxChatBytes int64
	// Queue bounds what prompts queued while a run is active may store.
	Queue QueueBounds
	// StorageCheckEvery is how often free space is checked and unrecorded
	// run ends are retried; 0 = storageguard.DefaultCheckEvery.
	StorageCheckEvery time.Duration
	// Projects admits project chats' runs; nil: project chats do not run.
	Projects ProjectChats
}

// Service is the prompt service (S3): it resolves chat state, builds the
// provider-neutral RunRequest, runs the provider under the hub's lock and
// turns its events into persisted chat events.
type Service struct {
	store           Store
	hub             *runhub.Hub
	reg             *Registry
	log             hclog.Logger
	metrics         *metrics.Metrics
	transcriptBytes int
	skillsDir       string
	roots           atomic.Pointer[Roots]
	idleTimeout     atomic.Int64 // time.Duration
	guard           *storageguard.Guard
	queue           QueueBounds
	projects        ProjectChats // nil: project chats do not run

	// mu orders enter's wg.Add before Shutdown's wg.Wait: a prompt either
	// reserved its run before stopping was set, or is refused.
	mu       sync.Mutex
	wg       sync.WaitGroup
	stopping atomic.Bool
	turns    map[string]*turn // runs in flight by chat id, under mu
}

// NewService returns a prompt service.
func NewService(o ServiceOptions) *Service {
	if o.TranscriptBytes <= 0 {
		o.TranscriptBytes = DefaultTranscriptBytes
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	s := &Service{store: o.Store, hub: o.Hub, reg: o.Registry, log: o.Logger, metrics: o.Metrics,
		transcriptBytes: o.TranscriptBytes, skillsDir: o.SkillsDir, projects: o.Projects, queue: o.Queue}
	s.roots.Store(&o.Roots)
	s.SetIdleTimeout(o.IdleTimeout)
	s.guard = storageguard.New(storageguard.Options{Store: o.Store, Hub: o.Hub, Logger: o.Logger.Named("storage"),
		Metrics: o.Metrics, Dir: o.StateDir, MinFree: o.MinFree, MaxRun: o.MaxRunBytes, MaxChat: o.MaxChatBytes,
		Every: o.StorageCheckEvery})
	return s
}

// SetIdleTimeout replaces the idle timeout of runs started from now on
// (config reload); 0 turns it off.
func (s *Service) SetIdleTimeout(d time.Duration) { s.idleTimeout.Store(int64(max(d, 0))) }

// SetRoots replaces the allowed roots (config reload).
func (s *Service) SetRoots(r Roots) { s.roots.Store(&r) }

// Roots returns the allowed roots in force.
func (s *Service) Roots() Roots { return *s.roots.Load() }

// Input is one prompt as the API and the chat socket accept it.
type Input struct {
	Text   string
	Mode   string
	Skills []string
	// Synthetic, when set, is stored on the user event (docs/api.md).
	Synthetic string
}

// syntheticPattern is what a prompt's synthetic marker may be.
var syntheticPattern = lazyre.New(`^[A-Za-z0-9_.-]{1,64}$`)

// maxPromptBytes bounds one prompt's text.
const maxPromptBytes = 512 << 10

func (in Input) validate() error {
	if strings.TrimSpace(in.Text) == "" {
		return errdefs.InvalidArgument("text: must not be empty")
	}
	if len(in.Text) > maxPromptBytes {
		return errdefs.InvalidArgument("text: longer than %d bytes", maxPromptBytes)
	}
	if !utf8.ValidString(in.Text) {
		return errdefs.InvalidArgument("text: not valid UTF-8")
	}
	switch providers.RunMode(in.Mode) {
	case "", providers.ModeDefault, providers.ModePlan:
	default:
		return errdefs.InvalidArgument("mode: unknown mode %q (want \"default\" or \"plan\")", in.Mode)
	}
	if in.Synthetic != "" && !syntheticPattern.MatchString(in.Synthetic) {
		return errdefs.InvalidArgument("synthetic: must be 1 to 64 letters, digits, '.', '_' or '-'")
	}
	return nil
}

// Start validates the prompt, takes the chat's run lock, persists the user
// event and starts the run in the background. It returns the run id, or
// runhub.ErrPromptAlreadyRunning when the chat already runs (S2). The run does not
// depend on ctx's cancellation, only on Cancel and Shutdown.
func (s *Service) Start(ctx context.Context, chatID string, in Input) (string, error) {
	return s.start(ctx, chatID, in, "")
}

// start is Start; a non-empty qid starts that queued prompt, taking it off
// the chat's queue in the transaction that marks the chat running.
func (s *Service) start(ctx context.Context, chatID string, in Input, qid string) (string, error) {
	if err := in.validate(); err != nil {
		return "", err
	}
	// Reserve the run's place in wg before anything else, under mu, so a
	// Shutdown either sees it (and waits) or has already refused it.
	if !s.enter() {
		return "", fmt.Errorf("start prompt in chat %s: %w", chatID, errDaemonStopping)
	}
	started := false
	defer func() {
		if !started {
			s.wg.Done()
		}
	}()
	chat, err := s.store.Chat(chatID)
	if err != nil {
		return "", fmt.Errorf("load chat %s: %w", chatID, err)
	}
	if err := s.guard.BeforeRun(chat); err != nil {
		return "", storageRefusal{err}
	}
	p, err := s.reg.Get(chat.Provider)
	if err != nil {
		return "", err
	}
	// Cached: admission never waits for a model catalogue being fetched
	// (the run reports a model the provider does not know).
	caps, err := p.Capabilities(ctx, providers.CapabilityRequest{ProjectID: chat.Project, Cached: true})
	if err != nil {
		return "", fmt.Errorf("%s capabilities: %w: %w", chat.Provider, errdefs.ErrUnavailable, err)
	}
	if err := validateSkills(in.Skills, s.skillsDir); err != nil {
		return "", err
	}
	if chat.Project == "" {
		if _, err := s.Roots().Check(chat.Cwd); err != nil {
			return "", err
		}
	} else if err := s.checkProject(ctx, chat); err != nil {
		return "", err
	}
	if err := checkReady(ctx, chat.Provider, p, chat); err != nil {
		return "", err
	}

	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	run, err := s.hub.StartRun(chatID, cancel)
	if err != nil {
		cancel(nil)
		return "", err
	}
	if s.stopping.Load() {
		// Shutdown began after enter: its CancelAll may have missed this
		// run, so it does not start.
		s.hub.FinishRun(run)
		cancel(nil)
		return "", fmt.Errorf("start prompt in chat %s: %w", chatID, errDaemonStopping)
	}
	// The running mark and the user event are one transaction: one commit
	// on the prompt's path, and never a chat marked running without its
	// prompt. The store broadcasts the event in commit order.
	now := time.Now()
	mark := func(c *api.Chat) ([]api.Event, error) {
		c.Running = true
		c.LastMessageAt = now
		if c.Title == "" {
			c.Title = titleFromPrompt(in.Text)
		}
		if in.Mode != "" {
			c.Mode = in.Mode
		}
		c.SelectedSkills = slices.Clone(in.Skills)
		return []api.Event{{Type: api.EventUser, ID: qid, Text: in.Text, Synthetic: in.Synthetic, T: now.UnixMilli()}}, nil
	}
	var user []api.Event
	if qid == "" {
		chat, user, err = s.store.UpdateChatAndAppend(chatID, mark)
	} else if chat, user, err = s.store.TakeQueued(chatID, qid, mark); errors.Is(err, store.ErrNotQueued) {
		err = errQueuedGone
	}
	if err == nil {
		s.hub.Stored(chatID, user...)
		started = true
		go s.run(runCtx, &turn{run: run, chat: chat, p: p, caps: caps, in: in, userSeq: user[0].Seq})
		return run.ID, nil
	}
	s.hub.FinishRun(run)
	cancel(nil)
	return "", fmt.Errorf("start prompt in chat %s: %w", chatID, err)
}

// checkProject refuses a project chat whose project is gone, was created
// again (another id) or is not the chat owner's: nothing runs, no
// container is touched.
func (s *Service) checkProject(ctx context.Context, chat api.Chat) error {
	if s.projects == nil {
		return fmt.Errorf("chat %s is in project %q but projects are not available on this daemon: %w", chat.ID, chat.Project, errdefs.ErrConflict)
	}
	return s.projects.CheckChatRun(ctx, chat)
}

// Cancel cancels the chat's run (S29); runhub.ErrNoActiveRun when none.
func (s *Service) Cancel(chatID string) error { return s.hub.Cancel(chatID, errCancelledByUser) }

// Respond routes an explicit interaction response to the chat's run (S21).
func (s *Service) Respond(chatID string, resp providers.InteractionResponse) error {
	if resp.ID == "" || !json.Valid([]byte(resp.ID)) {
		return errdefs.InvalidArgument("interactionId: must be the JSON text of the request id, got %q", resp.ID)
	}
	if (len(resp.Result) == 0) == (len(resp.Error) == 0) {
		return errdefs.InvalidArgument("exactly one of result or error must be set")
	}
	return s.hub.Respond(chatID, resp)
}

// enter reserves a run's place in wg unless the service is stopping.
func (s *Service) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping.Load() {
		return false
	}
	s.wg.Add(1)
	return true
}

// Shutdown refuses new prompts (503 unavailable), cancels every run and
// waits (until ctx ends) for the runs to persist their terminal events.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping.Store(true) // no wg.Add after this: enter checks it under mu
	s.mu.Unlock()
	s.guard.Close()
	if n := s.detachShimmed(); n > 0 {
		s.log.Info("runs left running under their shims for the next daemon", "runs", n)
	}
	s.hub.CancelAll(errDaemonStopping)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for runs to stop: %w", ctx.Err())
	}
}

// RecoverInterrupted gives every chat still marked running (a run that was
// in flight when the daemon stopped) a persisted system/daemon_restarted
// and a terminal error event, and clears its running mark (S5), in one
// transaction per chat: running it again adds nothing. A chat whose repair
// cannot be written (a full disk) is logged, counted in the
// remoted_chats_unrepaired metric and retried while the daemon serves; it
// never fails start-up. Only an unreadable chat list is an error. Then it
// starts the prompts queued before the restart (StartQueued). Call it
// before serving.
func (s *Service) RecoverInterrupted() error {
	chats, err := s.store.Chats()
	if err != nil {
		return fmt.Errorf("list chats for restart recovery: %w", err)
	}
	for _, c := range chats {
		if !c.Running || s.hub.Running(c.ID) {
			continue
		}
		if rec, ok, err := s.store.Run(c.ID); err == nil && ok && s.reattach(c, rec) {
			continue
		}
		s.guard.RecoverChat(c)
	}
	return s.StartQueued()
}

// Unrepaired returns the chats whose last run's end (restart recovery, or
// a run stopped by a full disk) is not stored yet; it is retried every
// storage check and before the chat's next prompt.
func (s *Service) Unrepaired() []string { return s.guard.Unrepaired() }

// emitter turns a run's agent events into appended chat events, in emit
// order, and lets the run wait until all of them are durable.
type emitter struct {
	s        *Service
	chatID   string
	provider providers.ProviderID
	chat     api.Chat // as the run started, for usage records
	runID    string
	watch    *runWatch
	mu       sync.Mutex
	pending  sync.WaitGroup
	closed   bool

	// stop ends the run (its context's cancel). When an append fails,
	// broken is set (by the failing append's callback, before any later
	// commit of this run asks) and nothing more of the run is stored; the
	// run ends with a storage error (storageguard.Guard.EndRun).
	stop     context.CancelCauseFunc
	broken   atomic.Bool
	failMu   sync.Mutex
	failErr  error
	limit    int64  // event bytes the run may store; 0 = unbounded
	limitMsg string // the run's error when it needs more
	used     int64
	capped   bool
	// lastType is the type of the newest event appended for this run.
	lastType string
	// held is the run's terminal event (complete or error) while nothing
	// follows it: it is stored with the end of the chat's running mark in
	// one transaction (endRunning), so a restart never finds a run that
	// stored its end still marked running. A later event flushes it.
	held     *api.Event
	heldMark *store.RunMark

	// cursor positions the provider's events; markRun is the run id their
	// positions are stored under (reattach.go). shimmed is set once the
	// run's CLI runs under a shim; detached once the daemon let go of it
	// (stopping): nothing more of the run is stored by this daemon.
	cursor   *providers.Cursor
	markRun  string
	shimmed  atomic.Bool
	detached bool
}

// detach stops storing anything of the run; false when the run already
// ended (its events are being stored with its end).
func (e *emitter) detach() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.detached = true
	return true
}

// isDetached reports whether detach was called.
func (e *emitter) isDetached() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.detached
}

// finished reports whether the run's newest event is a terminal one
// (complete or error), as docs/api.md requires of every run's last event.
func (e *emitter) finished() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastType == api.EventComplete || e.lastType == api.EventError
}

func (e *emitter) emit(ev providers.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		e.s.log.Warn("event emitted after the run returned; dropped", "chat", e.chatID, "type", ev.Type)
		return
	}
	pos, replayed := e.cursor.Next()
	if e.detached {
		return // the next daemon stores it
	}
	e.watch.saw(ev)
	if replayed {
		return // stored before the restart
	}
	if ev.Type == providers.EventSessionUpdated && ev.SessionID != "" {
		provider := e.provider
		if ev.Provider != "" {
			provider = ev.Provider
		}
		_, err := e.s.store.UpdateChat(e.chatID, func(c *api.Chat) error {
			SetSession(c, string(provider), ev.SessionID)
			c.ForkPending = false
			if c.Model == "" {
				c.Model = ev.Model
			}
			return nil
		})
		if err != nil {
			e.s.log.Error("save session", "chat", e.chatID, "provider", provider, "error", err)
		}
	}
	if ev.Type == providers.EventRunCompleted && len(ev.Usage) > 0 {
		e.s.recordUsage(e, ev.Usage)
	}
	ce, ok := projection.Event(ev, e.provider, time.Now())
	if !ok || e.capped || e.broken.Load() {
		return
	}
	if n := eventjson.Size(ce); e.limit > 0 && e.used+n > e.limit {
		e.capped = true
		e.stop(&runStopped{msg: e.limitMsg})
		return
	}
	var mark *store.RunMark
	if e.markRun != "" {
		mark = &store.RunMark{RunID: e.markRun, Line: pos.Line, Index: pos.Index + 1}
	}
	e.appendLocked(ce, mark)
}

func (e *emitter) appendLocked(ev api.Event, mark *store.RunMark) {
	e.lastType = ev.Type
	e.used += eventjson.Size(ev)
	if h := e.held; h != nil {
		e.held = nil
		e.storeLocked(*h, e.heldMark)
	}
	if ev.Type == api.EventComplete || ev.Type == api.EventError {
		e.held, e.heldMark = &ev, mark
		return
	}
	e.storeLocked(ev, mark)
}

// storeLocked appends ev now, group-committed, with the run's position
// after it (mark, when not nil) in the same transaction.
func (e *emitter) storeLocked(ev api.Event, mark *store.RunMark) {
	e.pending.Add(1)
	e.s.hub.AppendAsyncAt(e.chatID, ev, mark, func() bool { return !e.broken.Load() }, func(_ api.Event, err error) {
		if err != nil && !errors.Is(err, store.ErrSkipped) && e.broken.CompareAndSwap(false, true) {
			e.failMu.Lock()
			e.failErr = err
			e.failMu.Unlock()
			e.stop(&runStopped{msg: storageguard.FailedMessage(err), storage: true})
		}
		e.pending.Done()
	})
}

// failure returns the first append failure, or nil.
func (e *emitter) failure() error {
	e.failMu.Lock()
	defer e.failMu.Unlock()
	return e.failErr
}

// daemonEvent appends an event of the daemon's own.
func (e *emitter) daemonEvent(ev api.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.broken.Load() || e.detached {
		return // the run ends with its storage error instead, or the next daemon ends it
	}
	if ev.T == 0 {
		ev.T = time.Now().UnixMilli()
	}
	e.appendLocked(ev, nil)
}

// close stops accepting provider events, waits until every appended
// event is durable and broadcast, and returns the held terminal event
// (nil when none), which the caller stores with the run's end.
func (e *emitter) close() *api.Event {
	e.mu.Lock()
	e.closed = true
	held := e.held
	e.held = nil
	if e.detached {
		held = nil // the next daemon stores the run's end
	}
	e.mu.Unlock()
	e.pending.Wait()
	return held
}

// endRunning clears the chat's running mark and stores the run's terminal
// event (when it has one) in one transaction, then broadcasts it.
func (s *Service) endRunning(chatID string, terminal *api.Event) error {
	_, evs, err := s.store.UpdateChatAndAppend(chatID, func(c *api.Chat) ([]api.Event, error) {
		c.Running = false
		c.LastMessageAt = time.Now()
		if terminal == nil {
			return nil, nil
		}
		return []api.Event{*terminal}, nil
	})
	if err != nil {
		return fmt.Errorf("store the end of the run in chat %s: %w", chatID, err)
	}
	s.hub.Stored(chatID, evs...)
	return nil
}

// turn is one prompt's run as it goes from Start to the provider: the
// run's hub handle, the chat as the run started (or after a lost session
// was cleared), the provider with its capabilities, the prompt and the seq
// of its stored user event.
type turn struct {
	run     *runhub.Run
	chat    api.Chat
	p       providers.Provider
	caps    providers.Capabilities
	in      Input
	userSeq int64
	// attach is the stored record of a run re-attached after a restart;
	// nil for a fresh run.
	attach *store.RunRecord

	log hclog.Logger
	em  *emitter
	rs  *providers.RunSlot
}

// run runs the turn in the background under the hub's run lock and stores
// everything it emits; it ends the run (and its wg slot) when it returns.
func (s *Service) run(ctx context.Context, t *turn) {
	defer s.wg.Done()
	run, chat, p := t.run, t.chat, t.p
	log := s.log.With("chat", chat.ID, "run", run.ID, "provider", chat.Provider)
	idle := time.Duration(s.idleTimeout.Load())
	watch := newRunWatch(idle, run.Cancel)
	em := &emitter{s: s, chatID: chat.ID, provider: p.ID(), chat: chat, runID: run.ID, watch: watch, stop: run.Cancel}
	em.limit, em.limitMsg = s.guard.Budget(chat.ID)
	t.log, t.em = log, em
	started := time.Now()
	defer func() {
		s.untrack(t)
		terminal := em.close()
		if em.isDetached() {
			s.hub.FinishRun(run)
			log.Info("run detached: it goes on under its shim until the next daemon re-attaches it")
			return
		}
		if ferr := em.failure(); ferr != nil {
			s.metrics.RunFailed()
			log.Error("run stopped: its events could not be stored", "error", ferr)
			s.guard.EndRun(chat.ID, storageguard.FailedMessage(ferr))
		} else if err := s.endRunning(chat.ID, terminal); err != nil {
			log.Error("store the end of the run", "error", err)
			if terminal != nil && terminal.Type == api.EventError {
				s.guard.EndRun(chat.ID, terminal.Message)
			} else {
				s.guard.ClearRunning(chat.ID, err)
			}
		}
		s.mu.Lock()
		rs := t.rs
		s.mu.Unlock()
		if rs != nil {
			rs.Release() // the run's end is stored (or will never be): the shim may go
		}
		s.hub.FinishRun(run)
		run.Cancel(nil)
		log.Debug("run finished", "duration", time.Since(started))
		s.startNextQueued(chat.ID)
	}()

	var (
		req providers.RunRequest
		err error
	)
	if t.attach != nil {
		req, err = decodeRequest(t.attach.Request)
		req.InteractionResponses = run.Interactions()
		if err == nil {
			t.rs, err = attachSlot(*t.attach)
		}
		if err == nil {
			em.shimmed.Store(true)
		}
	} else {
		req, err = s.request(t)
		ctx = s.checkpointTurn(ctx, chat, t.userSeq, em)
		if err == nil {
			t.rs, err = s.startSlot(t, run.ID, req)
		}
	}
	if t.rs != nil {
		em.cursor, em.markRun = t.rs.Cursor, t.rs.RunID
		ctx = providers.WithRunSlot(ctx, t.rs)
	}
	s.track(t)
	if err == nil {
		err = p.Run(ctx, req, em.emit)
		if errors.Is(err, providers.ErrSessionNotFound) && req.ResumeID != "" && ctx.Err() == nil {
			err = s.recoverSession(ctx, t, req.ResumeID)
		}
	}
	watch.stop()
	s.endTurn(ctx, t, err, idle)
}

// endTurn persists how the turn ended: the daemon's own error or complete
// event when the provider left none, and the run's metrics.
func (s *Service) endTurn(ctx context.Context, t *turn, err error, idle time.Duration) {
	log, em, p := t.log, t.em, t.p
	cause := context.Cause(ctx)
	var stopped *runStopped
	switch {
	case errors.Is(cause, providers.ErrDetached) || em.isDetached():
		log.Info("run detached from its shim: the daemon stops")
	case t.attach != nil && shimGone(err):
		data, _ := json.Marshal(map[string]string{"provider": t.chat.Provider})
		em.daemonEvent(api.Event{Type: api.EventSystem, Subtype: api.SubtypeDaemonRestarted, Data: data})
		em.daemonEvent(api.Event{Type: api.EventError, Message: msgShimGone + ": " + err.Error()})
		log.Warn("run interrupted by the restart: its shim is gone", "error", err)
	case errors.As(cause, &stopped):
		if !stopped.storage { // a storage failure's error is written when the run ends
			s.metrics.RunFailed()
			em.daemonEvent(api.Event{Type: api.EventError, Message: stopped.msg})
			log.Warn("run stopped", "reason", stopped.msg)
		}
	case errors.Is(cause, errDaemonStopping):
		em.daemonEvent(api.Event{Type: api.EventError, Message: msgInterruptedByShutdown})
		log.Info("run interrupted by shutdown")
	case errors.Is(cause, errIdleTimeout):
		s.metrics.RunFailed()
		em.daemonEvent(api.Event{Type: api.EventError, Message: idleMessage(p.ID(), idle)})
		log.Warn("run stopped: no output", "idle_timeout", idle)
	case ctx.Err() != nil:
		// A cancel is not an error: a run the provider left without a
		// terminal event (Codex stops at turn_status interrupted) ends
		// with complete, status interrupted, so clients leave "streaming".
		if !em.finished() {
			em.daemonEvent(api.Event{Type: api.EventComplete, Provider: string(p.ID()), Status: statusInterrupted})
		}
		log.Info("run cancelled")
	case err == nil && !em.watch.finishedTurn(), errors.Is(err, providers.ErrUnfinishedTurn):
		s.metrics.RunFailed()
		em.daemonEvent(api.Event{Type: api.EventError, Message: unfinishedMessage(p.ID(), err)})
		log.Warn("provider exited without finishing the turn", "error", err)
	case err == nil:
	case errors.Is(err, providers.ErrRunFailed):
		s.metrics.RunFailed()
		log.Info("run failed", "error", err)
	default:
		s.metrics.RunFailed()
		em.daemonEvent(api.Event{Type: api.EventError, Message: fmt.Sprintf("%s exit: %v", p.ID(), err)})
		log.Warn("provider exited with an error", "error", err)
	}
}

// recoverSession implements S28: clear only this provider's session (lost)
// and the pending fork, persist system/session_recovered, rebuild the
// visible transcript and retry exactly once: the cleared chat has no
// session to resume.
func (s *Service) recoverSession(ctx context.Context, t *turn, lost string) error {
	chat, em := t.chat, t.em
	t.log.Info("saved session not found; retrying from visible history", "session", lost)
	updated, err := s.store.UpdateChat(chat.ID, func(c *api.Chat) error {
		SetSession(c, chat.Provider, "")
		c.ForkPending = false
		return nil
	})
	if err != nil {
		return fmt.Errorf("clear lost session: %w", err)
	}
	t.chat = updated
	data, _ := json.Marshal(map[string]string{"provider": chat.Provider, "sessionId": lost})
	em.daemonEvent(api.Event{Type: api.EventSystem, Subtype: api.SubtypeSessionRecovered, Data: data})
	em.watch.retry()
	if t.attach != nil { // a re-attached run did not ask for them at start-up
		caps, err := t.p.Capabilities(ctx, providers.CapabilityRequest{ProjectID: chat.Project, Cached: true})
		if err != nil {
			return fmt.Errorf("%s capabilities: %w", chat.Provider, err)
		}
		t.caps = caps
	}
	req, err := s.request(t)
	if err != nil {
		return err
	}
	if old := t.rs; old != nil { // written only by this goroutine
		// The retry is a new CLI process: a run directory of its own.
		old.Release()
		rs, err := s.startSlot(t, t.run.ID+"-retry", req)
		if err != nil {
			return err
		}
		em.mu.Lock()
		em.cursor, em.markRun = rs.Cursor, rs.RunID
		em.mu.Unlock()
		s.mu.Lock()
		t.rs = rs
		s.mu.Unlock()
		ctx = providers.WithRunSlot(ctx, rs)
	}
	return t.p.Run(ctx, req, em.emit)
}

// request builds the turn's RunRequest (S6, S7, S27): it resumes the chat's
// saved session when the provider can, else carries the visible history.
func (s *Service) request(t *turn) (providers.RunRequest, error) {
	chat, caps, in := t.chat, t.caps, t.in
	req := providers.RunRequest{
		Provider:             providers.ProviderID(chat.Provider),
		ConversationID:       chat.ID,
		RunID:                t.run.ID,
		Cwd:                  chat.Cwd,
		Model:                chat.Model,
		Mode:                 providers.ModeDefault,
		ProjectID:            chat.Project,
		ProjectUID:           chat.ProjectID,
		Skills:               slices.Clone(in.Skills),
		EnableBrowser:        caps.Browser && slices.Contains(in.Skills, "browser"),
		EnableScheduleTools:  caps.Schedule && slices.Contains(in.Skills, "scheduled-tasks"),
		InteractionResponses: t.run.Interactions(),
		Preferences:          providers.RunPreferences{ApprovalPolicy: chat.ApprovalPolicy, ReasoningEffort: chat.ReasoningEffort},
	}
	if in.Mode != "" {
		req.Mode = providers.RunMode(in.Mode)
	}
	if caps.Resume {
		req.ResumeID = SessionID(chat, chat.Provider)
		req.Fork = req.ResumeID != "" && chat.ForkPending && caps.Fork
	}
	prompt := promptWithSkills(caps.Skills, in.Skills, skillsDirFor(chat, s.skillsDir), in.Text)
	if req.ResumeID == "" {
		history, err := s.history(chat.ID, t.userSeq)
		if err != nil {
			return req, err
		}
		prompt = promptWithHistory(history, prompt, s.transcriptBytes)
	}
	req.Prompt = prompt
	return req, nil
}

// history returns the user and assistant_text events before seq, keeping
// only as many of the newest as the transcript bound can use (plus slack
// for the transcript's labels), so memory stays bounded on long chats.
func (s *Service) history(chatID string, before int64) ([]api.Event, error) {
	var out []api.Event
	keep := 2*s.transcriptBytes + 4096
	total := 0
	err := s.store.Events(chatID, 0, 0, func(ev api.Event) error {
		if ev.Seq >= before {
			return errStopWalk
		}
		if ev.Type == api.EventUser || ev.Type == api.EventAssistantText {
			out = append(out, api.Event{Type: ev.Type, Text: ev.Text})
			total += len(ev.Text)
			for len(out) > 1 && total-len(out[0].Text) > keep {
				total -= len(out[0].Text)
				out = out[1:]
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopWalk) {
		return nil, fmt.Errorf("read history of chat %s: %w", chatID, err)
	}
	return out, nil
}

var errStopWalk = errors.New("stop walk")

// titleFromPrompt is a chat's default title: the prompt's first line, at
// most 60 characters.
func titleFromPrompt(text string) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = strings.TrimSpace(text[:i])
	}
	if utf8.RuneCountInString(text) > 60 {
		r := []rune(text)
		return string(r[:60]) + "..."
	}
	return text
}
