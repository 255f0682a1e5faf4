package store

import (
	"errors"

	"github.com/hashicorp/go-hclog"

	"remote/api"
)

// Error classes returned by the store; test them with errors.Is.
var (
	// ErrNotFound means the chat, project, secret or event log does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists means a create named a chat or project that already exists.
	ErrExists = errors.New("already exists")
	// ErrLocked means another process holds the store file open.
	ErrLocked = errors.New("store file is locked by another process")
	// ErrInvalid means an input (id, name, key) failed validation; nothing was stored.
	ErrInvalid = errors.New("invalid input")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("store is closed")
)

// Options configures Open.
type Options struct {
	Key    []byte       // 32-byte AES-256 key for secrets at rest (required)
	Logger hclog.Logger // may be nil
}

// Store is the daemon's durable state. It is safe for concurrent use.
type Store struct{}

// Open opens or creates the store file at path.
func Open(path string, opts Options) (*Store, error) { return nil, errors.New("unimplemented") }

// LoadOrCreateKey returns the 32-byte secrets key kept at path, creating it on first use.
func LoadOrCreateKey(path string) ([]byte, error) { return nil, errors.New("unimplemented") }

// Close flushes pending appends and closes the file.
func (s *Store) Close() error { return nil }

// CreateChat stores a new chat.
func (s *Store) CreateChat(c api.Chat) error { return nil }

// Chat returns one chat.
func (s *Store) Chat(id string) (api.Chat, error) { return api.Chat{}, nil }

// Chats returns all chats, oldest first.
func (s *Store) Chats() ([]api.Chat, error) { return nil, nil }

// UpdateChat atomically modifies a chat; if fn fails nothing changes.
func (s *Store) UpdateChat(id string, fn func(*api.Chat) error) (api.Chat, error) {
	return api.Chat{}, nil
}

// DeleteChat removes a chat and all its events.
func (s *Store) DeleteChat(id string) error { return nil }

// Append makes evs durable and returns them with Seq and T set.
func (s *Store) Append(chatID string, evs ...api.Event) ([]api.Event, error) { return nil, nil }

// AppendAsync queues ev; done runs once it is durable.
func (s *Store) AppendAsync(chatID string, ev api.Event, done func(api.Event, error)) {}

// Events calls fn for every event with Seq > afterSeq, in order.
func (s *Store) Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error {
	return nil
}

// LastSeq returns the chat's last seq (0 when empty).
func (s *Store) LastSeq(chatID string) (int64, error) { return 0, nil }

// CopyEvents copies all events of fromChat to toChat with the same seqs.
func (s *Store) CopyEvents(fromChat, toChat string) error { return nil }

// CreateProject stores a new project.
func (s *Store) CreateProject(p api.Project) error { return nil }

// Project returns one project.
func (s *Store) Project(name string) (api.Project, error) { return api.Project{}, nil }

// Projects returns all projects sorted by name.
func (s *Store) Projects() ([]api.Project, error) { return nil, nil }

// UpdateProject atomically modifies a project; if fn fails nothing changes.
func (s *Store) UpdateProject(name string, fn func(*api.Project) error) (api.Project, error) {
	return api.Project{}, nil
}

// DeleteProject removes a project and its secrets.
func (s *Store) DeleteProject(name string) error { return nil }

// Secret is one decrypted project secret.
type Secret struct{ Key, Value string }

// String redacts the value.
func (s Secret) String() string { return s.Key + "=<redacted>" }

// PutSecret stores an encrypted secret.
func (s *Store) PutSecret(project, key, value string) error { return nil }

// SecretKeys lists a project's secret keys, sorted, never values.
func (s *Store) SecretKeys(project string) ([]api.SecretInfo, error) { return nil, nil }

// Secrets returns a project's decrypted secrets sorted by key.
func (s *Store) Secrets(project string) ([]Secret, error) { return nil, nil }

// DeleteSecret removes one secret.
func (s *Store) DeleteSecret(project, key string) error { return nil }
