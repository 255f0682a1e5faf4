package prompt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"remote/api"
	"remote/daemon/runhub"
	"remote/daemon/storageguard"
	"remote/daemon/store"
	"remote/internal/errdefs"
)

// MaxQueued bounds the prompts one chat may have queued.
const MaxQueued = 32

// QueueBounds bound the bytes queued prompts may store ([daemon]
// max_queued_prompt_bytes, max_chat_queued_bytes, max_user_queued_bytes);
// 0 = unbounded. A prompt's size is its text with its synthetic and skill
// names; the chat's and user's totals count stored bytes.
type QueueBounds struct {
	Prompt, Chat, User int64
}

// errQueuedGone means a queued prompt was removed before it could start.
var errQueuedGone = errdefs.New(errdefs.ErrNotFound, "the queued prompt was removed")

// promptBytes is a queued prompt's size for max_queued_prompt_bytes.
func promptBytes(in Input) int64 {
	n := len(in.Text) + len(in.Synthetic)
	for _, sk := range in.Skills {
		n += len(sk)
	}
	return int64(n)
}

// Enqueue is a prompt sent with "queue": it starts at once (a run id) when
// the chat is idle with nothing queued; otherwise it is stored on the
// chat's queue with a queued event (its queue id) and started when the
// runs and prompts before it end, also across a daemon restart. A queue
// over its bounds refuses it (409 naming the bound), as does a storage
// guard that refuses the chat's owner.
func (s *Service) Enqueue(ctx context.Context, chatID string, in Input) (runID, qid string, err error) {
	if err := in.validate(); err != nil {
		return "", "", err
	}
	if err := validateSkills(in.Skills, s.skillsDir); err != nil {
		return "", "", err
	}
	chat, err := s.store.Chat(chatID)
	if err != nil {
		return "", "", fmt.Errorf("load chat %s: %w", chatID, err)
	}
	if chat.Queued == 0 {
		runID, err := s.Start(ctx, chatID, in)
		if !errors.Is(err, runhub.ErrPromptAlreadyRunning) {
			return runID, "", err
		}
	}
	if s.stopping.Load() {
		return "", "", fmt.Errorf("queue prompt in chat %s: %w", chatID, errDaemonStopping)
	}
	if n, limit := promptBytes(in), s.queue.Prompt; limit > 0 && n > limit {
		return "", "", storageRefusal{errdefs.InvalidArgument("text: a queued prompt of %d bytes is over [daemon] max_queued_prompt_bytes (%s)", n, storageguard.FormatBytes(limit))}
	}
	if err := s.guard.Space(chat.Owner); err != nil {
		return "", "", storageRefusal{err}
	}
	now := time.Now().UTC()
	q := api.QueuedPrompt{ID: runhub.NewID(6), Text: in.Text, Mode: in.Mode, Skills: slices.Clone(in.Skills), Synthetic: in.Synthetic, CreatedAt: now}
	ev := api.Event{Type: api.EventQueued, ID: q.ID, Text: q.Text, T: now.UnixMilli()}
	stored, err := s.store.PushQueued(chatID, q, ev, func(_ api.Chat, use store.QueueUse, size int64) error {
		b := s.queue
		switch {
		case use.Prompts >= MaxQueued:
			return errdefs.Conflict("chat %s already has %d queued prompts (the most allowed)", chatID, MaxQueued)
		case b.Chat > 0 && use.Bytes+size > b.Chat:
			return errdefs.Conflict("chat %s queues %s; this prompt would pass [daemon] max_chat_queued_bytes (%s)", chatID, storageguard.FormatBytes(use.Bytes), storageguard.FormatBytes(b.Chat))
		case b.User > 0 && use.OwnerBytes+size > b.User:
			return errdefs.Conflict("your chats queue %s; this prompt would pass [daemon] max_user_queued_bytes (%s)", storageguard.FormatBytes(use.OwnerBytes), storageguard.FormatBytes(b.User))
		}
		return nil
	})
	if err != nil {
		return "", "", storageRefusal{fmt.Errorf("queue prompt in chat %s: %w", chatID, err)}
	}
	s.hub.Stored(chatID, stored)
	s.hub.Sync(chatID)
	// The run may have ended between Start's refusal and the store.
	s.startNextQueued(chatID)
	return "", q.ID, nil
}

// Queue returns the chat's queued prompts in the order they will run.
func (s *Service) Queue(chatID string) ([]api.QueuedPrompt, error) {
	q, err := s.store.Queued(chatID)
	if err != nil {
		return nil, fmt.Errorf("queue of chat %s: %w", chatID, err)
	}
	return q, nil
}

// Unqueue removes a queued prompt (an unqueued event with its id);
// not_found when the chat has no queued prompt qid (it may have started).
func (s *Service) Unqueue(chatID, qid string) error {
	return s.unqueue(chatID, qid, "")
}

func (s *Service) unqueue(chatID, qid, why string) error {
	_, evs, err := s.store.TakeQueued(chatID, qid, func(c *api.Chat) ([]api.Event, error) {
		return []api.Event{{Type: api.EventUnqueued, ID: qid, Message: why, T: time.Now().UnixMilli()}}, nil
	})
	if errors.Is(err, store.ErrNotQueued) {
		return errdefs.NotFound("chat %s has no queued prompt %q", chatID, qid)
	}
	if err != nil {
		return fmt.Errorf("unqueue prompt %s: %w", qid, err)
	}
	s.hub.Stored(chatID, evs...)
	s.hub.Sync(chatID)
	return nil
}

// failQueued ends the queued prompt q, which could not start because of
// cause, as a run of its own that clients see like any other: the run
// lock (sync running:true), its user event and an error event stored in
// one transaction that takes it off the queue, then the closing sync. The
// run's last stored event is that error (docs/api.md). It fails with
// runhub.ErrPromptAlreadyRunning when another run took the chat first
// (that run starts the queue when it ends), and with errQueuedGone when q
// was removed meanwhile.
func (s *Service) failQueued(chatID string, q api.QueuedPrompt, cause error) error {
	user := api.Event{Type: api.EventUser, ID: q.ID, Text: q.Text, Synthetic: q.Synthetic}
	err := s.failedRun(chatID, user, fmt.Sprintf("the queued prompt could not start: %v", cause),
		func(fn func(*api.Chat) ([]api.Event, error)) ([]api.Event, error) {
			_, evs, err := s.store.TakeQueued(chatID, q.ID, fn)
			return evs, err
		})
	if errors.Is(err, store.ErrNotQueued) {
		return errQueuedGone
	}
	if err != nil && !errors.Is(err, runhub.ErrPromptAlreadyRunning) {
		return fmt.Errorf("end queued prompt %s that could not start: %w", q.ID, err)
	}
	return err
}

// storageRefusal marks a prompt refused by a bound on what the store
// may hold (free space, a chat's or user's bytes, the queue's bounds):
// its record (Refused) must not store what the bound refused.
type storageRefusal struct{ error }

func (e storageRefusal) Unwrap() error { return e.error }

// refusedTextBytes bounds the text a refused prompt's user event keeps
// when the refusal is about storage (a full disk, a chat, user or queue
// over its bound): the record of the refusal stays small and never stores what the
// bound refused.
const refusedTextBytes = 1 << 10

// Refused records a chat socket's prompt that could not start for a
// reason other than another run holding the chat (why is the public
// message of that refusal, cause the refusal itself) as a run of its own,
// as a queued prompt that cannot start is: the run lock (sync
// running:true), its user event and an error event saying why, then the
// closing sync. A client that re-sends a refused prompt until it is
// accepted (docs/api.md) sees it end like any other run instead of being
// refused again and again. The user event keeps the text (cut to
// maxPromptBytes, or to 1 KiB when storage refused the prompt) and a
// valid synthetic marker; nothing is recorded once the service stops.
// locked, when not nil, is called once the run
// lock is taken, before anything is stored (the socket acknowledges the
// prompt there, so its ack precedes the user event). It fails with
// runhub.ErrPromptAlreadyRunning when a run holds the chat, and with the
// store's error when the record cannot be stored.
func (s *Service) Refused(chatID string, in Input, cause error, why string, locked func()) error {
	if s.stopping.Load() { // the store closes after the runs end
		return fmt.Errorf("record a refused prompt in chat %s: %w", chatID, errDaemonStopping)
	}
	limit := maxPromptBytes
	if errors.As(cause, new(storageRefusal)) || errors.Is(cause, errdefs.ErrResourceExhausted) || errors.Is(cause, store.ErrNoSpace) {
		limit = refusedTextBytes
	}
	user := api.Event{Type: api.EventUser, Text: cutUTF8(in.Text, limit)}
	if syntheticPattern.MatchString(in.Synthetic) {
		user.Synthetic = in.Synthetic
	}
	return s.failedRun(chatID, user, "the prompt could not start: "+why,
		func(fn func(*api.Chat) ([]api.Event, error)) ([]api.Event, error) {
			if locked != nil {
				locked()
			}
			_, evs, err := s.store.UpdateChatAndAppend(chatID, fn)
			return evs, err
		})
}

// cutUTF8 returns s cut to at most n bytes at a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// failedRun stores user and an error event saying msg as a run of its
// own under the chat's run lock, through write (one transaction).
func (s *Service) failedRun(chatID string, user api.Event, msg string, write func(func(*api.Chat) ([]api.Event, error)) ([]api.Event, error)) error {
	run, err := s.hub.StartRun(chatID, func(error) {})
	if err != nil {
		return err
	}
	defer s.hub.FinishRun(run)
	now := time.Now()
	user.T = now.UnixMilli()
	evs, err := write(func(c *api.Chat) ([]api.Event, error) {
		c.LastMessageAt = now
		return []api.Event{user, {Type: api.EventError, Message: msg, T: now.UnixMilli()}}, nil
	})
	if err != nil {
		return err
	}
	s.hub.Stored(chatID, evs...)
	return nil
}

// firstQueued returns the chat's next queued prompt, if any.
func (s *Service) firstQueued(chatID string) (api.QueuedPrompt, bool) {
	q, err := s.store.Queued(chatID)
	if err != nil || len(q) == 0 {
		return api.QueuedPrompt{}, false
	}
	return q[0], true
}

// startNextQueued starts the chat's first queued prompt in the background
// when the chat has one and no run. A prompt that cannot start (its
// provider gone, its directory no longer allowed...) ends as a run of its
// own with an error saying why (failQueued), and the next one is tried.
func (s *Service) startNextQueued(chatID string) {
	if s.stopping.Load() || s.hub.Running(chatID) {
		return
	}
	q, ok := s.firstQueued(chatID)
	if !ok {
		return
	}
	if !s.enter() { // under Shutdown's wait; released when the goroutine ends
		return
	}
	go func() {
		defer s.wg.Done()
		for {
			_, err := s.start(context.Background(), chatID, Input{Text: q.Text, Mode: q.Mode, Skills: q.Skills, Synthetic: q.Synthetic}, q.ID)
			switch {
			case err == nil, errors.Is(err, runhub.ErrPromptAlreadyRunning), errors.Is(err, errDaemonStopping):
				return // it runs, or the run now active starts it when it ends
			case errors.Is(err, errQueuedGone):
			default:
				s.log.Warn("a queued prompt could not start; it ends with an error", "chat", chatID, "queued", q.ID, "error", err)
				switch ferr := s.failQueued(chatID, q, err); {
				case ferr == nil, errors.Is(ferr, errQueuedGone):
				case errors.Is(ferr, runhub.ErrPromptAlreadyRunning):
					return // that run starts the queue when it ends
				default:
					s.log.Error("end a queued prompt that could not start", "chat", chatID, "queued", q.ID, "error", ferr)
					return
				}
			}
			if q, ok = s.firstQueued(chatID); !ok || s.stopping.Load() {
				return
			}
		}
	}()
}

// StartQueued starts the first queued prompt of every idle chat that has
// one: the queue a daemon restart left (RecoverInterrupted calls it).
func (s *Service) StartQueued() error {
	chats, err := s.store.Chats()
	if err != nil {
		return fmt.Errorf("list chats for their queued prompts: %w", err)
	}
	for _, c := range chats {
		if c.Queued > 0 {
			s.startNextQueued(c.ID)
		}
	}
	return nil
}
