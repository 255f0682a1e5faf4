package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"remote/api"
	"remote/internal/lazyre"
)

var projectIDRe = lazyre.New(`^[0-9a-f]{16}$`)

// NewProjectID returns a new random project id: 16 lowercase hex
// characters (64 random bits).
func NewProjectID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ValidProjectID reports whether id is a project id: 16 lowercase hex
// characters.
func ValidProjectID(id string) bool { return projectIDRe.MatchString(id) }

// CreateProject stores a new project keyed by its name. A project without
// an ID gets a new one (NewProjectID). It fails with ErrInvalid for a bad
// name or id and ErrExists when the name is taken.
func (s *Store) CreateProject(p api.Project) error {
	if err := checkProject(p.Name); err != nil {
		return err
	}
	if p.ID == "" {
		p.ID = NewProjectID()
	}
	if !ValidProjectID(p.ID) {
		return fmt.Errorf("project %q id %q: %w: want 16 lowercase hex characters", p.Name, clip(p.ID), ErrInvalid)
	}
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProjects)
		if b.Get([]byte(p.Name)) != nil {
			return fmt.Errorf("create project %q: %w", p.Name, ErrExists)
		}
		return putJSON(b, []byte(p.Name), p)
	})
	if err == nil {
		s.changed(Change{Project: &p})
	}
	return err
}

// Project returns the named project, or ErrNotFound.
func (s *Store) Project(name string) (api.Project, error) {
	var p api.Project
	if err := checkProject(name); err != nil {
		return p, err
	}
	err := s.view(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketProjects), []byte(name), &p, fmt.Sprintf("project %q", name))
	})
	return p, err
}

// Projects returns every project, sorted by name.
func (s *Store) Projects() ([]api.Project, error) {
	var out []api.Project
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProjects)
		return b.ForEach(func(k, _ []byte) error {
			var p api.Project
			if err := getJSON(b, k, &p, fmt.Sprintf("project %q", k)); err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// UpdateProject applies fn to the stored project and saves the result,
// atomically. If fn returns an error, or changes the name or the id,
// nothing changes.
// It returns the project as saved.
// fn runs inside the write transaction: it must be quick and must not
// call the store.
func (s *Store) UpdateProject(name string, fn func(*api.Project) error) (api.Project, error) {
	var p api.Project
	if err := checkProject(name); err != nil {
		return p, err
	}
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProjects)
		if err := getJSON(b, []byte(name), &p, fmt.Sprintf("project %q", name)); err != nil {
			return err
		}
		id := p.ID
		if err := fn(&p); err != nil {
			return err
		}
		if p.Name != name {
			return fmt.Errorf("update project %q: %w: name changed to %q", name, ErrInvalid, clip(p.Name))
		}
		if p.ID != id {
			return fmt.Errorf("update project %q: %w: id changed to %q", name, ErrInvalid, clip(p.ID))
		}
		return putJSON(b, []byte(name), p)
	})
	if err != nil {
		return api.Project{}, err
	}
	s.changed(Change{Project: &p})
	return p, nil
}

// DeleteProject removes the project and all its secrets, or returns ErrNotFound.
func (s *Store) DeleteProject(name string) error {
	if err := checkProject(name); err != nil {
		return err
	}
	var old api.Project
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProjects)
		if err := getJSON(b, []byte(name), &old, fmt.Sprintf("project %q", name)); err != nil {
			return err
		}
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		sec := tx.Bucket(bucketSecrets)
		if sec.Bucket([]byte(name)) != nil {
			return sec.DeleteBucket([]byte(name))
		}
		return nil
	})
	if err == nil {
		s.changed(Change{Project: &old, Deleted: true})
	}
	return err
}

// assignProjectIDs gives every stored project without an id a new one, and
// binds every project chat without a project id to its project's id when
// that project has the chat's owner (or none). It runs at every Open, in
// the migration transaction, and is idempotent: an id once stored never
// changes. A chat whose project is gone or is another user's stays
// unbound, and the daemon refuses to run it. A record that does not decode
// is left as it is (and reported): reading it fails later, where it is
// asked for, instead of keeping the store from opening.
func (s *Store) assignProjectIDs(tx *bolt.Tx) error {
	pb, cb := tx.Bucket(bucketProjects), tx.Bucket(bucketChats)
	projects := map[string]api.Project{} // by key
	var assigned []string
	err := pb.ForEach(func(k, _ []byte) error {
		var p api.Project
		if err := getJSON(pb, k, &p, fmt.Sprintf("project %q", k)); err != nil {
			s.log.Error("project record unreadable; not given an id", "error", err)
			return nil
		}
		if p.ID == "" {
			p.ID = NewProjectID()
			assigned = append(assigned, string(k))
		}
		projects[string(k)] = p
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range assigned {
		p := projects[k]
		if err := putJSON(pb, []byte(k), p); err != nil {
			return fmt.Errorf("store id of project %q: %w", k, err)
		}
		s.log.Info("project given an id", "project", k, "id", p.ID)
	}
	var bound []api.Chat
	err = cb.ForEach(func(k, _ []byte) error {
		var c api.Chat
		if err := getJSON(cb, k, &c, fmt.Sprintf("chat %q", k)); err != nil {
			s.log.Error("chat record unreadable; not bound to its project", "error", err)
			return nil
		}
		if c.Project == "" || c.ProjectID != "" {
			return nil
		}
		if p, ok := projects[c.Project]; ok && (p.Owner == "" || p.Owner == c.Owner) {
			c.ProjectID = p.ID
			bound = append(bound, c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range bound {
		if err := putJSON(cb, []byte(c.ID), c); err != nil {
			return fmt.Errorf("bind chat %q to its project: %w", c.ID, err)
		}
	}
	return nil
}
