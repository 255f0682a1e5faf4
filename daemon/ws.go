package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/internal/errdefs"
	"remote/providers"
)

// Chat socket timings (docs/api.md); Options.PingEvery and PongWait override
// the first two.
const (
	wsPingEvery    = 25 * time.Second
	wsPongWait     = 60 * time.Second
	wsWriteTimeout = 15 * time.Second
)

// The chat socket's message types, client to server.
const (
	msgPrompt              = "prompt"
	msgCancel              = "cancel"
	msgInteractionResponse = "interaction_response"
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 4096,
	// The gate already refused any request carrying a browser Origin that
	// did not come through remote-web, which checks Origin itself.
	CheckOrigin: func(*http.Request) bool { return true },
}

// wsConn serialises writes to one chat socket.
type wsConn struct {
	c  *websocket.Conn
	mu sync.Mutex
}

func (w *wsConn) send(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.c.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	return w.c.WriteJSON(v)
}

// sendRaw sends one event's wire JSON as send would send the event:
// json.Marshal output and a newline, one text message.
func (w *wsConn) sendRaw(raw []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.c.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	return w.c.WriteMessage(websocket.TextMessage, append(raw, '\n'))
}

func (w *wsConn) control(kind int, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.WriteControl(kind, data, time.Now().Add(wsWriteTimeout))
}

// transientError is a per-connection error event; never persisted.
func transientError(msg string) api.Event {
	return api.Event{T: time.Now().UnixMilli(), Type: api.EventError, Message: msg}
}

// handleChatSocket serves GET /ws/chat/{id}?since=SEQ (S1): replay, sync,
// live events; prompt, cancel and interaction_response messages in.
func (s *Server) handleChatSocket(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	since, err := parseSince("since", r.URL.Query().Get("since"))
	if err != nil {
		return err
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		// Upgrade already answered the client.
		s.log.Debug("chat socket upgrade failed", "chat", c.ID, "error", err)
		return nil
	}
	defer conn.Close()
	ws := &wsConn{c: conn}
	conn.SetReadLimit(MaxBodyBytes)
	_ = conn.SetReadDeadline(time.Now().Add(s.pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(s.pongWait)) })

	ctx, cancel := s.streamContext(r.Context())
	defer cancel()
	log := s.log.With("chat", c.ID, "user", UserFrom(r.Context()))

	// Registered before any frame is read, so the sync answering a refused
	// prompt queues behind every broadcast this client has yet to see.
	sub := s.hub.Subscribe(c.ID)
	defer sub.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // replay, sync, live
		defer wg.Done()
		defer cancel()
		err := sub.FollowRaw(ctx, since,
			func(_ int64, raw []byte) error { return ws.sendRaw(raw) },
			func(ev api.Event) error { return ws.send(ev) })
		switch {
		case errors.Is(err, runhub.ErrSlowSubscriber):
			log.Info("chat socket dropped: too slow", "error", err)
			_ = ws.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "too slow to keep up; reconnect with since=your last seq"))
		case err != nil:
			log.Debug("chat socket write failed", "error", err)
		case s.streamsStopped():
			_ = ws.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "daemon shutting down"))
		}
		_ = conn.SetReadDeadline(time.Now()) // unblock the reader
	}()
	go func() { // pings
		defer wg.Done()
		t := time.NewTicker(s.pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := ws.control(websocket.PingMessage, nil); err != nil {
					cancel()
					return
				}
			}
		}
	}()

	for ctx.Err() == nil {
		kind, data, err := conn.ReadMessage()
		if err != nil {
			break
		}
		if kind != websocket.TextMessage {
			_ = ws.send(transientError("binary frames are not accepted; send one JSON object per text frame"))
			continue
		}
		s.handleClientFrame(ctx, ws, sub, c.ID, data)
	}
	cancel()
	wg.Wait()
	return nil
}

// handleClientFrame acts on one client frame. Every problem is answered to
// this connection only, as a transient error; the connection stays open.
func (s *Server) handleClientFrame(ctx context.Context, ws *wsConn, sub *runhub.Subscription, chatID string, data []byte) {
	msg, err := decodeClientMessage(data)
	if err != nil {
		_ = ws.send(transientError("invalid message: " + err.Error()))
		var kind struct{ Type string }
		if json.Unmarshal(data, &kind) == nil && kind.Type == msgPrompt {
			sub.Sync() // a refused prompt, see below
		}
		return
	}
	switch msg.Type {
	case msgPrompt:
		qid, err := s.socketPrompt(ctx, chatID, msg)
		acked := false
		if err != nil && !errors.Is(err, runhub.ErrPromptAlreadyRunning) {
			// Refused for a lasting reason (its directory gone, the CLI
			// logged out, bad input...): a client re-sends a prompt that
			// comes back prompt_rejected (docs/api.md), so it is accepted
			// and recorded as a run of its own; the ack precedes its
			// user event.
			in := prompt.Input{Text: msg.Text, Mode: msg.Mode, Skills: msg.Skills, Synthetic: msg.Synthetic}
			rerr := s.svc.Refused(chatID, in, err, s.publicMessage(err), func() {
				if msg.ClientID != "" {
					acked = true
					_ = ws.send(s.promptAckOf(msg.ClientID, "", nil))
				}
			})
			switch {
			case rerr == nil:
				return
			case errors.Is(rerr, runhub.ErrPromptAlreadyRunning):
				err = rerr // a run took the chat meanwhile
			default:
				s.log.Warn("a refused prompt could not be recorded", "chat", chatID, "error", rerr)
			}
		}
		switch {
		case acked: // accepted, then its record failed: say why, once
			_ = ws.send(transientError(s.publicMessage(err)))
		case msg.ClientID != "":
			_ = ws.send(s.promptAckOf(msg.ClientID, qid, err))
		case err != nil:
			_ = ws.send(transientError(s.publicMessage(err)))
		}
		if err != nil {
			// A client marks the chat streaming when it sends a prompt and
			// idle only on a sync without running (docs/api.md): a refused
			// prompt gets, on this connection only, a sync with the chat's
			// real state — running:true while another run is active, so
			// the client waits for that run's closing sync.
			sub.Sync()
		}
	case msgCancel:
		if err := s.svc.Cancel(chatID); err != nil {
			_ = ws.send(transientError(s.publicMessage(err)))
		}
	case msgInteractionResponse:
		err := s.svc.Respond(chatID, providers.InteractionResponse{ID: msg.InteractionID, Result: msg.Result, Error: msg.Error})
		if err != nil {
			_ = ws.send(transientError(s.publicMessage(err)))
		}
	default:
		_ = ws.send(transientError(fmt.Sprintf("unknown message type %q (want prompt, cancel or interaction_response)", msg.Type)))
	}
}

// promptAckOf is the answer to a prompt frame with a clientId:
// prompt_accepted (with the queue id of a queued prompt) when err is nil,
// else prompt_rejected with the HTTP route's message and code.
func (s *Server) promptAckOf(clientID, qid string, err error) api.Event {
	ack := api.Event{T: time.Now().UnixMilli(), Type: api.EventSystem, Subtype: api.SubtypePromptAccepted}
	if err == nil {
		ack.Data, _ = jsonMarshal(ackData(clientID, qid))
		return ack
	}
	_, body := ToHTTP(err) // e.g. prompt_already_running
	ack.Subtype, ack.Message = api.SubtypePromptRejected, s.publicMessage(err)
	ack.Data, _ = jsonMarshal(map[string]string{"clientId": clientID, "code": body.Code})
	return ack
}

// publicMessage is the envelope message of err (internal errors hidden).
func (s *Server) publicMessage(err error) string {
	status, body := ToHTTP(err)
	if status >= 500 {
		s.log.Error("chat socket request failed", "error", err)
	}
	return body.Message
}

// decodeClientMessage strictly decodes one chat socket frame.
func decodeClientMessage(data []byte) (api.ClientMessage, error) {
	var msg api.ClientMessage
	if err := decodeStrict(data, &msg); err != nil {
		return msg, err
	}
	if msg.Type == "" {
		return msg, errdefs.InvalidArgument("type: required")
	}
	return msg, nil
}
