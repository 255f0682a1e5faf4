package prompt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"remote/api"
	"remote/daemon/runhub"
	"remote/internal/errdefs"
)

// MaxQueued bounds the prompts one chat may have queued.
const MaxQueued = 32

// errQueuedGone means a queued prompt was removed before it could start.
var errQueuedGone = errdefs.New(errdefs.ErrNotFound, "the queued prompt was removed")

// takeQueued removes the queued prompt qid from c, reporting whether it
// was there.
func takeQueued(c *api.Chat, qid string) bool {
	i := slices.IndexFunc(c.Queue, func(q api.QueuedPrompt) bool { return q.ID == qid })
	if i < 0 {
		return false
	}
	c.Queue = slices.Delete(c.Queue, i, i+1)
	if len(c.Queue) == 0 {
		c.Queue = nil
	}
	return true
}

// Enqueue is a prompt sent with "queue": it starts at once (a run id) when
// the chat is idle with nothing queued; otherwise it is stored on the
// chat's queue with a queued event (its queue id) and started when the
// runs and prompts before it end, also across a daemon restart.
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
	if len(chat.Queue) == 0 {
		runID, err := s.Start(ctx, chatID, in)
		if !errors.Is(err, runhub.ErrPromptAlreadyRunning) {
			return runID, "", err
		}
	}
	if s.stopping.Load() {
		return "", "", fmt.Errorf("queue prompt in chat %s: %w", chatID, errDaemonStopping)
	}
	now := time.Now().UTC()
	q := api.QueuedPrompt{ID: runhub.NewID(6), Text: in.Text, Mode: in.Mode, Skills: slices.Clone(in.Skills), Synthetic: in.Synthetic, CreatedAt: now}
	_, evs, err := s.store.UpdateChatAndAppend(chatID, func(c *api.Chat) ([]api.Event, error) {
		if len(c.Queue) >= MaxQueued {
			return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("chat %s already has %d queued prompts (the most allowed)", chatID, MaxQueued))
		}
		c.Queue = append(c.Queue, q)
		return []api.Event{{Type: api.EventQueued, ID: q.ID, Text: q.Text, T: now.UnixMilli()}}, nil
	})
	if err != nil {
		return "", "", fmt.Errorf("queue prompt in chat %s: %w", chatID, err)
	}
	s.hub.Stored(chatID, evs...)
	s.hub.Sync(chatID)
	// The run may have ended between Start's refusal and the store.
	s.startNextQueued(chatID)
	return "", q.ID, nil
}

// Queue returns the chat's queued prompts in the order they will run.
func (s *Service) Queue(chatID string) ([]api.QueuedPrompt, error) {
	c, err := s.store.Chat(chatID)
	if err != nil {
		return nil, fmt.Errorf("load chat %s: %w", chatID, err)
	}
	if c.Queue == nil {
		return []api.QueuedPrompt{}, nil
	}
	return c.Queue, nil
}

// Unqueue removes a queued prompt (an unqueued event with its id);
// not_found when the chat has no queued prompt qid (it may have started).
func (s *Service) Unqueue(chatID, qid string) error {
	return s.unqueue(chatID, qid, "")
}

func (s *Service) unqueue(chatID, qid, why string) error {
	_, evs, err := s.store.UpdateChatAndAppend(chatID, func(c *api.Chat) ([]api.Event, error) {
		if !takeQueued(c, qid) {
			return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("chat %s has no queued prompt %q", chatID, qid))
		}
		return []api.Event{{Type: api.EventUnqueued, ID: qid, Message: why, T: time.Now().UnixMilli()}}, nil
	})
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
	run, err := s.hub.StartRun(chatID, func(error) {})
	if err != nil {
		return err
	}
	defer s.hub.FinishRun(run)
	now := time.Now()
	_, evs, err := s.store.UpdateChatAndAppend(chatID, func(c *api.Chat) ([]api.Event, error) {
		if !takeQueued(c, q.ID) {
			return nil, errQueuedGone
		}
		c.LastMessageAt = now
		return []api.Event{
			{Type: api.EventUser, ID: q.ID, Text: q.Text, Synthetic: q.Synthetic, T: now.UnixMilli()},
			{Type: api.EventError, Message: fmt.Sprintf("the queued prompt could not start: %v", cause), T: now.UnixMilli()},
		}, nil
	})
	if err != nil {
		return fmt.Errorf("end queued prompt %s that could not start: %w", q.ID, err)
	}
	s.hub.Stored(chatID, evs...)
	return nil
}

// startNextQueued starts the chat's first queued prompt in the background
// when the chat has one and no run. A prompt that cannot start (its
// provider gone, its directory no longer allowed...) ends as a run of its
// own with an error saying why (failQueued), and the next one is tried.
func (s *Service) startNextQueued(chatID string) {
	if s.stopping.Load() || s.hub.Running(chatID) {
		return
	}
	c, err := s.store.Chat(chatID)
	if err != nil || len(c.Queue) == 0 {
		return
	}
	if !s.enter() { // under Shutdown's wait; released when the goroutine ends
		return
	}
	go func() {
		defer s.wg.Done()
		for {
			q := c.Queue[0]
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
			if c, err = s.store.Chat(chatID); err != nil || len(c.Queue) == 0 || s.stopping.Load() {
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
		if len(c.Queue) > 0 {
			s.startNextQueued(c.ID)
		}
	}
	return nil
}
