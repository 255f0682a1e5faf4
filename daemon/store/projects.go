package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// CreateProject stores a new project keyed by its name. It fails with
// ErrInvalid for a bad name and ErrExists when the name is taken.
func (s *Store) CreateProject(p api.Project) error {
	if err := checkProject(p.Name); err != nil {
		return err
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
// atomically. If fn returns an error, or changes the name, nothing changes.
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
		if err := fn(&p); err != nil {
			return err
		}
		if p.Name != name {
			return fmt.Errorf("update project %q: %w: name changed to %q", name, ErrInvalid, clip(p.Name))
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
