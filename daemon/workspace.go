package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/store"
)

// workspaceQueue bounds the messages one workspace subscriber may lag
// behind before it is dropped (it reconnects and gets a new snapshot).
const workspaceQueue = 1024

// Attention values of api.Chat.
const attentionApproval = "approval"

// Workspace fans chat and project changes out to the workspace sockets of
// their owners (GET /ws/workspace) and keeps which chats wait for an
// answer. It learns of changes from the store (every committed chat and
// project write, whoever made it) and of approvals from the hub.
type Workspace struct {
	log      hclog.Logger
	chat     func(id string) (api.Chat, error)
	running  func(id string) bool
	attnKick chan string // chats whose attention changed, for the worker

	mu        sync.Mutex
	subs      map[*workspaceSub]struct{}
	attention map[string]string // chat id → attention
}

type workspaceSub struct {
	user    string
	ch      chan []byte
	dropped chan struct{}
	once    sync.Once
}

func (s *workspaceSub) drop() { s.once.Do(func() { close(s.dropped) }) }

func newWorkspace(log hclog.Logger, chat func(string) (api.Chat, error), running func(string) bool) *Workspace {
	w := &Workspace{log: log, chat: chat, running: running, attnKick: make(chan string, workspaceQueue),
		subs: map[*workspaceSub]struct{}{}, attention: map[string]string{}}
	return w
}

// run publishes attention changes until ctx ends; the chat is read here,
// off the store's commit path where the hub observer runs.
func (w *Workspace) run(ctx context.Context) {
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

// decorate sets a chat's live fields. Running comes from the hub: a
// chat's stored mark is cleared just before its run lock is released, so
// a change hook uses the stored value instead (publishChat).
func (w *Workspace) decorate(c *api.Chat) {
	c.Running = w.running(c.ID)
	w.decorateAttention(c)
}

func (w *Workspace) decorateAttention(c *api.Chat) {
	w.mu.Lock()
	c.Attention = w.attention[c.ID]
	w.mu.Unlock()
}

// onStoreChange is the store's change hook.
func (w *Workspace) onStoreChange(ch store.Change) {
	switch {
	case ch.Chat != nil && ch.Deleted:
		w.mu.Lock()
		delete(w.attention, ch.Chat.ID)
		w.mu.Unlock()
		w.publish(ch.Chat.Owner, api.WorkspaceMessage{Type: api.ChatDelete, ID: ch.Chat.ID})
	case ch.Chat != nil:
		w.publishChat(*ch.Chat)
	case ch.Project != nil && ch.Deleted:
		w.publish(ch.Project.Owner, api.WorkspaceMessage{Type: api.ProjectDelete, ID: projectKey(*ch.Project)})
	case ch.Project != nil:
		p := *ch.Project
		w.publish(p.Owner, api.WorkspaceMessage{Type: api.ProjectUpsert, Project: &p})
	}
}

func (w *Workspace) publishChat(c api.Chat) {
	w.decorateAttention(&c)
	w.publish(c.Owner, api.WorkspaceMessage{Type: api.ChatUpsert, Chat: &c})
}

// observe is the hub observer: an interaction request makes its chat wait
// for the user until it is resolved or the run ends.
func (w *Workspace) observe(chatID string, ev api.Event) {
	var want string
	switch ev.Type {
	case api.EventInteractionRequest:
		want = attentionApproval
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
func (w *Workspace) publish(owner string, msg api.WorkspaceMessage) {
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

func (w *Workspace) subscribe(user string) *workspaceSub {
	s := &workspaceSub{user: user, ch: make(chan []byte, workspaceQueue), dropped: make(chan struct{})}
	w.mu.Lock()
	w.subs[s] = struct{}{}
	w.mu.Unlock()
	return s
}

func (w *Workspace) unsubscribe(s *workspaceSub) {
	w.mu.Lock()
	delete(w.subs, s)
	w.mu.Unlock()
}

// attentionOf is a chat's live attention.
func (w *Workspace) attentionOf(id string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attention[id]
}

// projectKey is what project.delete names a project by: its immutable id
// (a project stored before ids existed has one from the store's migration).
func projectKey(p api.Project) string { return cmp.Or(p.ID, p.Name) }

// handleWorkspaceSocket serves GET /ws/workspace: a snapshot of the
// caller's chats and projects, then every change to them as it commits.
func (s *Server) handleWorkspaceSocket(w http.ResponseWriter, r *http.Request) error {
	user := UserFrom(r.Context())
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.log.Debug("workspace socket upgrade failed", "error", err)
		return nil
	}
	defer conn.Close()
	ws := &wsConn{c: conn}
	conn.SetReadLimit(4096)
	_ = conn.SetReadDeadline(time.Now().Add(s.pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(s.pongWait)) })

	// Subscribe before reading the snapshot: a change committed meanwhile
	// is sent after it, and the client's state converges.
	sub := s.workspace.subscribe(user)
	defer s.workspace.unsubscribe(sub)
	snap, err := s.workspaceSnapshot(user)
	if err != nil {
		s.log.Error("workspace snapshot", "error", err)
		_ = ws.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "internal error"))
		return nil
	}
	if err := ws.send(snap); err != nil {
		return nil
	}

	ctx, cancel := s.streamContext(r.Context())
	defer cancel()
	go func() { // the client sends nothing; reading sees pongs and the close
		defer cancel()
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}()
	ping := time.NewTicker(s.pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			if s.streamsStopped() {
				_ = ws.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "daemon shutting down"))
			}
			return nil
		case <-sub.dropped:
			_ = ws.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "too slow to keep up; reconnect for a new snapshot"))
			return nil
		case data := <-sub.ch:
			if err := ws.sendRaw(data); err != nil {
				return nil
			}
		case <-ping.C:
			if err := ws.control(websocket.PingMessage, nil); err != nil {
				return nil
			}
		}
	}
}

// workspaceSnapshot is the caller's chats and projects with live fields.
func (s *Server) workspaceSnapshot(user string) (api.WorkspaceSnapshotMessage, error) {
	msg := api.WorkspaceSnapshotMessage{Type: api.WorkspaceSnapshot, Chats: []api.Chat{}, Projects: []api.Project{}}
	chats, err := s.store.Chats()
	if err != nil {
		return msg, err
	}
	for _, c := range chats {
		if c.Owner == user {
			s.workspace.decorate(&c)
			msg.Chats = append(msg.Chats, c)
		}
	}
	if s.projectStore != nil {
		projects, err := s.projectStore.Projects()
		if err != nil {
			return msg, err
		}
		for _, p := range projects {
			if p.Owner == "" || p.Owner == user {
				msg.Projects = append(msg.Projects, p)
			}
		}
	}
	return msg, nil
}
