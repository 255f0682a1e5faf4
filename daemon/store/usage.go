package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketUsage holds one record per run that reported usage, keyed by the
// run's end time (big-endian Unix nanoseconds) and run id; bucketUsageRuns
// the key of each run's record, keyed by run id, so a run is recorded once;
// bucketUsageMarks the chats' cumulative-cost marks, keyed chat id "/"
// provider. All are created on first use.
var (
	bucketUsage      = []byte("usage")
	bucketUsageRuns  = []byte("usageruns")
	bucketUsageMarks = []byte("usagemarks")
)

// UsageRecord is the token usage and cost of one run.
type UsageRecord struct {
	T                   int64   `json:"t"` // Unix ms at the run's end
	RunID               string  `json:"runId"`
	ChatID              string  `json:"chatId"`
	Project             string  `json:"project,omitempty"`
	Owner               string  `json:"owner"`
	Provider            string  `json:"provider"`
	InputTokens         int64   `json:"inputTokens"`
	OutputTokens        int64   `json:"outputTokens"`
	CacheReadTokens     int64   `json:"cacheReadTokens"`
	CacheCreationTokens int64   `json:"cacheCreationTokens"`
	CostUSD             float64 `json:"costUsd"`
}

type costMark struct {
	Cost float64 `json:"cost"`
}

func usageKey(t int64, runID string) []byte {
	k := make([]byte, 8, 8+len(runID))
	binary.BigEndian.PutUint64(k, uint64(t)*uint64(time.Millisecond))
	return append(k, runID...)
}

func markKey(chatID, provider string) []byte {
	return []byte(chatID + "/" + provider)
}

// RecordUsage stores one run's usage. When cumulative is true, rec.CostUSD
// is the provider session's running total (Claude Code reports it so): the
// store records the difference to the chat's previous total for that
// provider, or the whole amount when it is smaller (a new session), and
// keeps the new total for the next run. It returns the record as stored.
//
// A run is recorded once: when rec.RunID has a record already (a run
// re-attached after a crash between its usage and its completion event
// parses that completion again), RecordUsage returns the stored record
// and changes nothing.
func (s *Store) RecordUsage(rec UsageRecord, cumulative bool) (UsageRecord, error) {
	if err := checkChatID(rec.ChatID); err != nil {
		return rec, err
	}
	if rec.RunID == "" || rec.T <= 0 {
		return rec, fmt.Errorf("usage record: %w: run id and time are required", ErrInvalid)
	}
	err := s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketUsage)
		if err != nil {
			return err
		}
		runs, err := tx.CreateBucketIfNotExists(bucketUsageRuns)
		if err != nil {
			return err
		}
		if k := runs.Get([]byte(rec.RunID)); k != nil {
			if raw := b.Get(k); raw != nil {
				var stored UsageRecord
				if err := json.Unmarshal(raw, &stored); err != nil {
					return fmt.Errorf("usage record of run %q: %w: %v", rec.RunID, ErrCorrupt, err)
				}
				rec = stored
				return nil
			}
		}
		if cumulative {
			marks, err := tx.CreateBucketIfNotExists(bucketUsageMarks)
			if err != nil {
				return err
			}
			var m costMark
			if raw := marks.Get(markKey(rec.ChatID, rec.Provider)); raw != nil {
				_ = json.Unmarshal(raw, &m) // a corrupt mark counts as none
			}
			total := rec.CostUSD
			if total >= m.Cost {
				rec.CostUSD = total - m.Cost
			}
			if err := putJSON(marks, markKey(rec.ChatID, rec.Provider), costMark{Cost: total}); err != nil {
				return err
			}
		}
		k := usageKey(rec.T, rec.RunID)
		if err := runs.Put([]byte(rec.RunID), k); err != nil {
			return err
		}
		return putJSON(b, k, rec)
	})
	return rec, err
}

// CopyUsageMarks gives toChat fromChat's cumulative-cost marks, so the
// first run of a fork that continues the parent's session is charged only
// its own cost.
func (s *Store) CopyUsageMarks(fromChat, toChat string) error {
	prefix := []byte(fromChat + "/")
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketUsageMarks)
		if err != nil {
			return err
		}
		type kv struct{ k, v []byte }
		var marks []kv
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(k) == len(prefix) {
				continue // a mark without a provider name is no provider's total
			}
			marks = append(marks, kv{[]byte(toChat + "/" + string(k[len(prefix):])), append([]byte(nil), v...)})
		}
		for _, m := range marks {
			if err := b.Put(m.k, m.v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Usage calls fn with every run's usage record that ended in [from, to)
// (a zero time leaves that side open), oldest first.
func (s *Store) Usage(from, to time.Time, fn func(UsageRecord) error) error {
	var recs []UsageRecord
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUsage)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		start := make([]byte, 8)
		if !from.IsZero() && from.UnixNano() > 0 {
			binary.BigEndian.PutUint64(start, uint64(from.UnixNano()))
		}
		for k, v := c.Seek(start); k != nil; k, v = c.Next() {
			if len(k) < 8 {
				continue
			}
			if !to.IsZero() && int64(binary.BigEndian.Uint64(k[:8])) >= to.UnixNano() {
				break
			}
			var r UsageRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("usage record: %w: %v", ErrCorrupt, err)
			}
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
