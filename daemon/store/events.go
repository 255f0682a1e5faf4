package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"remote/api"
	"remote/daemon/store/eventjson"
)

// maxEventBytes bounds one stored event's JSON encoding.
const maxEventBytes = 8 << 20

// replayBatch is how many events Events reads per read transaction; fn runs
// outside transactions so a slow consumer never holds one open.
const replayBatch = 512

// pending is one queued append: the events of one Append call, or one
// AppendAsync event, already encoded (without seq, which lives in the key).
type pending struct {
	chat string
	evs  []api.Event
	vals [][]byte
	cond func() bool // nil: always; else asked inside the transaction
	mark *RunMark    // stored with the events when not nil (AppendAsyncAt)
	done func(evs []api.Event, err error)
}

// Append makes evs durable (fsync) in chatID's log before it returns them
// with Seq set (consecutive, continuing the chat's log) and T set to the
// current Unix milliseconds where it was 0. Concurrent callers share one
// transaction and fsync. It fails with ErrInvalid for a bad id or event
// (empty type, the transient "sync", oversized), ErrNotFound for an unknown
// chat, ErrClosed after Close; on failure none of evs is stored.
func (s *Store) Append(chatID string, evs ...api.Event) ([]api.Event, error) {
	p, err := newPending(chatID, evs)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, nil
	}
	type result struct {
		evs []api.Event
		err error
	}
	ch := make(chan result, 1)
	p.done = func(evs []api.Event, err error) { ch <- result{evs, err} }
	if err := s.enqueue(p); err != nil {
		return nil, err
	}
	r := <-ch
	return r.evs, r.err
}

// AppendAsync queues ev for chatID and returns at once; it blocks only while
// the bounded queue is full (backpressure). done runs after ev is durable (or
// failed, with the reasons of Append), with Seq and T set. It runs on the
// committer goroutine in commit order — per chat, in call order — so it must
// be quick, e.g. a non-blocking channel send. An event rejected before
// queueing (invalid, store closed) gets done on the caller's goroutine.
func (s *Store) AppendAsync(chatID string, ev api.Event, done func(api.Event, error)) {
	s.AppendAsyncIf(chatID, ev, nil, done)
}

// AppendAsyncIf is AppendAsync with a condition: cond (when not nil) is
// called on the committer goroutine inside the transaction that would
// store ev, after the done callbacks of every earlier commit have run, and
// when it returns false ev is not stored (no seq is used) and done gets
// ErrSkipped. A writer uses it to store nothing more after one of its
// appends failed: the failure's done sets what cond reads, before any
// later commit asks. cond must be quick and must not call the store.
func (s *Store) AppendAsyncIf(chatID string, ev api.Event, cond func() bool, done func(api.Event, error)) {
	s.appendAsync(chatID, ev, nil, cond, done)
}

func (s *Store) appendAsync(chatID string, ev api.Event, mark *RunMark, cond func() bool, done func(api.Event, error)) {
	if done == nil {
		done = func(api.Event, error) {}
	}
	p, err := newPending(chatID, []api.Event{ev})
	if err != nil {
		done(ev, err)
		return
	}
	p.cond = cond
	p.mark = mark
	p.done = func(evs []api.Event, err error) {
		if err != nil {
			done(ev, err)
			return
		}
		done(evs[0], nil)
	}
	if err := s.enqueue(p); err != nil {
		done(ev, err)
	}
}

func newPending(chatID string, evs []api.Event) (*pending, error) {
	if err := checkChatID(chatID); err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	p := &pending{chat: chatID, evs: make([]api.Event, len(evs)), vals: make([][]byte, len(evs))}
	for i, ev := range evs {
		if ev.Type == "" {
			return nil, fmt.Errorf("append to chat %q: event %d: %w: empty type", chatID, i, ErrInvalid)
		}
		if ev.Type == api.EventSync {
			return nil, fmt.Errorf("append to chat %q: event %d: %w: %q events are transient", chatID, i, ErrInvalid, ev.Type)
		}
		if ev.T == 0 {
			ev.T = now
		}
		ev.Seq = 0
		raw, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("append to chat %q: event %d (%s): %w: %v", chatID, i, clip(ev.Type), ErrInvalid, err)
		}
		if len(raw) > maxEventBytes {
			return nil, fmt.Errorf("append to chat %q: event %d (%s): %w: %d bytes exceeds %d", chatID, i, clip(ev.Type), ErrInvalid, len(raw), maxEventBytes)
		}
		p.evs[i], p.vals[i] = ev, raw
	}
	return p, nil
}

func (s *Store) enqueue(p *pending) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("append to chat %q: %w", p.chat, ErrClosed)
	}
	s.queue <- p
	return nil
}

// commitLoop is the group committer: it takes whatever is queued (bounded by
// maxBatchEvs), writes it in one transaction, then completes it in order.
func (s *Store) commitLoop() {
	defer close(s.done)
	for first := range s.queue {
		batch := []*pending{first}
		n := len(first.evs)
	drain:
		for n < maxBatchEvs {
			select {
			case p, ok := <-s.queue:
				if !ok {
					break drain
				}
				batch = append(batch, p)
				n += len(p.evs)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

func (s *Store) commit(batch []*pending) {
	errs := make([]error, len(batch))
	err := s.logged(func() error {
		return noSpace(s.db.Update(func(tx *bolt.Tx) error {
			chats := tx.Bucket(bucketChats)
			w := newLogWriter(tx)
			for i, p := range batch {
				errs[i] = nil
				if chats.Get([]byte(p.chat)) == nil {
					errs[i] = fmt.Errorf("append to chat %q: %w", p.chat, ErrNotFound)
					continue
				}
				if p.cond != nil && !p.cond() {
					errs[i] = fmt.Errorf("append to chat %q: %w", p.chat, ErrSkipped)
					continue
				}
				if err := w.put(p.chat, p.evs, p.vals); err != nil {
					return err
				}
				if p.mark != nil {
					if err := putMark(tx, []byte(p.chat), *p.mark); err != nil {
						return err
					}
				}
			}
			return w.finish()
		}))
	}, func() {
		for i, p := range batch {
			if errs[i] == nil {
				s.appended(p.chat, p.evs)
			}
		}
	})
	if err != nil {
		s.log.Error("append transaction failed", "events", len(batch), "error", err)
	}
	for i, p := range batch {
		switch {
		case err != nil:
			p.done(nil, fmt.Errorf("append to chat %q: %w", p.chat, err))
		case errs[i] != nil:
			p.done(nil, errs[i])
		default:
			p.done(p.evs, nil)
		}
	}
}

// logWriter appends encoded events to chat logs inside one write
// transaction and keeps each chat's byte counter (bucket eventbytes:
// chat id -> the summed length of its stored event values).
type logWriter struct {
	tx     *bolt.Tx
	events *bolt.Bucket
	last   map[string]int64 // last seq written per chat
	bytes  map[string]int64 // byte counter per chat, as it will be
}

func newLogWriter(tx *bolt.Tx) *logWriter {
	return &logWriter{tx: tx, events: tx.Bucket(bucketEvents), last: map[string]int64{}, bytes: map[string]int64{}}
}

// put appends vals to chat's log and sets evs[j].Seq.
func (w *logWriter) put(chat string, evs []api.Event, vals [][]byte) error {
	if _, ok := w.bytes[chat]; !ok {
		w.bytes[chat] = chatBytes(w.tx, []byte(chat)) // before this write's events
	}
	b, err := w.events.CreateBucketIfNotExists([]byte(chat))
	if err != nil {
		return err
	}
	b.FillPercent = 1 // keys only ever grow: pack pages full
	seq, ok := w.last[chat]
	if !ok {
		seq = lastSeq(b)
	}
	for j := range evs {
		seq++
		evs[j].Seq = seq
		if err := b.Put(seqKey(seq), vals[j]); err != nil {
			return err
		}
		w.bytes[chat] += int64(len(vals[j]))
	}
	w.last[chat] = seq
	return nil
}

// finish saves the byte counters of the chats written.
func (w *logWriter) finish() error {
	if len(w.bytes) == 0 {
		return nil
	}
	c, err := w.tx.CreateBucketIfNotExists(bucketEventBytes)
	if err != nil {
		return err
	}
	for chat, n := range w.bytes {
		if err := c.Put([]byte(chat), u64(uint64(n))); err != nil {
			return err
		}
	}
	return nil
}

// chatBytes returns the summed length of chat's stored event values: its
// counter, or for a log written before counters existed, the sum itself.
func chatBytes(tx *bolt.Tx, chat []byte) int64 {
	if c := tx.Bucket(bucketEventBytes); c != nil {
		if v := c.Get(chat); len(v) == 8 {
			return int64(binary.BigEndian.Uint64(v))
		}
	}
	var n int64
	if b := tx.Bucket(bucketEvents).Bucket(chat); b != nil {
		_ = b.ForEach(func(_, v []byte) error { n += int64(len(v)); return nil })
	}
	return n
}

// EventBytes returns how many bytes chatID's stored events take (the
// summed length of their JSON, without seqs). An unknown chat is
// ErrNotFound.
func (s *Store) EventBytes(chatID string) (int64, error) {
	if err := checkChatID(chatID); err != nil {
		return 0, err
	}
	var n int64
	err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketChats).Get([]byte(chatID)) == nil {
			return fmt.Errorf("chat %q: %w", chatID, ErrNotFound)
		}
		n = chatBytes(tx, []byte(chatID))
		return nil
	})
	return n, err
}

func seqKey(seq int64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, uint64(seq))
	return k
}

func lastSeq(b *bolt.Bucket) int64 {
	k, _ := b.Cursor().Last()
	if len(k) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(k))
}

// decodeEvent decodes one stored event; its seq comes from the key.
func decodeEvent(key, val []byte) (api.Event, error) {
	var ev api.Event
	if len(key) != 8 {
		return ev, fmt.Errorf("event key of %d bytes: %w", len(key), ErrCorrupt)
	}
	seq := int64(binary.BigEndian.Uint64(key))
	if seq <= 0 {
		return ev, fmt.Errorf("event seq %d: %w", seq, ErrCorrupt)
	}
	if err := eventjson.Unmarshal(val, &ev); err != nil {
		return api.Event{}, fmt.Errorf("event %d: %w: %v", seq, ErrCorrupt, err)
	}
	if ev.Type == "" {
		return api.Event{}, fmt.Errorf("event %d: %w: empty type", seq, ErrCorrupt)
	}
	ev.Seq = seq
	return ev, nil
}

// Events calls fn for each stored event of chatID with Seq > afterSeq, in
// seq order, at most limit events when limit > 0. It seeks straight to
// afterSeq. fn runs outside any transaction; an error from fn stops the walk
// and is returned as is. An unknown chat is ErrNotFound.
func (s *Store) Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error {
	return walk(s, chatID, afterSeq, limit, decodeEvent, fn)
}

// EventsRaw is Events without decoding: fn gets each event's seq and its
// wire JSON (with "seq" set), ready to send to a client. raw is fn's own.
func (s *Store) EventsRaw(chatID string, afterSeq int64, limit int, fn func(seq int64, raw []byte) error) error {
	type rawEvent struct {
		seq int64
		raw []byte
	}
	return walk(s, chatID, afterSeq, limit, func(k, v []byte) (rawEvent, error) {
		seq, raw, err := wireEvent(k, v)
		return rawEvent{seq, raw}, err
	}, func(r rawEvent) error { return fn(r.seq, r.raw) })
}

// wireEvent turns a stored event into its wire JSON by splicing the seq from
// the key in front of the stored object's fields (stored values never hold
// a seq). It checks only the framing, not the JSON inside.
func wireEvent(key, val []byte) (int64, []byte, error) {
	if len(key) != 8 {
		return 0, nil, fmt.Errorf("event key of %d bytes: %w", len(key), ErrCorrupt)
	}
	seq := int64(binary.BigEndian.Uint64(key))
	if seq <= 0 || len(val) < 2 || val[0] != '{' || val[len(val)-1] != '}' {
		return 0, nil, fmt.Errorf("event %d: %w: not a JSON object", seq, ErrCorrupt)
	}
	raw := make([]byte, 0, len(val)+24)
	raw = append(raw, `{"seq":`...)
	raw = strconv.AppendInt(raw, seq, 10)
	if len(val) > 2 {
		raw = append(raw, ',')
	}
	raw = append(raw, val[1:]...)
	return seq, raw, nil
}

// walk reads chatID's events after afterSeq in batches of replayBatch, one
// read transaction each, converting them with conv inside the transaction
// and handing them to fn outside it.
func walk[T any](s *Store, chatID string, afterSeq int64, limit int, conv func(k, v []byte) (T, error), fn func(T) error) error {
	if err := checkChatID(chatID); err != nil {
		return err
	}
	if afterSeq < 0 {
		afterSeq = 0
	}
	first := true
	sent := 0
	batch := make([]T, 0, replayBatch)
	for {
		batch = batch[:0]
		var lastKey int64
		err := s.view(func(tx *bolt.Tx) error {
			if first && tx.Bucket(bucketChats).Get([]byte(chatID)) == nil {
				return fmt.Errorf("chat %q: %w", chatID, ErrNotFound)
			}
			b := tx.Bucket(bucketEvents).Bucket([]byte(chatID))
			if b == nil {
				return nil
			}
			c := b.Cursor()
			for k, v := c.Seek(seqKey(afterSeq + 1)); k != nil && len(batch) < replayBatch; k, v = c.Next() {
				if limit > 0 && sent+len(batch) >= limit {
					break
				}
				item, err := conv(k, v)
				if err != nil {
					return fmt.Errorf("chat %q: %w", chatID, err)
				}
				batch = append(batch, item)
				lastKey = int64(binary.BigEndian.Uint64(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		first = false
		for _, item := range batch {
			if err := fn(item); err != nil {
				return err
			}
		}
		sent += len(batch)
		if len(batch) < replayBatch || (limit > 0 && sent >= limit) {
			return nil
		}
		afterSeq = lastKey
	}
}

// LastSeq returns the seq of chatID's last stored event, 0 when it has none.
// An unknown chat is ErrNotFound.
func (s *Store) LastSeq(chatID string) (int64, error) {
	if err := checkChatID(chatID); err != nil {
		return 0, err
	}
	var seq int64
	err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketChats).Get([]byte(chatID)) == nil {
			return fmt.Errorf("chat %q: %w", chatID, ErrNotFound)
		}
		if b := tx.Bucket(bucketEvents).Bucket([]byte(chatID)); b != nil {
			seq = lastSeq(b)
		}
		return nil
	})
	return seq, err
}

// CopyEvents copies every event of fromChat into toChat's log with the same
// seqs, in one transaction (for fork). fromChat must exist (ErrNotFound);
// toChat's log must be empty (ErrExists otherwise). toChat need not be
// created yet, but Append to it needs the chat.
func (s *Store) CopyEvents(fromChat, toChat string) error {
	if err := checkChatID(fromChat); err != nil {
		return err
	}
	if err := checkChatID(toChat); err != nil {
		return err
	}
	if fromChat == toChat {
		return fmt.Errorf("copy events of chat %q onto itself: %w", fromChat, ErrInvalid)
	}
	return s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketChats).Get([]byte(fromChat)) == nil {
			return fmt.Errorf("chat %q: %w", fromChat, ErrNotFound)
		}
		events := tx.Bucket(bucketEvents)
		dst, err := events.CreateBucketIfNotExists([]byte(toChat))
		if err != nil {
			return err
		}
		if k, _ := dst.Cursor().First(); k != nil {
			return fmt.Errorf("copy events into chat %q: %w: its log is not empty", toChat, ErrExists)
		}
		src := events.Bucket([]byte(fromChat))
		if src == nil {
			return nil
		}
		dst.FillPercent = 1
		if err := src.ForEach(func(k, v []byte) error { return dst.Put(k, v) }); err != nil {
			return err
		}
		w := newLogWriter(tx)
		w.bytes[toChat] = chatBytes(tx, []byte(fromChat))
		return w.finish()
	})
}

// EventsBefore returns the wire JSON (seq included) of the newest limit
// events of chatID with seq < before (before <= 0: no bound), oldest
// first, and whether older events remain. It reads in one transaction and
// never walks more than limit events. An unknown chat is ErrNotFound.
func (s *Store) EventsBefore(chatID string, before int64, limit int) (events [][]byte, hasMore bool, err error) {
	if err := checkChatID(chatID); err != nil {
		return nil, false, err
	}
	if limit <= 0 {
		return nil, false, fmt.Errorf("limit %d: %w: must be positive", limit, ErrInvalid)
	}
	err = s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketChats).Get([]byte(chatID)) == nil {
			return fmt.Errorf("chat %q: %w", chatID, ErrNotFound)
		}
		b := tx.Bucket(bucketEvents).Bucket([]byte(chatID))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var k, v []byte
		if before <= 0 {
			k, v = c.Last()
		} else if k, _ = c.Seek(seqKey(before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil; k, v = c.Prev() {
			if len(events) == limit {
				hasMore = true
				break
			}
			_, raw, err := wireEvent(k, v)
			if err != nil {
				return fmt.Errorf("chat %q: %w", chatID, err)
			}
			events = append(events, raw)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	slices.Reverse(events)
	return events, hasMore, nil
}
