package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

func queuedIDs(t *testing.T, s *Store, chat string) []string {
	t.Helper()
	q, err := s.Queued(chat)
	if err != nil {
		t.Fatalf("Queued(%s): %v", chat, err)
	}
	var ids []string
	for _, p := range q {
		ids = append(ids, p.ID)
	}
	return ids
}

// push queues a prompt of text and returns what check was told.
func push(t *testing.T, s *Store, chat, id, text string) (QueueUse, int64) {
	t.Helper()
	var use QueueUse
	var size int64
	_, err := s.PushQueued(chat, api.QueuedPrompt{ID: id, Text: text}, api.Event{Type: api.EventQueued, ID: id, Text: text},
		func(_ api.Chat, u QueueUse, n int64) error { use, size = u, n; return nil })
	if err != nil {
		t.Fatalf("PushQueued(%s, %s): %v", chat, id, err)
	}
	return use, size
}

// Queued prompts live in their own records: the chat record holds their
// count only, check sees the chat's and the owner's queued bytes (not
// another owner's), a refusal stores nothing, take removes one, and a
// deleted chat leaves no queue behind.
func TestQueueStoredApart(t *testing.T) {
	s, _ := newTestStore(t)
	for id, owner := range map[string]string{"aa01": "alice", "aa02": "alice", "bb01": "bob"} {
		if err := s.CreateChat(api.Chat{ID: id, Owner: owner, Provider: "claude"}); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("<x>", 1000) // 3,000 bytes, stored unescaped
	use, size := push(t, s, "aa01", "q1", big)
	if use != (QueueUse{}) || size < 3000 || size > 3100 {
		t.Fatalf("first push: use %+v size %d, want zero use and about 3,000 bytes", use, size)
	}
	use, _ = push(t, s, "aa01", "q2", "two")
	if use.Prompts != 1 || use.Bytes != size || use.OwnerBytes != size {
		t.Fatalf("second push: %+v, want 1 prompt of %d bytes", use, size)
	}
	push(t, s, "bb01", "q3", big)
	use, _ = push(t, s, "aa02", "q4", "four")
	if use.Prompts != 0 || use.Bytes != 0 || use.OwnerBytes < size+3 || use.OwnerBytes > size+100 {
		t.Fatalf("alice's other chat: %+v, want her a1 queue counted, not bob's", use)
	}
	refused := errors.New("over")
	if _, err := s.PushQueued("aa01", api.QueuedPrompt{ID: "q5", Text: "no"}, api.Event{Type: api.EventQueued}, func(api.Chat, QueueUse, int64) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("refused push: %v", err)
	}
	if got := queuedIDs(t, s, "aa01"); !slices.Equal(got, []string{"q1", "q2"}) {
		t.Fatalf("a1 queue %v, want [q1 q2]", got)
	}
	c, _ := s.Chat("aa01")
	if c.Queued != 2 {
		t.Fatalf("a1 counts %d queued, want 2", c.Queued)
	}
	var raw []byte
	s.view(func(tx *boltTx) error { raw = bytes.Clone(tx.Bucket(bucketChats).Get([]byte("aa01"))); return nil })
	if bytes.Contains(raw, []byte("<x>")) || len(raw) > 512 {
		t.Fatalf("chat record carries the queue (%d bytes): %.200s", len(raw), raw)
	}
	// UpdateChat cannot change the count.
	if c, err := s.UpdateChat("aa01", func(c *api.Chat) error { c.Queued = 0; return nil }); err != nil || c.Queued != 2 {
		t.Fatalf("UpdateChat changed the count: %d %v", c.Queued, err)
	}
	if _, _, err := s.TakeQueued("aa01", "nope", func(*api.Chat) ([]api.Event, error) { return nil, nil }); !errors.Is(err, ErrNotQueued) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("take unknown: %v, want ErrNotQueued", err)
	}
	for _, id := range []string{"q1", "q2"} {
		if _, _, err := s.TakeQueued("aa01", id, func(*api.Chat) ([]api.Event, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := s.Chat("aa01"); c.Queued != 0 || len(queuedIDs(t, s, "aa01")) != 0 {
		t.Fatalf("after taking both: %d queued", c.Queued)
	}
	if err := s.DeleteChat("bb01"); err != nil {
		t.Fatal(err)
	}
	s.view(func(tx *boltTx) error {
		if queueOf(tx, "bb01") != nil || queueOf(tx, "aa01") != nil {
			t.Error("a deleted chat's or an emptied queue's bucket is left")
		}
		return nil
	})
	use2, err := s.StoredBytes()
	if err != nil || use2["bob"] != 0 || use2["alice"] < 4 {
		t.Fatalf("StoredBytes %v %v", use2, err)
	}
}

// A store written before queues moved out of the chat records (schema 1:
// the queue inside the chat JSON) opens: its queues move, in order, once;
// the chat keeps their count and runs the rest as before.
func TestQueueMigratesOldStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remote.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := `{"id":"c0ffee","title":"t","owner":"alice","provider":"claude","createdAt":"2026-01-02T03:04:05Z","running":false,` +
		`"queue":[{"id":"0123456789ab","text":"first <b>","mode":"plan","createdAt":"2026-01-02T03:05:00Z"},` +
		`{"id":"ba9876543210","text":"second","skills":["browser"],"synthetic":"x","createdAt":"2026-01-02T03:06:00Z"}]}`
	plain := `{"id":"beef","provider":"claude","createdAt":"2026-01-02T03:04:05Z","running":false}`
	err = db.Update(func(tx *bolt.Tx) error {
		if err := migrations[0](tx); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(keySchema, u64(1)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketChats).Put([]byte("c0ffee"), []byte(old)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketChats).Put([]byte("beef"), []byte(plain)); err != nil {
			return err
		}
		return tx.Bucket(bucketChats).Put([]byte("bad0"), []byte(`{"queue":[{"id":1}]`))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s := openTest(t, path)
	c, err := s.Chat("c0ffee")
	if err != nil || c.Queued != 2 || c.Owner != "alice" || c.Title != "t" {
		t.Fatalf("migrated chat %+v %v, want 2 queued, owner and title kept", c, err)
	}
	q, err := s.Queued("c0ffee")
	want := []api.QueuedPrompt{
		{ID: "0123456789ab", Text: "first <b>", Mode: "plan", CreatedAt: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)},
		{ID: "ba9876543210", Text: "second", Skills: []string{"browser"}, Synthetic: "x", CreatedAt: time.Date(2026, 1, 2, 3, 6, 0, 0, time.UTC)},
	}
	if err != nil || len(q) != 2 || q[0].ID != want[0].ID || q[0].Text != want[0].Text || q[0].Mode != "plan" || !q[0].CreatedAt.Equal(want[0].CreatedAt) ||
		q[1].ID != want[1].ID || !slices.Equal(q[1].Skills, want[1].Skills) || q[1].Synthetic != "x" {
		t.Fatalf("moved queue %+v %v, want %+v", q, err, want)
	}
	var raw []byte
	s.view(func(tx *boltTx) error { raw = bytes.Clone(tx.Bucket(bucketChats).Get([]byte("c0ffee"))); return nil })
	if bytes.Contains(raw, []byte(`"queue"`)) || !bytes.Contains(raw, []byte(`"queued":2`)) {
		t.Fatalf("chat record after migration: %s", raw)
	}
	if c, err := s.Chat("beef"); err != nil || c.Queued != 0 {
		t.Fatalf("chat without a queue: %+v %v", c, err)
	}
	if _, err := s.Chat("bad0"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unreadable record: %v, want it left as it was (ErrCorrupt)", err)
	}
	// New prompts go behind the moved ones; a taken one leaves.
	push(t, s, "c0ffee", "third", "3")
	if _, _, err := s.TakeQueued("c0ffee", "0123456789ab", func(*api.Chat) ([]api.Event, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openTest(t, path) // moved once: reopening changes nothing
	defer s.Close()
	if got := queuedIDs(t, s, "c0ffee"); !slices.Equal(got, []string{"ba9876543210", "third"}) {
		t.Fatalf("queue after reopen %v", got)
	}
	if c, _ := s.Chat("c0ffee"); c.Queued != 2 {
		t.Fatalf("count after reopen %d, want 2", c.Queued)
	}
}

// FuzzSplitLegacyQueue feeds arbitrary schema-1 chat records to the
// migration's decoder: it fails with ErrCorrupt, or returns a chat whose
// count is the queue's length and whose encoding carries no queue.
func FuzzSplitLegacyQueue(f *testing.F) {
	f.Add([]byte(`{"id":"c0ffee","queue":[{"id":"0123456789ab","text":"a"}]}`))
	f.Add([]byte(`{"id":"c0ffee","queue":[]}`))
	f.Add([]byte(`{"id":"c0ffee","queue":null,"queued":7}`))
	f.Add([]byte(`{"queue":[{"id":1}]`))
	f.Add([]byte(`{"queue":{"id":"x"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, q, ok, err := splitLegacyQueue(raw)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error is not ErrCorrupt: %v", err)
			}
			return
		}
		if c.Queued != len(q) || ok != (len(q) > 0) {
			t.Fatalf("count %d, ok %v for a queue of %d", c.Queued, ok, len(q))
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(enc, &keys); err != nil || keys["queue"] != nil {
			t.Fatalf("chat still carries a queue: %s %v", enc, err)
		}
		for _, p := range q {
			v, err := encodeQueued(p)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := decodeQueued("c", v); err != nil || back.ID != p.ID || back.Text != p.Text {
				t.Fatalf("queued prompt round trip %+v -> %+v %v", p, back, err)
			}
		}
	})
}
