package daemon

import (
	"context"
	"fmt"

	"remote/api"
	"remote/providers"
)

// ProjectChatCheck lets chats name a project the owner can see; it
// implements ProjectChats over the project store.
type ProjectChatCheck struct {
	Store interface {
		Project(name string) (api.Project, error)
	}
}

var _ ProjectChats = ProjectChatCheck{}

// CheckChatProject returns nil when owner may chat in project, and an
// error wrapping ErrNotFound when the project is missing or another
// user's.
func (c ProjectChatCheck) CheckChatProject(_ context.Context, owner, project string) error {
	if !projectNameRE.MatchString(project) {
		return BadRequest("project: invalid project name %q", project)
	}
	p, err := c.Store.Project(project)
	if err != nil {
		if isStoreNotFound(err) {
			return fmt.Errorf("project %q: %w", project, ErrNotFound)
		}
		return err // the store's errors already name the project
	}
	if p.Owner != "" && p.Owner != owner {
		return fmt.Errorf("project %q: %w", project, ErrNotFound)
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
