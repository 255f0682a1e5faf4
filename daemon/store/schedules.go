package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// bucketSchedules holds the chats' schedules: schedule id -> JSON
// ScheduleRecord (schema 3).
var bucketSchedules = []byte("schedules")

// ScheduleRun is one stored firing: what the API shows, and what finds its
// turn in the chat's log (the run or queued prompt it started and the
// chat's last seq before it).
type ScheduleRun struct {
	api.ScheduleRun
	RunID    string `json:"runId,omitempty"`
	QueueID  string `json:"queueId,omitempty"`
	AfterSeq int64  `json:"afterSeq,omitempty"`
}

// ScheduleRecord is a schedule as stored: its API form, its owner (the
// chat's), the last time it fired (persisted before its prompt is
// submitted, so it never fires twice), its routine token's SHA-256 (never
// the token) and its newest runs.
type ScheduleRecord struct {
	api.Schedule
	Owner     string        `json:"owner"`
	LastFired time.Time     `json:"lastFired"`
	TokenHash []byte        `json:"tokenHash,omitempty"`
	History   []ScheduleRun `json:"history,omitempty"`
}

// CreateSchedule stores rec (a new id). check, called in the transaction
// with every stored schedule, refuses it with its error (bounds per chat
// and per user). It must be quick and must not call the store.
func (s *Store) CreateSchedule(rec ScheduleRecord, check func(all []ScheduleRecord) error) error {
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSchedules)
		if err != nil {
			return err
		}
		if b.Get([]byte(rec.ID)) != nil {
			return fmt.Errorf("schedule %q: %w", rec.ID, ErrExists)
		}
		if tx.Bucket(bucketChats).Get([]byte(rec.ChatID)) == nil {
			return fmt.Errorf("chat %q: %w", rec.ChatID, ErrNotFound)
		}
		if check != nil {
			all, err := allSchedules(b)
			if err != nil {
				return err
			}
			if err := check(all); err != nil {
				return err
			}
		}
		return putJSON(b, []byte(rec.ID), rec)
	})
}

func allSchedules(b *bolt.Bucket) ([]ScheduleRecord, error) {
	var out []ScheduleRecord
	if b == nil {
		return nil, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		var r ScheduleRecord
		if err := getJSON(b, k, &r, fmt.Sprintf("schedule %q", k)); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// Schedule returns one stored schedule, or ErrNotFound.
func (s *Store) Schedule(id string) (ScheduleRecord, error) {
	var r ScheduleRecord
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSchedules)
		if b == nil {
			return fmt.Errorf("schedule %q: %w", id, ErrNotFound)
		}
		return getJSON(b, []byte(id), &r, fmt.Sprintf("schedule %q", id))
	})
	return r, err
}

// Schedules returns every stored schedule, by id.
func (s *Store) Schedules() ([]ScheduleRecord, error) {
	var out []ScheduleRecord
	err := s.view(func(tx *bolt.Tx) (err error) {
		out, err = allSchedules(tx.Bucket(bucketSchedules))
		return err
	})
	return out, err
}

// UpdateSchedule applies fn to the stored schedule and saves it, in one
// transaction; fn's error stores nothing. fn must not call the store.
func (s *Store) UpdateSchedule(id string, fn func(*ScheduleRecord) error) (ScheduleRecord, error) {
	var r ScheduleRecord
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSchedules)
		if b == nil {
			return fmt.Errorf("schedule %q: %w", id, ErrNotFound)
		}
		if err := getJSON(b, []byte(id), &r, fmt.Sprintf("schedule %q", id)); err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
		return putJSON(b, []byte(id), r)
	})
	return r, err
}

// DeleteSchedule removes one schedule, or returns ErrNotFound.
func (s *Store) DeleteSchedule(id string) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSchedules)
		if b == nil || b.Get([]byte(id)) == nil {
			return fmt.Errorf("schedule %q: %w", id, ErrNotFound)
		}
		return b.Delete([]byte(id))
	})
}

// dropSchedules removes the schedules of a chat being deleted, in tx.
func dropSchedules(tx *bolt.Tx, chatID string) error {
	b := tx.Bucket(bucketSchedules)
	if b == nil {
		return nil
	}
	all, err := allSchedules(b)
	if err != nil {
		return err
	}
	for _, r := range all {
		if r.ChatID == chatID {
			if err := b.Delete([]byte(r.ID)); err != nil {
				return err
			}
		}
	}
	return nil
}
