package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"remote/api"
	"remote/daemon/store"
	"remote/lxdexec"
	"remote/provisioning"
)

// checkpointTurn returns ctx asking the project preparer for the turn's
// checkpoint (issue 11): the snapshot is taken once per turn, after the
// container is prepared and before the CLI starts, and stored as a
// checkpoint event, or system/checkpoint_failed with the reason (the turn
// runs either way). Loose chats get ctx unchanged.
func (s *Service) checkpointTurn(ctx context.Context, chat api.Chat, userSeq int64, em *emitter) context.Context {
	if chat.Project == "" {
		return ctx
	}
	var once sync.Once
	return provisioning.WithTurn(ctx, provisioning.Turn{Chat: chat.ID, Seq: userSeq, Once: &once,
		Done: func(project, snapshot string, err error) {
			if err != nil {
				data, _ := json.Marshal(map[string]string{"project": project, "snapshot": snapshot, "reason": err.Error()})
				em.daemonEvent(api.Event{Type: api.EventSystem, Subtype: api.SubtypeCheckpointFailed, Data: data})
				return
			}
			em.daemonEvent(api.Event{Type: api.EventCheckpoint, Snapshot: snapshot, Project: project})
		}})
}

// checkpoints serves GET /v1/projects/{name}/checkpoints, oldest first.
func (p *Projects) checkpoints(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	list, err := p.o.Preparer.Checkpoints(r.Context(), proj)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, list)
}

// Attach gives the project routes the server's chats (restore marks them,
// fork with a container makes one) and the server the project side of a
// fork. Call it once, after New.
func (p *Projects) Attach(s *Server) {
	p.srv.Store(s)
	s.containerForks.Store(p)
}

func (p *Projects) server() (*Server, error) {
	s := p.srv.Load()
	if s == nil {
		return nil, errors.New("project routes are not attached to the chat server")
	}
	return s, nil
}

// projectChats lists the chats bound to proj.
func projectChats(st Store, proj api.Project) ([]api.Chat, error) {
	all, err := st.Chats()
	if err != nil {
		return nil, fmt.Errorf("list chats of project %q: %w", proj.Name, err)
	}
	var out []api.Chat
	for _, c := range all {
		if c.ProjectID == proj.ID || c.ProjectID == "" && c.Project == proj.Name {
			out = append(out, c)
		}
	}
	return out, nil
}

// restore serves POST /v1/projects/{name}/checkpoints/{checkpoint}/restore:
// refused (409) while a run is active in one of the project's chats; then
// the container is restored in place, every chat of the project gets
// system/checkpoint_restored and loses its provider sessions, so its next
// prompt starts fresh from visible history.
func (p *Projects) restore(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	name := r.PathValue("checkpoint")
	if _, _, ok := provisioning.ParseCheckpoint(name); !ok {
		return BadRequest("invalid checkpoint %q: want rc-<chat>-<seq>", name)
	}
	srv, err := p.server()
	if err != nil {
		return err
	}
	chats, err := projectChats(srv.store, proj)
	if err != nil {
		return err
	}
	for _, c := range chats {
		if srv.hub.Running(c.ID) {
			return &Error{Status: http.StatusConflict, Code: api.CodeConflict,
				Message: fmt.Sprintf("chat %s of project %q is running; cancel it before restoring %s", c.ID, proj.Name, name)}
		}
	}
	if err := p.o.Preparer.Restore(r.Context(), proj, name); err != nil {
		if errors.Is(err, lxdexec.ErrNotFound) {
			return fmt.Errorf("checkpoint %s of project %q: %w", name, proj.Name, ErrNotFound)
		}
		return err
	}
	p.log.Info("project restored", "project", proj.Name, "checkpoint", name, "user", UserFrom(r.Context()))
	data, _ := json.Marshal(map[string]string{"project": proj.Name, "checkpoint": name})
	for _, c := range chats {
		if _, err := srv.store.UpdateChat(c.ID, func(c *api.Chat) error {
			c.Sessions, c.ClaudeSessionID, c.CodexSessionID, c.KimiSessionID, c.AntigravitySessionID = nil, "", "", "", ""
			c.ForkPending = false
			return nil
		}); err != nil {
			return fmt.Errorf("clear sessions of chat %s after restore: %w", c.ID, err)
		}
		if _, err := srv.hub.Append(c.ID, api.Event{Type: api.EventSystem, Subtype: api.SubtypeCheckpointRestored, Data: data, T: time.Now().UnixMilli()}); err != nil {
			return fmt.Errorf("mark chat %s restored: %w", c.ID, err)
		}
	}
	proj, err = p.o.Store.Project(proj.Name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, proj)
}

// forkAt serves POST /v1/chats/{id}/fork with atSeq (and withContainer):
// the new chat holds the visible history before the turn holding atSeq
// and starts a fresh provider session from it; withContainer gives it a
// new project of the caller's whose container is a copy of the checkpoint
// taken before that turn. The original chat and container are untouched.
func (s *Server) forkAt(w http.ResponseWriter, r *http.Request, src api.Chat, req forkRequest) error {
	if req.AtSeq <= 0 {
		return BadRequest("atSeq: a positive seq of chat %s is required to fork at a turn", src.ID)
	}
	turn, err := s.turnStart(src.ID, req.AtSeq)
	if err != nil {
		return err
	}
	fork := src
	fork.ID = newID(6)
	fork.Running = false
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
			return BadRequest("withContainer: chat %s has no project", src.ID)
		}
		pr := s.containerForks.Load()
		if pr == nil {
			return errors.New("fork with container: project routes are not attached")
		}
		proj, err := pr.forkProject(r.Context(), UserFrom(r.Context()), src, turn)
		if err != nil {
			return projectError(err)
		}
		fork.Project, fork.ProjectID = proj.Name, proj.ID
		undo = func() { pr.dropProject(proj) }
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
		return 0, BadRequest("atSeq %d is not an event of a turn of chat %s", seq, chatID)
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

// forkProject creates a project of user's whose container is a copy of
// the checkpoint taken before turn of chat src (in src's project).
func (p *Projects) forkProject(ctx context.Context, user string, src api.Chat, turn int64) (api.Project, error) {
	from, err := p.o.Store.Project(src.Project)
	if err != nil {
		return api.Project{}, err
	}
	if src.ProjectID != "" && from.ID != src.ProjectID {
		return api.Project{}, fmt.Errorf("project %q: %w since the chat was created", from.Name, provisioning.ErrProjectReplaced)
	}
	if from.Owner != "" && from.Owner != user {
		return api.Project{}, fmt.Errorf("project %q: %w", from.Name, ErrNotFound)
	}
	id := store.NewProjectID()
	base := strings.TrimRight(from.Name[:min(len(from.Name), 45)], "-")
	now := time.Now().UTC()
	proj := api.Project{
		ID: id, Name: base + "-f" + id[:6], Owner: user, Image: from.Image, Provider: from.Provider,
		Ports: from.Ports, Autostart: from.Autostart, Checkpoints: from.Checkpoints,
		// The copy keeps the original's credential mode (a tenant's own
		// login never becomes a shared one by forking) and its limits.
		Credentials: from.Credentials, Limits: from.Limits, Target: from.Target,
		Status: provisioning.StatusStopped, CreatedAt: now, UpdatedAt: now,
	}
	proj.Container = ContainerName(proj.Name, id)
	if err := p.o.Store.CreateProject(proj); err != nil {
		return api.Project{}, err
	}
	cp := provisioning.CheckpointName(src.ID, turn)
	if err := p.o.Preparer.Fork(ctx, from, cp, proj); err != nil {
		p.dropProject(proj)
		if errors.Is(err, lxdexec.ErrNotFound) {
			return api.Project{}, fmt.Errorf("no checkpoint %s before that turn in project %q: %w", cp, from.Name, ErrNotFound)
		}
		return api.Project{}, err
	}
	p.log.Info("project forked from a checkpoint", "project", proj.Name, "id", proj.ID, "owner", user, "from", from.Name, "checkpoint", cp)
	return proj, nil
}

// dropProject removes a fork's project record again (its container is
// left to the copy's own failure handling: LXD removes a failed copy).
func (p *Projects) dropProject(proj api.Project) {
	if err := p.o.Store.DeleteProject(proj.Name); err != nil {
		p.log.Error("remove half-made forked project", "project", proj.Name, "error", err)
	}
}
