package daemon

import (
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
)

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
	sub := s.workspace.Subscribe(user)
	defer s.workspace.Unsubscribe(sub)
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
		case <-sub.Dropped():
			_ = ws.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "too slow to keep up; reconnect for a new snapshot"))
			return nil
		case data := <-sub.C():
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
			s.workspace.Decorate(&c)
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
