package projectapi

import (
	"context"
	"fmt"

	"remote/api"
	"remote/daemon/prompt"
	"remote/internal/errdefs"
	"remote/providers"
	"remote/provisioning/gitrepo"
)

// ProjectChatCheck lets chats name a project the owner can see; it
// implements ProjectChats over the project store.
type ProjectChatCheck struct {
	Store interface {
		Project(name string) (api.Project, error)
	}
}

var _ prompt.ProjectChats = ProjectChatCheck{}

// CheckChatProject returns the project's id when owner may chat in
// req.Project, and an error wrapping errdefs.ErrNotFound when the project is missing
// or another user's. A branch must be a valid git branch name of a
// project with a repository, a worktree have a branch (400 naming the
// field).
func (c ProjectChatCheck) CheckChatProject(_ context.Context, owner string, req api.CreateChatRequest) (string, error) {
	project := req.Project
	if req.Branch != "" {
		if err := gitrepo.CheckBranch("branch", req.Branch); err != nil {
			return "", err
		}
	}
	if req.Worktree && req.Branch == "" {
		return "", errdefs.InvalidArgument("worktree: a worktree is of the chat's branch; give branch too")
	}
	if !projectNameRE.MatchString(project) {
		return "", errdefs.InvalidArgument("project: invalid project name %q", project)
	}
	p, err := c.Store.Project(project)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", fmt.Errorf("project %q: %w", project, errdefs.ErrNotFound)
		}
		return "", err // the store's errors already name the project
	}
	if p.Owner != "" && p.Owner != owner {
		return "", fmt.Errorf("project %q: %w", project, errdefs.ErrNotFound)
	}
	if p.ID == "" {
		return "", fmt.Errorf("project %q has no id", project)
	}
	if p.Repo == nil && req.Branch != "" {
		return "", errdefs.InvalidArgument("branch: project %q has no repository (repo on project create)", project)
	}
	return p.ID, nil
}

// CheckChatRun returns nil when chat may run now in its project: the
// project of that name exists, is still the one the chat was created in
// (same id) and is the chat owner's. A project that is gone or another
// user's answers 404 (the same for both); one deleted and created again
// by the owner, or a chat never bound to a project id, 409.
func (c ProjectChatCheck) CheckChatRun(_ context.Context, chat api.Chat) error {
	gone := errdefs.NotFound("project %q of chat %s no longer exists; nothing was run", chat.Project, chat.ID)
	p, err := c.Store.Project(chat.Project)
	if err != nil {
		if errdefs.IsNotFound(err) || errdefs.IsInvalidArgument(err) {
			return gone
		}
		return err // the store's errors already name the project
	}
	if p.Owner != "" && p.Owner != chat.Owner {
		return gone
	}
	if chat.ProjectID == "" {
		return errdefs.Conflict("chat %s is bound to no project id (project %q was gone or another user's when project ids were introduced); "+
			"nothing was run: create a new chat in the project", chat.ID, chat.Project)
	}
	if p.ID != chat.ProjectID {
		return errdefs.Conflict("project %q was deleted and created again since chat %s was made; nothing was run: "+
			"the chat does not run in the new project, create a new chat there", chat.Project, chat.ID)
	}
	return nil
}

// StoreSecrets adapts the store's decrypted secrets to the preparer's
// secret source (values stay in memory only).
func StoreSecrets(st ProjectStore) func(project string) ([]providers.Secret, error) {
	return func(project string) ([]providers.Secret, error) {
		ss, err := st.Secrets(project)
		if err != nil {
			return nil, fmt.Errorf("load secrets of project %q: %w", project, err)
		}
		out := make([]providers.Secret, 0, len(ss))
		for _, s := range ss {
			out = append(out, providers.Secret{Key: s.Key, Value: s.Value})
		}
		return out, nil
	}
}
