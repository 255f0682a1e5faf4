package fork

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/runhub"
	"remote/internal/errdefs"
)

// ContainerForker is the project side of a fork with a container: a new
// project of the caller's whose container is a copy of a checkpoint. The
// project routes implement it; the composition root hands them to the
// daemon as Options.ContainerForker.
type ContainerForker interface {
	// ForkProject creates a project of user's from the checkpoint taken
	// before turn of chat src (in src's project); its errors are
	// classified. notice, when not "", says the copy's limits were
	// lowered to the operator's caps (the fork's chat is told).
	ForkProject(ctx context.Context, user string, src api.Chat, turn int64) (proj api.Project, notice string, err error)
	// DropProject removes a fork's project record again.
	DropProject(proj api.Project)
}

// Store is what a fork needs of the daemon's store (prompt.Store).
type Store interface {
	CreateChat(c api.Chat) error
	DeleteChat(id string) error
	Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error
	AppendAsync(chatID string, ev api.Event, done func(api.Event, error))
}

// Forker forks chats in Store; Containers, when not nil, makes fork with
// a container available.
type Forker struct {
	Store      Store
	Containers ContainerForker
	Log        hclog.Logger
}

// Request is what POST /v1/chats/{id}/fork asks of a fork at a turn.
type Request struct {
	AtSeq         int64
	Title         string
	WithContainer bool
}

// errStopWalk ends a walk over a chat's events early.
var errStopWalk = errors.New("stop walk")

// At serves POST /v1/chats/{id}/fork with atSeq (and withContainer) for
// user:
// the new chat holds the visible history before the turn holding atSeq
// and starts a fresh provider session from it; withContainer gives it a
// new project of the caller's whose container is a copy of the checkpoint
// taken before that turn. The original chat and container are untouched.
// It returns the new chat.
func (s *Forker) At(ctx context.Context, user string, src api.Chat, req Request) (api.Chat, error) {
	if req.AtSeq <= 0 {
		return api.Chat{}, errdefs.InvalidArgument("atSeq: a positive seq of chat %s is required to fork at a turn", src.ID)
	}
	turn, err := s.turnStart(src.ID, req.AtSeq)
	if err != nil {
		return api.Chat{}, err
	}
	fork := src
	fork.ID = runhub.NewID(6)
	fork.Running, fork.Queued = false, 0
	fork.CreatedAt = time.Now().UTC()
	fork.LastMessageAt = time.Time{}
	fork.Title = req.Title
	if fork.Title == "" && src.Title != "" {
		fork.Title = src.Title + " (fork)"
	}
	fork.Sessions, fork.ClaudeSessionID, fork.CodexSessionID, fork.KimiSessionID, fork.AntigravitySessionID = nil, "", "", "", ""
	fork.ForkPending = false
	var undo func()
	var notice string
	if req.WithContainer {
		if src.Project == "" {
			return api.Chat{}, errdefs.InvalidArgument("withContainer: chat %s has no project", src.ID)
		}
		pr := s.Containers
		if pr == nil {
			return api.Chat{}, errors.New("fork with container: project routes are not attached")
		}
		proj, note, err := pr.ForkProject(ctx, user, src, turn)
		if err != nil {
			return api.Chat{}, err
		}
		notice = note
		fork.Project, fork.ProjectID = proj.Name, proj.ID
		undo = func() { pr.DropProject(proj) }
	}
	fail := func(err error) (api.Chat, error) {
		if undo != nil {
			undo()
		}
		return api.Chat{}, err
	}
	if err := s.Store.CreateChat(fork); err != nil {
		return fail(fmt.Errorf("create fork of chat %s: %w", src.ID, err))
	}
	if err := s.copyEventsBefore(src.ID, fork.ID, turn); err != nil {
		if derr := s.Store.DeleteChat(fork.ID); derr != nil {
			s.Log.Error("remove half-made fork", "chat", fork.ID, "error", derr)
		}
		return fail(fmt.Errorf("copy events of chat %s to its fork: %w", src.ID, err))
	}
	if notice != "" {
		s.appendNotice(fork, notice)
	}
	s.Log.Info("chat forked at a turn", "chat", src.ID, "fork", fork.ID, "turn", turn, "project", fork.Project, "withContainer", req.WithContainer)
	return fork, nil
}

// turnStart is the seq of the user event that starts the turn holding seq.
func (s *Forker) turnStart(chatID string, seq int64) (int64, error) {
	var turn, last int64
	err := s.Store.Events(chatID, 0, 0, func(ev api.Event) error {
		if ev.Seq > seq {
			return errStopWalk
		}
		last = ev.Seq
		if ev.Type == api.EventUser {
			turn = ev.Seq
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopWalk) {
		return 0, fmt.Errorf("read events of chat %s: %w", chatID, err)
	}
	if turn == 0 || last != seq {
		return 0, errdefs.InvalidArgument("atSeq %d is not an event of a turn of chat %s", seq, chatID)
	}
	return turn, nil
}

// copyEventsBefore appends src's events with seq < before to the new chat
// dst, in order.
func (s *Forker) copyEventsBefore(src, dst string, before int64) error {
	var evs []api.Event
	err := s.Store.Events(src, 0, 0, func(ev api.Event) error {
		if ev.Seq >= before {
			return errStopWalk
		}
		ev.Seq = 0
		evs = append(evs, ev)
		return nil
	})
	if err != nil && !errors.Is(err, errStopWalk) {
		return err
	}
	errs := make(chan error, len(evs))
	for _, ev := range evs {
		s.Store.AppendAsync(dst, ev, func(_ api.Event, err error) { errs <- err })
	}
	var first error
	for range evs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// appendNotice stores system/limits_clamped in the fork's new chat: its
// project's limits were lowered to the operator's caps. Best effort: the
// project's own record shows the limits either way.
func (s *Forker) appendNotice(fork api.Chat, notice string) {
	done := make(chan error, 1)
	s.Store.AppendAsync(fork.ID, api.Event{Type: api.EventSystem, Subtype: api.SubtypeLimitsClamped, Message: notice,
		Project: fork.Project, T: time.Now().UnixMilli()}, func(_ api.Event, err error) { done <- err })
	if err := <-done; err != nil {
		s.Log.Warn("store the fork's limits notice", "chat", fork.ID, "error", err)
	}
}
