package prompt

import (
	"encoding/json"
	"time"

	"remote/api"
	"remote/daemon/store"
)

// Store is what the daemon needs of its durable state; *store.Store
// implements it. It is defined here, by its consumer, as the union of the
// small interfaces below, each one concern of the store; a part of the
// service (or a route package) that needs one of them takes that one.
type Store interface {
	ChatStore
	EventLog
	RunLog
	QueueStore
	UsageStore
}

// ChatStore keeps the chat records.
type ChatStore interface {
	CreateChat(c api.Chat) error
	Chat(id string) (api.Chat, error)
	Chats() ([]api.Chat, error)
	UpdateChat(id string, fn func(*api.Chat) error) (api.Chat, error)
	DeleteChat(id string) error
}

// EventLog is each chat's ordered, persisted events.
type EventLog interface {
	AppendAsync(chatID string, ev api.Event, done func(api.Event, error))
	// AppendAsyncIf stores ev only if cond, asked inside the commit after
	// every earlier commit's done callbacks ran, returns true.
	AppendAsyncIf(chatID string, ev api.Event, cond func() bool, done func(api.Event, error))
	// OnAppend announces every committed append in commit order (the run
	// hub broadcasts from it).
	OnAppend(fn func(chatID string, evs []api.Event))
	// UpdateChatAndAppend changes the chat and appends the events fn
	// returns in one transaction (restart recovery, run ends).
	UpdateChatAndAppend(id string, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error)
	// EventBytes is the stored size of a chat's events (its byte caps).
	EventBytes(chatID string) (int64, error)
	// StoredBytes is what each owner's chats hold (events and queues):
	// the storage guard's fair shares.
	StoredBytes() (map[string]int64, error)
	Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error
	// EventsRaw is Events handing each event's wire JSON (seq included)
	// instead of decoding it, byte for byte what json.Marshal of the event
	// gives.
	EventsRaw(chatID string, afterSeq int64, limit int, fn func(seq int64, raw []byte) error) error
	LastSeq(chatID string) (int64, error)
	// EventsBefore is the newest limit events' wire JSON before a seq,
	// oldest first, and whether older ones remain.
	EventsBefore(chatID string, before int64, limit int) ([][]byte, bool, error)
	CopyEvents(fromChat, toChat string) error
}

// RunLog keeps the record of each run in flight (runs that outlive the
// daemon); it goes with the chat's running mark.
type RunLog interface {
	// AppendAsyncAt is AppendAsyncIf that also stores the run's position.
	AppendAsyncAt(chatID string, ev api.Event, mark *store.RunMark, cond func() bool, done func(api.Event, error))
	PutRun(chatID string, rec store.RunRecord) error
	SetRunShim(chatID, runID string, shim json.RawMessage) error
	Run(chatID string) (store.RunRecord, bool, error)
	Runs() (map[string]store.RunRecord, error)
}

// QueueStore keeps a chat's queued prompts, stored apart from the chat
// record, which counts them.
type QueueStore interface {
	PushQueued(chatID string, q api.QueuedPrompt, ev api.Event, check func(c api.Chat, use store.QueueUse, size int64) error) (api.Event, error)
	Queued(chatID string) ([]api.QueuedPrompt, error)
	TakeQueued(chatID, qid string, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error)
}

// UsageStore keeps each run's token usage and cost (GET /v1/usage).
type UsageStore interface {
	RecordUsage(rec store.UsageRecord, cumulative bool) (store.UsageRecord, error)
	CopyUsageMarks(fromChat, toChat string) error
	Usage(from, to time.Time, fn func(store.UsageRecord) error) error
}

var _ Store = (*store.Store)(nil)
