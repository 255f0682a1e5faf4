package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"remote/api"
	"remote/daemon/runhub"
	"remote/internal/errdefs"
)

// ContainerForker is the project side of a fork with a container: a new
// project of the caller's whose container is a copy of a checkpoint. The
// project routes implement it and register it with SetContainerForker.
type ContainerForker interface {
	// ForkProject creates a project of user's from the checkpoint taken
	// before turn of chat src (in src's project); its errors are classified.
	ForkProject(ctx context.Context, user string, src api.Chat, turn int64) (api.Project, error)
	// DropProject removes a fork's project record again.
	DropProject(proj api.Project)
}

// SetContainerForker makes fork with a container available (call once,
// before serving).
func (s *Server) SetContainerForker(f ContainerForker) { s.containerForks.Store(&f) }

// errStopWalk ends a walk over a chat's events early.
var errStopWalk = errors.New("stop walk")

// forkAt serves POST /v1/chats/{id}/fork with atSeq (and withContainer):
// the new chat holds the visible history before the turn holding atSeq
// and starts a fresh provider session from it; withContainer gives it a
// new project of the caller's whose container is a copy of the checkpoint
// taken before that turn. The original chat and container are untouched.
func (s *Server) forkAt(w http.ResponseWriter, r *http.Request, src api.Chat, req forkRequest) error {
	if req.AtSeq <= 0 {
		return errdefs.InvalidArgument("atSeq: a positive seq of chat %s is required to fork at a turn", src.ID)
	}
	turn, err := s.turnStart(src.ID, req.AtSeq)
	if err != nil {
		return err
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
	if req.WithContainer {
		if src.Project == "" {
			return errdefs.InvalidArgument("withContainer: chat %s has no project", src.ID)
		}
		pr := s.containerForks.Load()
		if pr == nil {
			return errors.New("fork with container: project routes are not attached")
		}
		proj, err := (*pr).ForkProject(r.Context(), UserFrom(r.Context()), src, turn)
		if err != nil {
			return err
		}
		fork.Project, fork.ProjectID = proj.Name, proj.ID
		undo = func() { (*pr).DropProject(proj) }
	}
	fail := func(err error) error {
		if undo != nil {
			undo()
		}
		return err
	}
	if err := s.store.CreateChat(fork); err != nil {
		return fail(fmt.Errorf("create fork of chat %s: %w", src.ID, err))
	}
	if err := s.copyEventsBefore(src.ID, fork.ID, turn); err != nil {
		if derr := s.store.DeleteChat(fork.ID); derr != nil {
			s.log.Error("remove half-made fork", "chat", fork.ID, "error", derr)
		}
		return fail(fmt.Errorf("copy events of chat %s to its fork: %w", src.ID, err))
	}
	s.log.Info("chat forked at a turn", "chat", src.ID, "fork", fork.ID, "turn", turn, "project", fork.Project, "withContainer", req.WithContainer)
	return writeJSON(w, http.StatusCreated, fork)
}

// turnStart is the seq of the user event that starts the turn holding seq.
func (s *Server) turnStart(chatID string, seq int64) (int64, error) {
	var turn, last int64
	err := s.store.Events(chatID, 0, 0, func(ev api.Event) error {
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
func (s *Server) copyEventsBefore(src, dst string, before int64) error {
	var evs []api.Event
	err := s.store.Events(src, 0, 0, func(ev api.Event) error {
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
		s.store.AppendAsync(dst, ev, func(_ api.Event, err error) { errs <- err })
	}
	var first error
	for range evs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
