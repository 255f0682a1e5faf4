package projectapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/provisioning"
	"remote/provisioning/checkpoint"
	"remote/provisioning/placement"
)

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
	return daemon.WriteJSON(w, http.StatusOK, list)
}

// projectChats lists the chats bound to proj.
func projectChats(st ChatStore, proj api.Project) ([]api.Chat, error) {
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
	if _, _, ok := checkpoint.ParseCheckpoint(name); !ok {
		return errdefs.InvalidArgument("invalid checkpoint %q: want rc-<chat>-<seq>", name)
	}
	chatStore, hub := p.o.Chats, p.o.Hub
	if chatStore == nil || hub == nil {
		return errors.New("project routes have no chats (ProjectsOptions.Chats, Hub)")
	}
	chats, err := projectChats(chatStore, proj)
	if err != nil {
		return err
	}
	for _, c := range chats {
		if hub.Running(c.ID) {
			return errdefs.Conflict("chat %s of project %q is running; cancel it before restoring %s", c.ID, proj.Name, name)
		}
	}
	if err := p.o.Preparer.Restore(r.Context(), proj, name); err != nil {
		if errors.Is(err, lxdexec.ErrNotFound) {
			return fmt.Errorf("checkpoint %s of project %q: %w", name, proj.Name, errdefs.ErrNotFound)
		}
		return err
	}
	p.log.Info("project restored", "project", proj.Name, "checkpoint", name, "user", daemon.UserFrom(r.Context()))
	data, _ := json.Marshal(map[string]string{"project": proj.Name, "checkpoint": name})
	for _, c := range chats {
		if _, err := chatStore.UpdateChat(c.ID, func(c *api.Chat) error {
			c.Sessions, c.ClaudeSessionID, c.CodexSessionID, c.KimiSessionID, c.AntigravitySessionID = nil, "", "", "", ""
			c.ForkPending = false
			return nil
		}); err != nil {
			return fmt.Errorf("clear sessions of chat %s after restore: %w", c.ID, err)
		}
		if _, err := hub.Append(c.ID, api.Event{Type: api.EventSystem, Subtype: api.SubtypeCheckpointRestored, Data: data, T: time.Now().UnixMilli()}); err != nil {
			return fmt.Errorf("mark chat %s restored: %w", c.ID, err)
		}
		hub.Sync(c.ID) // stored outside a run (docs/api.md)
	}
	proj, err = p.o.Store.Project(proj.Name)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, proj)
}

// ForkProject is forkProject with LXD's unavailability named
// (daemon.ContainerForker).
func (p *Projects) ForkProject(ctx context.Context, user string, src api.Chat, turn int64) (api.Project, string, error) {
	proj, notice, err := p.forkProject(ctx, user, src, turn)
	return proj, notice, projectError(err)
}

// forkProject creates a project of user's whose container is a copy of
// the checkpoint taken before turn of chat src (in src's project). The
// copy gets the original's limits lowered to the operator's caps where
// they are beyond them (a cap lowered since they were set); notice then
// says so.
func (p *Projects) forkProject(ctx context.Context, user string, src api.Chat, turn int64) (proj api.Project, notice string, err error) {
	from, err := p.o.Store.Project(src.Project)
	if err != nil {
		return api.Project{}, "", err
	}
	if src.ProjectID != "" && from.ID != src.ProjectID {
		return api.Project{}, "", fmt.Errorf("project %q: %w since the chat was created", from.Name, provisioning.ErrProjectReplaced)
	}
	if from.Owner != "" && from.Owner != user {
		return api.Project{}, "", fmt.Errorf("project %q: %w", from.Name, errdefs.ErrNotFound)
	}
	id := store.NewProjectID()
	base := strings.TrimRight(from.Name[:min(len(from.Name), 45)], "-")
	now := time.Now().UTC()
	proj = api.Project{
		ID: id, Name: base + "-f" + id[:6], Owner: user, Image: from.Image, Provider: from.Provider,
		Ports: from.Ports, Autostart: from.Autostart, Checkpoints: from.Checkpoints,
		// The copy keeps the original's credential mode (a tenant's own
		// login never becomes a shared one by forking) and its limits,
		// within the caps (below).
		Credentials: from.Credentials, Limits: from.Limits, Pool: from.Pool, Target: from.Target,
		// and its network: a fork never opens what the original had closed.
		Network: cloneNetwork(from.Network),
		Status:  provisioning.StatusStopped, CreatedAt: now, UpdatedAt: now,
	}
	proj.Container = ContainerName(proj.Name, id)
	if limits, ex := placement.Clamp(from.Limits, p.o.Limits); len(ex) > 0 {
		proj.Limits = limits
		notice = (provisioning.Clamped{Project: proj, Excess: ex}).Message()
		p.log.Warn("forked project's limits lowered to the operator's caps", "project", proj.Name, "from", from.Name, "detail", notice)
	}
	if err := p.o.Store.CreateProject(proj); err != nil {
		return api.Project{}, "", err
	}
	cp := checkpoint.Name(src.ID, turn)
	if err := p.o.Preparer.Fork(ctx, from, cp, proj); err != nil {
		p.DropProject(proj)
		if errors.Is(err, lxdexec.ErrNotFound) {
			return api.Project{}, "", fmt.Errorf("no checkpoint %s before that turn in project %q: %w", cp, from.Name, errdefs.ErrNotFound)
		}
		return api.Project{}, "", err
	}
	p.log.Info("project forked from a checkpoint", "project", proj.Name, "id", proj.ID, "owner", user, "from", from.Name, "checkpoint", cp)
	return proj, notice, nil
}

// DropProject removes a fork's project record again (its container is
// left to the copy's own failure handling: LXD removes a failed copy).
func (p *Projects) DropProject(proj api.Project) {
	if err := p.o.Store.DeleteProject(proj.Name); err != nil {
		p.log.Error("remove half-made forked project", "project", proj.Name, "error", err)
	}
}

var _ daemon.ContainerForker = (*Projects)(nil)

// cloneNetwork copies a project's network (nil stays nil).
func cloneNetwork(n *api.ProjectNetwork) *api.ProjectNetwork {
	if n == nil {
		return nil
	}
	c := *n
	c.Allow = slices.Clone(n.Allow)
	return &c
}
