// Package runhub is the run hub: the in-memory, one-run-per-chat locks with
// their cancel handles, the append-then-broadcast path of chat events, and
// followers served a replay then live events with no gap and no duplicate.
// Nothing in it survives a restart.
//
// It owns no transport: it must never import net/http, the daemon's HTTP
// layer (package daemon), the prompt service or any provider adapter. It
// builds on api, providers (interaction responses), the store (through its
// Store interface, and store.ErrSkipped), metrics and errdefs.
package runhub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/metrics"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/providers"
)

// Errors of the hub. The HTTP layer answers the first two with fixed texts.
var (
	// ErrPromptAlreadyRunning means the chat already has a run (S2); it
	// answers 409 prompt_already_running.
	ErrPromptAlreadyRunning = errdefs.New(errdefs.ErrConflict, "a previous prompt is still running — cancel first")
	// ErrNoActiveRun means a cancel or interaction response named a chat
	// with no run; it answers 404 not_found.
	ErrNoActiveRun = errdefs.New(errdefs.ErrNotFound, "no prompt is currently running")
	// ErrSlowSubscriber means a follower fell more than its queue behind
	// the live stream and was dropped; it may resume from its last seq.
	ErrSlowSubscriber = errors.New("subscriber too slow to keep up")
)

// Store is what the hub needs of the store: appends, paged event reads and
// the announcement of every append in commit order, which the hub
// broadcasts. *store.Store implements it.
type Store interface {
	// OnAppend adds fn to the functions called, in commit order, with the
	// events of every committed append (store OnAppend).
	OnAppend(fn func(chatID string, evs []api.Event))
	// AppendAsyncAt stores ev (only if cond, when not nil) with the run
	// position mark (when not nil) in one transaction.
	AppendAsyncAt(chatID string, ev api.Event, mark *store.RunMark, cond func() bool, done func(api.Event, error))
	Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error
	EventsRaw(chatID string, afterSeq int64, limit int, fn func(seq int64, raw []byte) error) error
}

// DefaultSubscriberQueue is how many live events a subscriber may lag
// behind before it is dropped. It is at least the store's largest group
// commit (8192 events), so one commit's burst alone never drops an idle
// follower; slots hold pointers, so a queue costs 64 KiB.
const DefaultSubscriberQueue = 8192

// replayPage bounds how many events one store read holds, so a slow reader
// never keeps a store transaction open while it writes to the network.
const replayPage = 512

// interactionQueue bounds the interaction responses waiting for a run.
const interactionQueue = 16

// Hub is the run hub: it owns the in-memory, one-run-per-chat locks with
// their cancel handles (S2, S5), appends chat events to the store and only
// then broadcasts them (S4), and serves subscribers a replay followed by
// live events with no gap and no duplicate. Nothing in it survives a
// restart.
type Hub struct {
	store    Store
	log      hclog.Logger
	metrics  *metrics.Metrics
	queueLen int

	mu    sync.Mutex
	rooms map[string]*room
	// observers see every stored event after its broadcast; set before use.
	observers []func(chatID string, ev api.Event)
}

// Observe adds fn to the functions called with every event once it is
// stored and broadcast. fn runs on the store's commit path and must not
// block. Observe must be called before the hub is used.
func (h *Hub) Observe(fn func(chatID string, ev api.Event)) {
	h.observers = append(h.observers, fn)
}

type room struct {
	subs map[*subscriber]struct{}
	run  *Run
}

// Run is one active run's in-memory handle.
type Run struct {
	ID      string
	ChatID  string
	Started time.Time
	cancel  context.CancelCauseFunc
	// interactions carries explicit client answers to the provider (S21).
	interactions chan providers.InteractionResponse
}

// Cancel cancels the run's context with cause (nil: context.Canceled).
func (r *Run) Cancel(cause error) { r.cancel(cause) }

// Interactions is the channel the run's provider reads explicit client
// answers from (Hub.Respond sends on it).
func (r *Run) Interactions() chan providers.InteractionResponse { return r.interactions }

type subscriber struct {
	ch      chan *api.Event
	dropped chan struct{}
	once    sync.Once
}

func (s *subscriber) drop() { s.once.Do(func() { close(s.dropped) }) }

// NewHub returns a hub over st. queueLen <= 0 selects
// DefaultSubscriberQueue; metrics may be nil.
func NewHub(st Store, log hclog.Logger, m *metrics.Metrics, queueLen int) *Hub {
	if queueLen <= 0 {
		queueLen = DefaultSubscriberQueue
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	h := &Hub{store: st, log: log, metrics: m, queueLen: queueLen, rooms: map[string]*room{}}
	st.OnAppend(h.broadcastAppended)
	return h
}

// broadcastAppended broadcasts events as the store commits them. The store
// calls it in commit order, before any later commit is written, so a
// follower gets a chat's events in seq order whichever goroutine stored
// them: a caller that broadcast after its own transaction returned could
// be overtaken by the group committer's next event, and the follower,
// which skips every seq it has passed, would miss the earlier one.
func (h *Hub) broadcastAppended(chatID string, evs []api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rooms[chatID]; r != nil {
		for _, ev := range evs {
			h.broadcastLocked(r, ev)
		}
	}
}

func (h *Hub) roomLocked(chatID string) *room {
	r := h.rooms[chatID]
	if r == nil {
		r = &room{subs: map[*subscriber]struct{}{}}
		h.rooms[chatID] = r
	}
	return r
}

func (h *Hub) gcLocked(chatID string) {
	if r := h.rooms[chatID]; r != nil && r.run == nil && len(r.subs) == 0 {
		delete(h.rooms, chatID)
	}
}

// StartRun takes the chat's run lock. A second start while a run is active
// fails with ErrPromptAlreadyRunning. On success every subscriber receives
// the transient {"type":"sync","running":true}.
func (h *Hub) StartRun(chatID string, cancel context.CancelCauseFunc) (*Run, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.roomLocked(chatID)
	if r.run != nil {
		return nil, fmt.Errorf("chat %s: %w", chatID, ErrPromptAlreadyRunning)
	}
	r.run = &Run{ID: NewID(8), ChatID: chatID, Started: time.Now(), cancel: cancel, interactions: make(chan providers.InteractionResponse, interactionQueue)}
	h.broadcastLocked(r, syncEvent(true))
	h.metrics.RunStarted()
	return r.run, nil
}

// FinishRun releases the run lock and broadcasts the closing sync. Callers
// must have waited for the run's appends, so the sync follows them.
func (h *Hub) FinishRun(run *Run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[run.ChatID]
	if r == nil || r.run != run {
		return
	}
	r.run = nil
	h.broadcastLocked(r, syncEvent(false))
	h.gcLocked(run.ChatID)
	h.metrics.RunFinished()
}

// Active returns the active runs (copies), by chat id.
func (h *Hub) Active() map[string]Run {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Run{}
	for id, r := range h.rooms {
		if r.run != nil {
			out[id] = Run{ID: r.run.ID, ChatID: r.run.ChatID, Started: r.run.Started}
		}
	}
	return out
}

// Running reports whether chatID has an active run.
func (h *Hub) Running(chatID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[chatID]
	return r != nil && r.run != nil
}

// Cancel cancels the chat's active run with cause, or returns
// ErrNoActiveRun.
func (h *Hub) Cancel(chatID string, cause error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[chatID]
	if r == nil || r.run == nil {
		return fmt.Errorf("chat %s: %w", chatID, ErrNoActiveRun)
	}
	r.run.cancel(cause)
	return nil
}

// CancelAll cancels every active run with cause (daemon shutdown).
func (h *Hub) CancelAll(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.rooms {
		if r.run != nil {
			r.run.cancel(cause)
		}
	}
}

// Respond routes an interaction response to the chat's active run (S21).
// It fails with ErrNoActiveRun when nothing runs and with errdefs.ErrConflict when
// the run has too many unanswered responses queued.
func (h *Hub) Respond(chatID string, resp providers.InteractionResponse) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[chatID]
	if r == nil || r.run == nil {
		return fmt.Errorf("chat %s: %w", chatID, ErrNoActiveRun)
	}
	select {
	case r.run.interactions <- resp:
		return nil
	default:
		return fmt.Errorf("chat %s: too many pending interaction responses: %w", chatID, errdefs.ErrConflict)
	}
}

// AppendAsync appends ev to the chat's log (group-committed by the store)
// and, once it is durable, broadcasts the stored event to the chat's
// subscribers and then calls done (which may be nil). Per chat, done and
// the broadcasts follow call order.
func (h *Hub) AppendAsync(chatID string, ev api.Event, done func(api.Event, error)) {
	h.AppendAsyncIf(chatID, ev, nil, done)
}

// AppendAsyncIf is AppendAsync storing ev only if cond (nil: always),
// asked inside the commit, returns true (store AppendAsyncIf); a refused
// event is not broadcast and done gets an error wrapping store.ErrSkipped.
func (h *Hub) AppendAsyncIf(chatID string, ev api.Event, cond func() bool, done func(api.Event, error)) {
	h.AppendAsyncAt(chatID, ev, nil, cond, done)
}

// AppendAsyncAt is AppendAsyncIf storing mark, the position of the chat's
// run after ev, in the transaction that stores ev (store AppendAsyncAt).
func (h *Hub) AppendAsyncAt(chatID string, ev api.Event, mark *store.RunMark, cond func() bool, done func(api.Event, error)) {
	h.store.AppendAsyncAt(chatID, ev, mark, cond, func(stored api.Event, err error) {
		switch {
		case errors.Is(err, store.ErrSkipped):
		case err != nil:
			h.log.Error("append failed", "chat", chatID, "type", ev.Type, "error", err)
			h.metrics.AppendFailed()
		default:
			h.metrics.EventAppended()
			for _, fn := range h.observers {
				fn(chatID, stored)
			}
		}
		if done != nil {
			done(stored, err)
		}
	})
}

// Append appends ev, waits until it is durable and broadcast, and returns
// the stored event.
func (h *Hub) Append(chatID string, ev api.Event) (api.Event, error) {
	type result struct {
		ev  api.Event
		err error
	}
	ch := make(chan result, 1)
	h.AppendAsync(chatID, ev, func(e api.Event, err error) { ch <- result{e, err} })
	res := <-ch
	if res.err != nil {
		return api.Event{}, fmt.Errorf("append %s event to chat %s: %w", ev.Type, chatID, res.err)
	}
	return res.ev, nil
}

// Stored announces events the caller stored itself (in a transaction of
// its own, e.g. a run's end with its chat): each is counted and handed to
// the observers, as AppendAsync does for its events. The store has
// broadcast them already, in commit order.
func (h *Hub) Stored(chatID string, evs ...api.Event) {
	for _, ev := range evs {
		h.metrics.EventAppended()
		for _, fn := range h.observers {
			fn(chatID, ev)
		}
	}
}

// Broadcast sends ev to every subscriber of chatID without storing it.
// Transient events (sync, acks) use it directly; a subscriber whose queue is
// full is dropped instead of slowing the sender.
func (h *Hub) Broadcast(chatID string, ev api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rooms[chatID]; r != nil {
		h.broadcastLocked(r, ev)
	}
}

func (h *Hub) broadcastLocked(r *room, ev api.Event) {
	p := &ev // shared read-only by every subscriber
	for s := range r.subs {
		select {
		case s.ch <- p:
		default:
			delete(r.subs, s)
			s.drop()
			h.metrics.SubscriberDropped()
		}
	}
}

// Subscribers reports how many followers chatID has (for tests and info).
func (h *Hub) Subscribers(chatID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rooms[chatID]; r != nil {
		return len(r.subs)
	}
	return 0
}

// Follow replays every stored event of chatID with seq > since, sends
// {"type":"sync","running":..}, then live events until ctx ends (nil) or
// send fails (its error). Every sync it sends carries LastSeq, the seq of
// the last event it sent before it (docs/api.md). The subscription is
// registered before the replay is read and live events are de-duplicated
// by seq, so nothing is missed or
// repeated even while a run streams. A follower that falls more than the
// queue length behind gets an error wrapping ErrSlowSubscriber and can
// resume with since = the last seq it received.
func (h *Hub) Follow(ctx context.Context, chatID string, since int64, send func(api.Event) error) error {
	return h.follow(ctx, chatID, since, nil, send)
}

// FollowRaw is Follow handing each replayed (stored) event to replay as
// its wire JSON, byte for byte json.Marshal of the event, without decoding
// it (store EventsRaw); the sync and live events still go to send.
func (h *Hub) FollowRaw(ctx context.Context, chatID string, since int64, replay func(seq int64, raw []byte) error, send func(api.Event) error) error {
	return h.follow(ctx, chatID, since, replay, send)
}

// Sync tells every follower of chatID the chat's state now, with
// {"type":"sync","running":..}: callers that store an event outside a run
// (a queued prompt, a restored checkpoint...) send it after the event, so
// a client that took the event for run activity learns whether a run is
// active (docs/api.md).
func (h *Hub) Sync(chatID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rooms[chatID]; r != nil {
		h.broadcastLocked(r, syncEvent(r.run != nil))
	}
}

func syncEvent(running bool) api.Event {
	return api.Event{Type: api.EventSync, Running: running, T: time.Now().UnixMilli()}
}

// Subscription is one follower registered with the hub before it follows:
// Sync sends it alone a sync in order with what is broadcast.
type Subscription struct {
	h       *Hub
	chatID  string
	sub     *subscriber
	running bool // at registration, for Follow's first sync
	once    sync.Once
}

// Subscribe registers a follower of chatID; live events queue for it from
// now on. Follow it, and Close it when done.
func (h *Hub) Subscribe(chatID string) *Subscription {
	sub := &subscriber{ch: make(chan *api.Event, h.queueLen), dropped: make(chan struct{})}
	h.mu.Lock()
	r := h.roomLocked(chatID)
	r.subs[sub] = struct{}{}
	running := r.run != nil
	h.mu.Unlock()
	h.metrics.SubscriberAdded()
	return &Subscription{h: h, chatID: chatID, sub: sub, running: running}
}

// Close unregisters the follower.
func (s *Subscription) Close() {
	s.once.Do(func() {
		h := s.h
		h.mu.Lock()
		if r := h.rooms[s.chatID]; r != nil {
			delete(r.subs, s.sub)
		}
		h.gcLocked(s.chatID)
		h.mu.Unlock()
		h.metrics.SubscriberRemoved()
	})
}

// Sync queues for this follower only a sync carrying the chat's state
// now: the answer to a prompt this follower's client sent that did not
// start. It is queued behind every broadcast before it, so a client never
// reads "idle" after another run's running:true (docs/api.md).
func (s *Subscription) Sync() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[s.chatID]
	if r == nil {
		return
	}
	if _, ok := r.subs[s.sub]; !ok {
		return // dropped: it reconnects and gets a sync after its replay
	}
	p := new(api.Event)
	*p = syncEvent(r.run != nil)
	select {
	case s.sub.ch <- p:
	default:
		delete(r.subs, s.sub)
		s.sub.drop()
		h.metrics.SubscriberDropped()
	}
}

// FollowRaw is Hub.FollowRaw for this subscription (a nil replay replays
// decoded events through send). It may be called once.
func (s *Subscription) FollowRaw(ctx context.Context, since int64, replay func(seq int64, raw []byte) error, send func(api.Event) error) error {
	return s.h.followSub(ctx, s, since, replay, send)
}

// follow is Follow and FollowRaw: a nil replay replays decoded events
// through send.
func (h *Hub) follow(ctx context.Context, chatID string, since int64, replay func(seq int64, raw []byte) error, send func(api.Event) error) error {
	s := h.Subscribe(chatID)
	defer s.Close()
	return h.followSub(ctx, s, since, replay, send)
}

func (h *Hub) followSub(ctx context.Context, s *Subscription, since int64, replay func(seq int64, raw []byte) error, send func(api.Event) error) error {
	chatID, sub, running := s.chatID, s.sub, s.running

	var (
		last    int64
		stopped bool
		err     error
	)
	if replay == nil {
		last, stopped, err = replayPages(ctx, chatID, since, func(after int64, fn func(api.Event) error) error {
			return h.store.Events(chatID, after, replayPage, fn)
		}, func(ev api.Event) int64 { return ev.Seq }, send)
	} else {
		last, stopped, err = replayPages(ctx, chatID, since, func(after int64, fn func(rawEvent) error) error {
			return h.store.EventsRaw(chatID, after, replayPage, func(seq int64, raw []byte) error { return fn(rawEvent{seq, raw}) })
		}, func(ev rawEvent) int64 { return ev.seq }, func(ev rawEvent) error { return replay(ev.seq, ev.raw) })
	}
	if err != nil || stopped {
		return err
	}
	// sent is the seq of the last event sent: every sync covers it.
	var sent int64
	if last > since {
		sent = last
	}
	first := syncEvent(running)
	first.LastSeq = sent
	if err := send(first); err != nil {
		return err
	}
	deliver := func(ev api.Event) error {
		if ev.Seq > 0 {
			if ev.Seq <= last {
				return nil
			}
			last, sent = ev.Seq, ev.Seq
		}
		if ev.Type == api.EventSync {
			ev.LastSeq = sent
		}
		return send(ev)
	}
	// drain delivers what is already queued, e.g. a run's last events and
	// closing sync published just before a shutdown ended ctx.
	drain := func() error {
		for {
			select {
			case ev := <-sub.ch:
				if err := deliver(*ev); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return drain()
		case ev := <-sub.ch:
			if err := deliver(*ev); err != nil {
				return err
			}
		case <-sub.dropped:
			if err := drain(); err != nil {
				return err
			}
			return fmt.Errorf("chat %s: %w; resume with since=%d", chatID, ErrSlowSubscriber, last)
		}
	}
}

// rawEvent is one stored event as wire JSON.
type rawEvent struct {
	seq int64
	raw []byte
}

// replayPages reads chatID's stored events after since page by page with
// read (at most replayPage per call, so no store read waits on the
// network) and hands each to send. It returns the last seq sent, and
// stopped when ctx ended between pages; a read failure is wrapped, an
// error from send is returned as is.
func replayPages[T any](ctx context.Context, chatID string, since int64, read func(after int64, fn func(T) error) error, seqOf func(T) int64, send func(T) error) (last int64, stopped bool, err error) {
	last = since
	for {
		var page []T
		if err := read(last, func(ev T) error {
			page = append(page, ev)
			return nil
		}); err != nil {
			return last, false, fmt.Errorf("replay chat %s after seq %d: %w", chatID, last, err)
		}
		for _, ev := range page {
			if err := send(ev); err != nil {
				return last, false, err
			}
			last = seqOf(ev)
		}
		if len(page) < replayPage {
			return last, false, nil
		}
		if ctx.Err() != nil {
			return last, true, nil
		}
	}
}

// NewID returns n random bytes as lowercase hex.
func NewID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
