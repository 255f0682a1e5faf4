// Package webhook POSTs run notifications (approval waiting, run completed,
// run failed) to the configured webhook, from the run hub's stored events,
// with retries and without ever sending a secret or an agent's text. It
// imports only api and hclog: never the HTTP layer, the prompt service or
// the hub (the server hands it events through Hub.Observe).
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
)

// Notification event names (docs/api.md, "Notifications").
const (
	NotifyApprovalWaiting = "approval_waiting"
	NotifyRunCompleted    = "run_completed"
	NotifyRunFailed       = "run_failed"
)

// Notification is the JSON body POSTed to the webhook. It carries the
// chat's title and nothing else an agent wrote, and never a secret.
type Notification struct {
	Event   string `json:"event"`
	ChatID  string `json:"chatId"`
	Title   string `json:"title"`
	Project string `json:"project,omitempty"`
	Owner   string `json:"owner"`
	Seq     int64  `json:"seq"`
	At      string `json:"at"` // RFC 3339, UTC
}

// NotifierOptions configures a Notifier.
type NotifierOptions struct {
	URL string
	// Headers are sent with every POST (e.g. Authorization); their values
	// are never logged.
	Headers map[string]string
	Logger  hclog.Logger
	// Client defaults to one with a 10 s timeout.
	Client *http.Client
	// QueueLen bounds the notifications waiting; 0: 256. When it is full the
	// newest is dropped and logged: a run never waits for the webhook.
	QueueLen int
	// Attempts per notification (0: 5) and the first retry delay (0: 1 s,
	// doubled after each failure, at most 1 min).
	Attempts int
	Backoff  time.Duration
}

// Notifier delivers run notifications to a webhook from a bounded queue in
// its own goroutine, retrying with backoff.
type Notifier struct {
	o     NotifierOptions
	chats func(id string) (api.Chat, error)
	queue chan Notification
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// NewNotifier starts a notifier; chat looks up a chat's title, project and
// owner. Close stops it.
func NewNotifier(o NotifierOptions, chat func(id string) (api.Chat, error)) *Notifier {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.QueueLen <= 0 {
		o.QueueLen = 256
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	n := &Notifier{o: o, chats: chat, queue: make(chan Notification, o.QueueLen), stop: make(chan struct{}), done: make(chan struct{})}
	go n.loop()
	return n
}

// Observe is a hub observer: it maps a stored chat event to a
// notification and queues it without blocking.
func (n *Notifier) Observe(chatID string, ev api.Event) {
	var kind string
	switch ev.Type {
	case api.EventInteractionRequest:
		kind = NotifyApprovalWaiting
	case api.EventComplete:
		kind = NotifyRunCompleted
	case api.EventError:
		kind = NotifyRunFailed
	default:
		return
	}
	at := time.UnixMilli(ev.T).UTC()
	if ev.T == 0 {
		at = time.Now().UTC()
	}
	// The chat's title, project and owner are read by the delivery
	// goroutine: Observe runs on the store's commit path.
	msg := Notification{Event: kind, ChatID: chatID, Seq: ev.Seq, At: at.Format(time.RFC3339Nano)}
	select {
	case n.queue <- msg:
	default:
		n.o.Logger.Warn("notification dropped: queue full", "chat", chatID, "event", kind, "seq", ev.Seq)
	}
}

// Close stops delivery; notifications still queued are dropped.
func (n *Notifier) Close() {
	n.once.Do(func() { close(n.stop) })
	<-n.done
}

func (n *Notifier) loop() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case msg := <-n.queue:
			c, err := n.chats(msg.ChatID)
			if err != nil {
				n.o.Logger.Warn("notification dropped: chat not readable", "chat", msg.ChatID, "event", msg.Event, "error", err)
				continue
			}
			msg.Title, msg.Project, msg.Owner = c.Title, c.Project, c.Owner
			n.deliver(msg)
		}
	}
}

// deliver POSTs msg until a 2xx answer or the attempts run out.
func (n *Notifier) deliver(msg Notification) {
	body, _ := json.Marshal(msg)
	wait := n.o.Backoff
	var err error
	for attempt := 1; attempt <= n.o.Attempts; attempt++ {
		if err = n.post(body); err == nil {
			return
		}
		if attempt == n.o.Attempts {
			break
		}
		select {
		case <-n.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
	n.o.Logger.Warn("notification not delivered", "chat", msg.ChatID, "event", msg.Event, "seq", msg.Seq, "attempts", n.o.Attempts, "error", err)
}

func (n *Notifier) post(body []byte) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.o.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "remoted")
	for k, v := range n.o.Headers {
		req.Header.Set(k, v)
	}
	resp, err := n.o.Client.Do(req)
	if err != nil {
		// The URL may hold a token in its query: report only what failed.
		return fmt.Errorf("webhook POST failed: %w", unwrapURLError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// unwrapURLError drops the *url.Error wrapper, whose text repeats the URL.
func unwrapURLError(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}
