package store

import (
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// CreateChat stores a new chat. It fails with ErrInvalid for a bad id,
// project name or project id (one without a project name included) and
// with ErrExists when the id is taken.
func (s *Store) CreateChat(c api.Chat) error {
	if err := checkChatID(c.ID); err != nil {
		return err
	}
	if c.Project != "" {
		if err := checkProject(c.Project); err != nil {
			return err
		}
	}
	if c.ProjectID != "" && (c.Project == "" || !ValidProjectID(c.ProjectID)) {
		return fmt.Errorf("chat %q project id %q: %w: want 16 lowercase hex characters, with a project name", c.ID, clip(c.ProjectID), ErrInvalid)
	}
	c.Queued = 0 // a new chat has no queue; only the queue operations count it
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChats)
		if b.Get([]byte(c.ID)) != nil {
			return fmt.Errorf("create chat %q: %w", c.ID, ErrExists)
		}
		return putJSON(b, []byte(c.ID), c)
	})
	if err == nil {
		s.changed(Change{Chat: &c})
	}
	return err
}

// Chat returns the chat with id, or ErrNotFound.
func (s *Store) Chat(id string) (api.Chat, error) {
	var c api.Chat
	if err := checkChatID(id); err != nil {
		return c, err
	}
	err := s.view(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketChats), []byte(id), &c, fmt.Sprintf("chat %q", id))
	})
	return c, err
}

// Chats returns every chat, oldest (by CreatedAt, then id) first.
func (s *Store) Chats() ([]api.Chat, error) {
	var out []api.Chat
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
			var c api.Chat
			if err := getJSON(tx.Bucket(bucketChats), k, &c, fmt.Sprintf("chat %q", k)); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// UpdateChat applies fn to the stored chat and saves the result, atomically.
// If fn returns an error, or changes the id, nothing changes and the error
// is returned. It returns the chat as saved. The queued count is the
// queue operations' own: a change fn makes to it is not saved.
// fn runs inside the write transaction: it must be quick and must not
// call the store.
func (s *Store) UpdateChat(id string, fn func(*api.Chat) error) (api.Chat, error) {
	c, _, err := s.changeChat(id, nil, func(c *api.Chat) ([]api.Event, error) { return nil, fn(c) })
	return c, err
}

// DeleteChat removes the chat and all its events, or returns ErrNotFound.
func (s *Store) DeleteChat(id string) error {
	if err := checkChatID(id); err != nil {
		return err
	}
	var old api.Chat
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChats)
		if err := getJSON(b, []byte(id), &old, fmt.Sprintf("chat %q", id)); err != nil {
			return err
		}
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
		if err := dropRun(tx, []byte(id)); err != nil {
			return err
		}
		if err := dropSchedules(tx, id); err != nil {
			return err
		}
		if q := tx.Bucket(bucketQueue); q != nil && q.Bucket([]byte(id)) != nil {
			if err := q.DeleteBucket([]byte(id)); err != nil {
				return err
			}
		}
		if c := tx.Bucket(bucketEventBytes); c != nil {
			if err := c.Delete([]byte(id)); err != nil {
				return err
			}
		}
		ev := tx.Bucket(bucketEvents)
		if ev.Bucket([]byte(id)) != nil {
			return ev.DeleteBucket([]byte(id))
		}
		return nil
	})
	if err == nil {
		s.changed(Change{Chat: &old, Deleted: true})
	}
	return err
}

// UpdateChatAndAppend applies fn to the stored chat, saves the result and
// appends the events fn returns to the chat's log, all in one transaction:
// either everything is stored or nothing is. It returns the chat as saved
// and the appended events with Seq (and T where it was 0) set. Events are
// checked as Append checks them; a bad one (ErrInvalid) stores nothing.
// fn runs inside the write transaction: it must be quick and must not
// call the store. A chat that must be repaired exactly once (restart
// recovery) decides in fn, from the stored chat, whether anything is left
// to do.
func (s *Store) UpdateChatAndAppend(id string, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error) {
	return s.changeChat(id, nil, fn)
}

// changeChat is UpdateChatAndAppend; before, when set, runs first in the
// same transaction on the chat as stored (the queue operations: it may
// change the queued count, which fn cannot).
func (s *Store) changeChat(id string, before func(tx *bolt.Tx, c *api.Chat) error, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error) {
	var c api.Chat
	var out []api.Event
	if err := checkChatID(id); err != nil {
		return c, nil, err
	}
	err := s.logged(func() error {
		return s.update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketChats)
			if err := getJSON(b, []byte(id), &c, fmt.Sprintf("chat %q", id)); err != nil {
				return err
			}
			if before != nil {
				if err := before(tx, &c); err != nil {
					return err
				}
			}
			queued := c.Queued
			evs, err := fn(&c)
			if err != nil {
				return err
			}
			if c.ID != id {
				return fmt.Errorf("update chat %q: %w: id changed to %q", id, ErrInvalid, clip(c.ID))
			}
			c.Queued = queued
			if err := putJSON(b, []byte(id), c); err != nil {
				return err
			}
			if !c.Running {
				if err := dropRun(tx, []byte(id)); err != nil {
					return err
				}
			}
			if len(evs) == 0 {
				return nil
			}
			p, err := newPending(id, evs)
			if err != nil {
				return err
			}
			w := newLogWriter(tx)
			if err := w.put(id, p.evs, p.vals); err != nil {
				return err
			}
			out = p.evs
			return w.finish()
		})
	}, func() { s.appended(id, out) })
	if err != nil {
		return api.Chat{}, nil, err
	}
	s.changed(Change{Chat: &c})
	return c, out, nil
}
