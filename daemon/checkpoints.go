package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"remote/lxdexec"

	"remote/api"
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
