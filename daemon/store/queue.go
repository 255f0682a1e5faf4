package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"remote/api"
	"remote/internal/errdefs"
)

// bucketQueue holds one sub-bucket per chat with queued prompts: 8-byte
// big-endian position -> JSON api.QueuedPrompt. The chat record keeps only
// their count, so a queue change writes one small record, not the chat.
var bucketQueue = []byte("queue")

// ErrNotQueued means the chat has no queued prompt of that id (it was
// removed, or it started).
var ErrNotQueued = errdefs.New(errdefs.ErrNotFound, "no such queued prompt")

// QueueUse is what is queued when a prompt is about to be added.
type QueueUse struct {
	Prompts    int   // the chat's queued prompts
	Bytes      int64 // their stored bytes
	OwnerBytes int64 // the stored bytes of every queue of the chat's owner
}

// encodeQueued is a queued prompt's stored form: JSON without HTML
// escaping, so code in a prompt costs what it weighs.
func encodeQueued(q api.QueuedPrompt) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(q); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// decodeQueued decodes one stored queued prompt.
func decodeQueued(chat string, raw []byte) (api.QueuedPrompt, error) {
	var q api.QueuedPrompt
	if err := json.Unmarshal(raw, &q); err != nil {
		return q, fmt.Errorf("queued prompt of chat %q: %w: %v", chat, ErrCorrupt, err)
	}
	return q, nil
}

// queueBytes is the summed size of a chat's stored queued prompts.
func queueBytes(b *bolt.Bucket) int64 {
	var n int64
	if b != nil {
		_ = b.ForEach(func(_, v []byte) error { n += int64(len(v)); return nil })
	}
	return n
}

// ownerOf returns the owner of the stored chat record raw ("" when it
// cannot be read).
func ownerOf(raw []byte) string {
	var c struct {
		Owner string `json:"owner"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Owner
}

// PushQueued appends q to the end of the chat's queue, counts it on the
// chat and appends ev to the chat's log, in one transaction. check,
// called inside it with the chat as stored, what is queued and q's stored
// size, refuses with its error (nothing is stored). It returns the stored
// event. check must be quick and must not call the store.
func (s *Store) PushQueued(chatID string, q api.QueuedPrompt, ev api.Event, check func(c api.Chat, use QueueUse, size int64) error) (api.Event, error) {
	raw, err := encodeQueued(q)
	if err != nil {
		return api.Event{}, err
	}
	before := func(tx *bolt.Tx, c *api.Chat) error {
		qb := tx.Bucket(bucketQueue)
		use := QueueUse{Prompts: c.Queued}
		if qb != nil {
			use.Bytes = queueBytes(qb.Bucket([]byte(chatID)))
			use.OwnerBytes = use.Bytes
			chats := tx.Bucket(bucketChats)
			err := qb.ForEachBucket(func(k []byte) error {
				if string(k) != chatID && ownerOf(chats.Get(k)) == c.Owner {
					use.OwnerBytes += queueBytes(qb.Bucket(k))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if err := check(*c, use, int64(len(raw))); err != nil {
			return err
		}
		qb, err := tx.CreateBucketIfNotExists(bucketQueue)
		if err != nil {
			return err
		}
		b, err := qb.CreateBucketIfNotExists([]byte(chatID))
		if err != nil {
			return err
		}
		pos, err := b.NextSequence()
		if err != nil {
			return err
		}
		if err := b.Put(u64(pos), raw); err != nil {
			return err
		}
		c.Queued++
		return nil
	}
	_, evs, err := s.changeChat(chatID, before, func(*api.Chat) ([]api.Event, error) { return []api.Event{ev}, nil })
	if err != nil {
		return api.Event{}, err
	}
	return evs[0], nil
}

// Queued returns the chat's queued prompts in the order they will run.
func (s *Store) Queued(chatID string) ([]api.QueuedPrompt, error) {
	if err := checkChatID(chatID); err != nil {
		return nil, err
	}
	out := []api.QueuedPrompt{}
	err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketChats).Get([]byte(chatID)) == nil {
			return fmt.Errorf("chat %q: %w", chatID, ErrNotFound)
		}
		b := queueOf(tx, chatID)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			q, err := decodeQueued(chatID, v)
			out = append(out, q)
			return err
		})
	})
	return out, err
}

func queueOf(tx *bolt.Tx, chatID string) *bolt.Bucket {
	if qb := tx.Bucket(bucketQueue); qb != nil {
		return qb.Bucket([]byte(chatID))
	}
	return nil
}

// TakeQueued removes the queued prompt qid from the chat's queue, applies
// fn to the chat and appends the events fn returns, in one transaction
// (as UpdateChatAndAppend). It fails with ErrNotQueued when the chat has
// no queued prompt qid; nothing changes then.
func (s *Store) TakeQueued(chatID, qid string, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error) {
	before := func(tx *bolt.Tx, c *api.Chat) error {
		b := queueOf(tx, chatID)
		if b == nil {
			return fmt.Errorf("chat %s queued prompt %q: %w", chatID, clip(qid), ErrNotQueued)
		}
		var key []byte
		err := b.ForEach(func(k, v []byte) error {
			var q struct {
				ID string `json:"id"`
			}
			if key == nil && json.Unmarshal(v, &q) == nil && q.ID == qid {
				key = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if key == nil {
			return fmt.Errorf("chat %s queued prompt %q: %w", chatID, clip(qid), ErrNotQueued)
		}
		if err := b.Delete(key); err != nil {
			return err
		}
		c.Queued = max(c.Queued-1, 0)
		if k, _ := b.Cursor().First(); k == nil {
			c.Queued = 0
			return tx.Bucket(bucketQueue).DeleteBucket([]byte(chatID))
		}
		return nil
	}
	return s.changeChat(chatID, before, fn)
}

// StoredBytes returns, per chat owner, the bytes their chats hold in the
// store: event logs and queued prompts. Every owner with a chat is named.
func (s *Store) StoredBytes() (map[string]int64, error) {
	out := map[string]int64{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
			out[ownerOf(v)] += chatBytes(tx, k) + queueBytes(queueOf(tx, string(k)))
			return nil
		})
	})
	return out, err
}

// legacyChat is a chat record as schema 1 stored it: its queue inside.
type legacyChat struct {
	Queue []api.QueuedPrompt `json:"queue"`
}

// splitLegacyQueue reads a schema-1 chat record: the chat (its Queued
// counting the queue) and the queue it carried. ok is false when the
// record has no queue to move.
func splitLegacyQueue(raw []byte) (c api.Chat, queue []api.QueuedPrompt, ok bool, err error) {
	var old legacyChat
	if err := json.Unmarshal(raw, &old); err != nil {
		return c, nil, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, nil, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	c.Queued = len(old.Queue)
	return c, old.Queue, len(old.Queue) > 0, nil
}

// moveQueues is migration 2: queues move out of the chat records into
// bucketQueue, in their order, each record keeping their count. A record
// that cannot be read is left as it is (reading it reports ErrCorrupt).
func moveQueues(tx *bolt.Tx) error {
	chats := tx.Bucket(bucketChats)
	type moved struct {
		id    []byte
		chat  api.Chat
		queue []api.QueuedPrompt
	}
	var todo []moved
	err := chats.ForEach(func(k, v []byte) error {
		if !bytes.Contains(v, []byte(`"queue"`)) {
			return nil
		}
		c, q, ok, err := splitLegacyQueue(v)
		if err == nil && ok {
			todo = append(todo, moved{bytes.Clone(k), c, q})
		}
		return nil
	})
	if err != nil || len(todo) == 0 {
		return err
	}
	qb, err := tx.CreateBucketIfNotExists(bucketQueue)
	if err != nil {
		return err
	}
	for _, m := range todo {
		b, err := qb.CreateBucketIfNotExists(m.id)
		if err != nil {
			return err
		}
		for _, q := range m.queue {
			raw, err := encodeQueued(q)
			if err != nil {
				return err
			}
			pos, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(u64(pos), raw); err != nil {
				return err
			}
		}
		if err := putJSON(chats, m.id, m.chat); err != nil {
			return err
		}
	}
	return nil
}
