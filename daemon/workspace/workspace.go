// Package workspace owns the workspace hub: it fans chat and project
// changes out to the workspace sockets of their owners and keeps which
// chats wait for an answer (attention). It learns of changes from the
// store's change hook and of approvals from the run hub's observer. It
// knows nothing of HTTP (package daemon serves /ws/workspace) and imports
// only api and the store.
package workspace

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/store"
)

// queueLen bounds the messages one workspace subscriber may lag
// behind before it is dropped (it reconnects and gets a new snapshot).
const queueLen = 1024

// AttentionApproval is the attention of a chat whose run waits for an answer.
const AttentionApproval = "approval"

// Hub fans chat and project changes out to the workspace sockets of
// their owners (GET /ws/workspace) and keeps which chats wait for an
// answer. It learns of changes from the store (every committed chat and
// project write, whoever made it) and of approvals from the hub.
type Hub struct {
	log      hclog.Logger
	chat     func(id string) (api.Chat, error)
	running  func(id string) bool
	attnKick chan string // chats whose attention changed, for the worker

	mu        sync.Mutex
	subs      map[*Sub]struct{}
	attention map[string]string // chat id → attention
}

// Sub is one workspace socket's subscription.
type Sub struct {
	user    string
	ch      chan []byte
	dropped chan struct{}
	once    sync.Once
}

// C delivers the encoded messages for the subscriber.
func (s *Sub) C() <-chan []byte { return s.ch }

// Dropped is closed when the subscriber fell too far behind: it must
// reconnect for a new snapshot.
func (s *Sub) Dropped() <-chan struct{} { return s.dropped }

func (s *Sub) drop() { s.once.Do(func() { close(s.dropped) }) }

// New returns a hub that reads chats with chat and live run state with
// running; Run must be started for attention changes to go out.
func New(log hclog.Logger, chat func(string) (api.Chat, error), running func(string) bool) *Hub {
	w := &Hub{log: log, chat: chat, running: running, attnKick: make(chan string, queueLen),
		subs: map[*Sub]struct{}{}, attention: map[string]string{}}
	return w
}

// Run publishes attention changes until ctx ends; the chat is read here,
// off the store's commit path where the hub observer runs.
func (w *Hub) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-w.attnKick:
			c, err := w.chat(id)
			if err != nil {
				continue // deleted meanwhile: its chat.delete went out
			}
			w.publishChat(c)
		}
	}
}

// Decorate sets a chat's live fields. Running comes from the hub: a
// chat's stored mark is cleared just before its run lock is released, so
// a change hook uses the stored value instead (publishChat).
func (w *Hub) Decorate(c *api.Chat) {
	c.Running = w.running(c.ID)
	w.decorateAttention(c)
}

func (w *Hub) decorateAttention(c *api.Chat) {
	w.mu.Lock()
	c.Attention = w.attention[c.ID]
	w.mu.Unlock()
}

// OnStoreChange is the store's change hook.
func (w *Hub) OnStoreChange(ch store.Change) {
	switch {
	case ch.Chat != nil && ch.Deleted:
		w.mu.Lock()
		delete(w.attention, ch.Chat.ID)
		w.mu.Unlock()
		w.publish(ch.Chat.Owner, api.WorkspaceMessage{Type: api.ChatDelete, ID: ch.Chat.ID})
	case ch.Chat != nil:
		w.publishChat(*ch.Chat)
	case ch.Project != nil && ch.Deleted:
		w.publish(ch.Project.Owner, api.WorkspaceMessage{Type: api.ProjectDelete, ID: ProjectKey(*ch.Project)})
	case ch.Project != nil:
		p := *ch.Project
		w.publish(p.Owner, api.WorkspaceMessage{Type: api.ProjectUpsert, Project: &p})
	}
}

func (w *Hub) publishChat(c api.Chat) {
	w.decorateAttention(&c)
	w.publish(c.Owner, api.WorkspaceMessage{Type: api.ChatUpsert, Chat: &c})
}

// Observe is the run hub's observer: an interaction request makes its chat wait
// for the user until it is resolved or the run ends.
func (w *Hub) Observe(chatID string, ev api.Event) {
	var want string
	switch ev.Type {
	case api.EventInteractionRequest:
		want = AttentionApproval
	case api.EventInteractionResolved, api.EventComplete, api.EventError:
	default:
		return
	}
	w.mu.Lock()
	changed := w.attention[chatID] != want
	if want == "" {
		delete(w.attention, chatID)
	} else {
		w.attention[chatID] = want
	}
	w.mu.Unlock()
	if changed {
		select {
		case w.attnKick <- chatID:
		default:
			w.log.Warn("workspace: attention change not published: queue full", "chat", chatID)
		}
	}
}

// publish sends msg to owner's subscribers (to every subscriber for a
// record without owner, which every user sees); a full queue drops the
// subscriber, which reconnects for a new snapshot.
func (w *Hub) publish(owner string, msg api.WorkspaceMessage) {
	data, err := json.Marshal(msg)
	if err != nil {
		w.log.Error("workspace: encode message", "type", msg.Type, "error", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.subs {
		if owner != "" && s.user != owner {
			continue
		}
		select {
		case s.ch <- data:
		default:
			delete(w.subs, s)
			s.drop()
		}
	}
}

// Subscribe adds a subscriber for user's records.
func (w *Hub) Subscribe(user string) *Sub {
	s := &Sub{user: user, ch: make(chan []byte, queueLen), dropped: make(chan struct{})}
	w.mu.Lock()
	w.subs[s] = struct{}{}
	w.mu.Unlock()
	return s
}

// Unsubscribe removes a subscriber.
func (w *Hub) Unsubscribe(s *Sub) {
	w.mu.Lock()
	delete(w.subs, s)
	w.mu.Unlock()
}

// AttentionOf is a chat's live attention.
func (w *Hub) AttentionOf(id string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attention[id]
}

// ProjectKey is what project.delete names a project by: its immutable id
// (a project stored before ids existed has one from the store's migration).
func ProjectKey(p api.Project) string { return cmp.Or(p.ID, p.Name) }
