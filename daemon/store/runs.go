package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// Runs that outlive the daemon (docs/architecture.md): while a chat runs,
// the store keeps what a restarted daemon needs to re-attach to the run's
// shim — the RunRecord — and the position of the run's newest stored event,
// written in the transaction that stores the event (AppendAsyncAt). Both go
// with the chat's running mark: a write that stores the chat with Running
// false deletes them in the same transaction.
var (
	// bucketRuns: chat id -> RunRecord JSON (without Next).
	bucketRuns = []byte("runs")
	// bucketRunPos: chat id -> run id, then 16 bytes: the Next position.
	bucketRunPos = []byte("runpos")
)

// RunMark is the position after a run's event (providers.Pos with Index+1),
// stored with the event.
type RunMark struct {
	RunID string
	Line  int64
	Index int64
}

// RunRecord is the store's record of a chat's run in flight.
type RunRecord struct {
	RunID    string    `json:"runId"`
	Provider string    `json:"provider"`
	UserSeq  int64     `json:"userSeq"` // seq of the run's user event
	Started  time.Time `json:"started"`
	// Request is the provider's RunRequest as the run started, without
	// its runtime environment (backend-issued tokens stay in memory).
	Request json.RawMessage `json:"request,omitempty"`
	// Shim is the run's providers.ShimHandle once its shim started; a run
	// without one cannot be re-attached.
	Shim json.RawMessage `json:"shim,omitempty"`
	// Next is the position after the newest stored event of the run;
	// HasNext is false while none was stored.
	Next    RunMark `json:"-"`
	HasNext bool    `json:"-"`
}

// PutRun stores rec as chatID's run in flight, replacing any older record.
// The chat must exist.
func (s *Store) PutRun(chatID string, rec RunRecord) error {
	if err := checkChatID(chatID); err != nil {
		return err
	}
	if rec.RunID == "" {
		return fmt.Errorf("store run of chat %q: %w: empty run id", chatID, ErrInvalid)
	}
	return s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketChats).Get([]byte(chatID)) == nil {
			return fmt.Errorf("store run of chat %q: %w", chatID, ErrNotFound)
		}
		b, err := tx.CreateBucketIfNotExists(bucketRuns)
		if err != nil {
			return err
		}
		if p := tx.Bucket(bucketRunPos); p != nil {
			if err := p.Delete([]byte(chatID)); err != nil {
				return err
			}
		}
		return putJSON(b, []byte(chatID), rec)
	})
}

// SetRunShim records the shim handle of chatID's run runID. It fails with
// ErrNotFound when that run is no longer the chat's run in flight.
func (s *Store) SetRunShim(chatID, runID string, shim json.RawMessage) error {
	if err := checkChatID(chatID); err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		var rec RunRecord
		if b == nil || b.Get([]byte(chatID)) == nil {
			return fmt.Errorf("run %s of chat %q: %w", runID, chatID, ErrNotFound)
		}
		if err := getJSON(b, []byte(chatID), &rec, fmt.Sprintf("run of chat %q", chatID)); err != nil {
			return err
		}
		if rec.RunID != runID {
			return fmt.Errorf("run %s of chat %q: %w (the chat runs %s)", runID, chatID, ErrNotFound, rec.RunID)
		}
		rec.Shim = shim
		return putJSON(b, []byte(chatID), rec)
	})
}

// Run returns chatID's run in flight, with the position of its newest
// stored event; ok is false when the chat has none.
func (s *Store) Run(chatID string) (rec RunRecord, ok bool, err error) {
	if err := checkChatID(chatID); err != nil {
		return rec, false, err
	}
	err = s.view(func(tx *bolt.Tx) error {
		rec, ok, err = getRun(tx, []byte(chatID))
		return err
	})
	return rec, ok, err
}

// Runs returns every run in flight by chat id.
func (s *Store) Runs() (map[string]RunRecord, error) {
	out := map[string]RunRecord{}
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			rec, ok, err := getRun(tx, k)
			if err != nil {
				return err
			}
			if ok {
				out[string(k)] = rec
			}
			return nil
		})
	})
	return out, err
}

func getRun(tx *bolt.Tx, chat []byte) (RunRecord, bool, error) {
	var rec RunRecord
	b := tx.Bucket(bucketRuns)
	if b == nil || b.Get(chat) == nil {
		return rec, false, nil
	}
	if err := getJSON(b, chat, &rec, fmt.Sprintf("run of chat %q", chat)); err != nil {
		return rec, false, err
	}
	if m, ok := decodeMark(tx, chat); ok && m.RunID == rec.RunID {
		rec.Next, rec.HasNext = m, true
	}
	return rec, true, nil
}

func decodeMark(tx *bolt.Tx, chat []byte) (RunMark, bool) {
	p := tx.Bucket(bucketRunPos)
	if p == nil {
		return RunMark{}, false
	}
	v := p.Get(chat)
	if len(v) < 16 {
		return RunMark{}, false
	}
	n := len(v) - 16
	return RunMark{
		RunID: string(v[:n]),
		Line:  int64(binary.BigEndian.Uint64(v[n:])),
		Index: int64(binary.BigEndian.Uint64(v[n+8:])),
	}, true
}

// putMark stores m as chat's run position unless a later one of the same
// run is stored (group commits may reorder nothing, but be sure).
func putMark(tx *bolt.Tx, chat []byte, m RunMark) error {
	if r := tx.Bucket(bucketRuns); r == nil || r.Get(chat) == nil {
		return nil // the run's end is stored already
	}
	if old, ok := decodeMark(tx, chat); ok && old.RunID == m.RunID &&
		(m.Line < old.Line || (m.Line == old.Line && m.Index <= old.Index)) {
		return nil
	}
	p, err := tx.CreateBucketIfNotExists(bucketRunPos)
	if err != nil {
		return err
	}
	v := make([]byte, len(m.RunID)+16)
	copy(v, m.RunID)
	binary.BigEndian.PutUint64(v[len(m.RunID):], uint64(m.Line))
	binary.BigEndian.PutUint64(v[len(m.RunID)+8:], uint64(m.Index))
	return p.Put(chat, v)
}

// dropRun deletes chat's run record and position (its running mark ended).
func dropRun(tx *bolt.Tx, chat []byte) error {
	for _, name := range [][]byte{bucketRuns, bucketRunPos} {
		if b := tx.Bucket(name); b != nil {
			if err := b.Delete(chat); err != nil {
				return err
			}
		}
	}
	return nil
}

// AppendAsyncAt is AppendAsyncIf that also stores mark (when not nil) as
// the position of chatID's run in the transaction that stores ev.
func (s *Store) AppendAsyncAt(chatID string, ev api.Event, mark *RunMark, cond func() bool, done func(api.Event, error)) {
	s.appendAsync(chatID, ev, mark, cond, done)
}
