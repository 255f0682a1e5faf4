package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"remote/api"
	"remote/internal/errdefs"
)

// Error classes returned by the store; test them with errors.Is. Those an
// API answer depends on are errdefs classes (ErrNotFound and ErrExists are
// errdefs.ErrNotFound and errdefs.ErrAlreadyExists themselves).
var (
	// ErrNotFound means the chat, project, secret or event log does not exist.
	ErrNotFound = errdefs.ErrNotFound
	// ErrExists means a create named a chat or project that already exists.
	ErrExists = errdefs.ErrAlreadyExists
	// ErrLocked means another process holds the store file open; Open gives
	// up after about a second instead of waiting.
	ErrLocked = errors.New("store file is locked by another process")
	// ErrInvalid means an input (id, name, key, event) failed validation;
	// nothing was stored or changed.
	ErrInvalid = errdefs.New(errdefs.ErrInvalidArgument, "invalid input")
	// ErrWrongKey means the secrets key does not decrypt what this store holds.
	ErrWrongKey = errors.New("secrets key does not match the store")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("store is closed")
	// ErrCorrupt means stored bytes could not be decoded.
	ErrCorrupt = errors.New("stored data is corrupt")
	// ErrNoSpace means a write failed because the store's filesystem is
	// full (ENOSPC) or the quota is used up (EDQUOT); nothing of that
	// write was stored. It wraps the OS error.
	ErrNoSpace = errdefs.New(errdefs.ErrResourceExhausted, "no space left for the store")
	// ErrSkipped means an AppendAsyncIf condition refused the event;
	// nothing was stored.
	ErrSkipped = errors.New("append skipped")
)

// noSpace wraps err with ErrNoSpace when the OS reported a full disk or
// quota. bbolt flattens some errors to text ("file resize error: %s"), so
// the text is checked too.
func noSpace(err error) error {
	if err == nil || errors.Is(err, ErrNoSpace) {
		return err
	}
	msg := err.Error()
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error()) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// lockTimeout bounds how long Open waits for another process's file lock.
const lockTimeout = time.Second

// Queue and batch bounds of the group committer.
const (
	queueLen    = 4096 // pending append requests; a full queue blocks appenders
	maxBatchEvs = 8192 // events written by one bolt transaction at most
)

// Bucket names. Events hold one sub-bucket per chat; secrets one per project.
var (
	bucketMeta     = []byte("meta")
	bucketChats    = []byte("chats")
	bucketEvents   = []byte("events")
	bucketProjects = []byte("projects")
	bucketSecrets  = []byte("secrets")
	// bucketEventBytes (chat id -> 8-byte byte count of its event log) is
	// created by the first append that needs it, not by a migration; a
	// chat without a counter has its log summed once.
	bucketEventBytes = []byte("eventbytes")

	keySchema   = []byte("schema")
	keyKeyCheck = []byte("keycheck")
)

// migration brings the schema from version index to index+1. All pending
// migrations run in order in the one transaction that Open starts.
type migration func(tx *bolt.Tx) error

// migrations is the schema history; the schema version is its length.
// Append new steps; never edit or reorder existing ones.
var migrations = []migration{
	// 1: the initial buckets.
	func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketChats, bucketEvents, bucketProjects, bucketSecrets} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %q: %w", b, err)
			}
		}
		return nil
	},
	// 2: queued prompts move out of the chat records (bucketQueue).
	moveQueues,
	// 3: the chats' schedules (bucketSchedules).
	func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketSchedules)
		return err
	},
}

// SchemaVersion returns the schema version this binary writes.
func SchemaVersion() uint64 { return uint64(len(migrations)) }

// Options configures Open.
type Options struct {
	Key    []byte       // 32-byte AES-256 key for secrets at rest (required)
	Logger hclog.Logger // may be nil
}

// Store is the daemon's durable state in one bbolt file. It is safe for
// concurrent use by many goroutines; only one process may hold it open.
type Store struct {
	db    *bolt.DB
	path  string
	log   hclog.Logger
	aead  aeadCipher
	queue chan *pending
	done  chan struct{} // closed when the committer has exited

	mu     sync.RWMutex // held shared while queueing, exclusively by Close
	closed bool

	onChange atomic.Pointer[func(Change)]

	// appendMu is held by every write that appends to a chat's log, from
	// before its transaction until its events are announced (OnAppend):
	// the announcements come in commit order.
	appendMu sync.Mutex
	onAppend []func(chatID string, evs []api.Event)
}

// Open opens or creates the store file at path (mode 0600), creates its
// buckets and runs pending schema migrations in one transaction. It fails
// within about a second with ErrLocked when another process holds the file,
// with ErrWrongKey when opts.Key is not the key the store's secrets were
// written with, and with an error when the file's schema is newer than this
// binary's.
func Open(path string, opts Options) (*Store, error) {
	aead, err := newAEAD(opts.Key)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: lockTimeout,
		// Safe: bbolt rebuilds the freelist by scanning on open; etcd runs
		// this way. It saves a page write per commit.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: %w (is another remoted running?)", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{
		db:    db,
		path:  path,
		log:   log,
		aead:  aead,
		queue: make(chan *pending, queueLen),
		done:  make(chan struct{}),
	}
	if err := db.Update(s.migrate); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, noSpace(err))
	}
	go s.commitLoop()
	return s, nil
}

// migrate runs pending migrations and checks the secrets key, in tx.
func (s *Store) migrate(tx *bolt.Tx) error {
	var have uint64
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(keySchema); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("schema version: %w: %d bytes", ErrCorrupt, len(v))
			}
			have = binary.BigEndian.Uint64(v)
		}
	}
	want := SchemaVersion()
	if have > want {
		return fmt.Errorf("schema version %d is newer than this binary's %d", have, want)
	}
	for v := have; v < want; v++ {
		if err := migrations[v](tx); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
		}
		s.log.Info("store schema migrated", "from", v, "to", v+1)
	}
	meta := tx.Bucket(bucketMeta)
	if have != want {
		// Only when it changes: an Open that writes nothing succeeds on a
		// full disk, so the daemon can still start and serve.
		if err := meta.Put(keySchema, u64(want)); err != nil {
			return err
		}
	}
	if err := s.assignProjectIDs(tx); err != nil {
		return fmt.Errorf("assign project ids: %w", err)
	}
	return s.checkKey(meta)
}

// Close flushes pending appends, then closes the file. Later calls to any
// method fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// Path returns the store file's path.
func (s *Store) Path() string { return s.path }

// update runs fn in a write transaction unless the store is closed.
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return noSpace(s.db.Update(fn))
}

// logged runs write, a write that may append to chat logs, holding
// appendMu from before it until announce, run only when write succeeded,
// has returned: announcements come in commit order (OnAppend).
func (s *Store) logged(write func() error, announce func()) error {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if err := write(); err != nil {
		return err
	}
	announce()
	return nil
}

// view runs fn in a read transaction unless the store is closed.
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.View(fn)
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// getJSON decodes the JSON value at key of bucket b into v; what names the
// record in errors.
func getJSON(b *bolt.Bucket, key []byte, v any, what string) error {
	raw := b.Get(key)
	if raw == nil {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w: %v", what, ErrCorrupt, err)
	}
	return nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}
