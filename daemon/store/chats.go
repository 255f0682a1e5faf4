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
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChats)
		if b.Get([]byte(c.ID)) != nil {
			return fmt.Errorf("create chat %q: %w", c.ID, ErrExists)
		}
		return putJSON(b, []byte(c.ID), c)
	})
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
// is returned. It returns the chat as saved.
// fn runs inside the write transaction: it must be quick and must not
// call the store.
func (s *Store) UpdateChat(id string, fn func(*api.Chat) error) (api.Chat, error) {
	var c api.Chat
	if err := checkChatID(id); err != nil {
		return c, err
	}
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChats)
		if err := getJSON(b, []byte(id), &c, fmt.Sprintf("chat %q", id)); err != nil {
			return err
		}
		if err := fn(&c); err != nil {
			return err
		}
		if c.ID != id {
			return fmt.Errorf("update chat %q: %w: id changed to %q", id, ErrInvalid, clip(c.ID))
		}
		return putJSON(b, []byte(id), c)
	})
	if err != nil {
		return api.Chat{}, err
	}
	return c, nil
}

// DeleteChat removes the chat and all its events, or returns ErrNotFound.
func (s *Store) DeleteChat(id string) error {
	if err := checkChatID(id); err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChats)
		if b.Get([]byte(id)) == nil {
			return fmt.Errorf("chat %q: %w", id, ErrNotFound)
		}
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
		ev := tx.Bucket(bucketEvents)
		if ev.Bucket([]byte(id)) != nil {
			return ev.DeleteBucket([]byte(id))
		}
		return nil
	})
}
