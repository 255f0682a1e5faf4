package lxdexec

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"remote/lxdexec/lxdws"
)

// Event types and lifecycle actions used by this project.
const (
	EventTypeLifecycle = "lifecycle"
	EventTypeOperation = "operation"
	EventTypeLogging   = "logging"
	// EventReconnected is synthesized by Events after the stream was
	// re-established: events may have been missed, so consumers resync.
	EventReconnected = "lxdexec-reconnected"

	ActionInstanceCreated   = "instance-created"
	ActionInstanceStarted   = "instance-started"
	ActionInstanceStopped   = "instance-stopped"
	ActionInstanceShutdown  = "instance-shutdown"
	ActionInstanceRestarted = "instance-restarted"
	ActionInstanceDeleted   = "instance-deleted"
	ActionInstanceUpdated   = "instance-updated"
	ActionInstanceRenamed   = "instance-renamed"
)

// Event is one message of LXD's event stream.
type Event struct {
	Type      string
	Timestamp time.Time
	// Action is the lifecycle action, e.g. "instance-started".
	Action string
	// Source is the lifecycle source URL, e.g. "/1.0/instances/c1".
	Source string
	// Instance is the instance's name (metadata.name, else parsed from
	// Source), "" when the event concerns no instance.
	Instance string
	Project  string
	Location string
	// OldName is the instance's previous name in an instance-renamed event.
	OldName  string
	Metadata json.RawMessage
}

// Stopped reports whether the event says an instance stopped: LXD sends
// instance-stopped for a kill and instance-shutdown for a clean stop.
func (e Event) Stopped() bool {
	return e.Action == ActionInstanceStopped || e.Action == ActionInstanceShutdown
}

type eventJSON struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Metadata  json.RawMessage `json:"metadata"`
	Location  string          `json:"location"`
	Project   string          `json:"project"`
}

type lifecycleJSON struct {
	Action  string          `json:"action"`
	Source  string          `json:"source"`
	Name    string          `json:"name"`
	Project string          `json:"project"`
	Context json.RawMessage `json:"context"`
}

// decodeEvent decodes one event message.
func decodeEvent(raw []byte) (Event, error) {
	var ej eventJSON
	if err := json.Unmarshal(raw, &ej); err != nil {
		return Event{}, fmt.Errorf("lxd: decode event: %v: %w", err, ErrProtocol)
	}
	if ej.Type == "" {
		return Event{}, fmt.Errorf("lxd: event without type: %w", ErrProtocol)
	}
	ev := Event{Type: ej.Type, Timestamp: ej.Timestamp, Project: ej.Project, Location: ej.Location, Metadata: ej.Metadata}
	if ej.Type == EventTypeLifecycle {
		var lj lifecycleJSON
		if err := json.Unmarshal(ej.Metadata, &lj); err != nil {
			return Event{}, fmt.Errorf("lxd: decode lifecycle event: %v: %w", err, ErrProtocol)
		}
		ev.Action, ev.Source = lj.Action, lj.Source
		var ctxj struct {
			OldName string `json:"old_name"`
		}
		if json.Unmarshal(lj.Context, &ctxj) == nil { // best effort: context varies by action
			ev.OldName = ctxj.OldName
		}
		name, project := instanceFromSource(lj.Source)
		ev.Instance = nonEmpty(lj.Name, name)
		if ev.Project == "" {
			ev.Project = nonEmpty(lj.Project, project)
		}
	}
	return ev, nil
}

// instanceFromSource parses "/1.0/instances/<name>[/...][?project=p]"
// (or the legacy /1.0/containers/) into the instance name and project.
func instanceFromSource(src string) (name, project string) {
	u, err := url.Parse(src)
	if err != nil {
		return "", ""
	}
	project = u.Query().Get("project")
	for _, prefix := range []string{"/1.0/instances/", "/1.0/containers/", "/1.0/virtual-machines/"} {
		if rest, ok := strings.CutPrefix(u.Path, prefix); ok {
			name, _, _ = strings.Cut(rest, "/")
			return name, project
		}
	}
	return "", project
}

// eventBuffer bounds the events waiting for the consumer; when it is full
// reading stops, and LXD drops a listener that stalls for 5 s (Events then
// reconnects and sends EventReconnected).
const eventBuffer = 256

// Events subscribes to the server's event stream for the given types
// (default: lifecycle) in the client's project. The first connection is
// made before returning; afterwards a dropped stream is re-established with
// backoff, announced by an EventReconnected event. The channel closes when
// ctx is done. Events from every client of the server arrive, in no
// guaranteed order.
func (c *Client) Events(ctx context.Context, types ...string) (<-chan Event, error) {
	if len(types) == 0 {
		types = []string{EventTypeLifecycle}
	}
	for _, t := range types {
		if t == "" || strings.ContainsAny(t, ",&?= ") {
			return nil, fmt.Errorf("lxd events: bad event type %q: %w", t, ErrBadRequest)
		}
	}
	path := "/1.0/events" + c.query(url.Values{"type": {strings.Join(types, ",")}})
	conn, err := c.dialEvents(ctx, path)
	if err != nil {
		return nil, err
	}
	ch := make(chan Event, eventBuffer)
	go func() {
		defer close(ch)
		backoff := 100 * time.Millisecond
		for {
			c.readEvents(ctx, conn, ch)
			conn.Conn.Close()
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, 5*time.Second)
				if conn, err = c.dialEvents(ctx, path); err == nil {
					break
				}
			}
			backoff = 100 * time.Millisecond
			select {
			case ch <- Event{Type: EventReconnected, Timestamp: time.Now()}:
			case <-ctx.Done():
				conn.Conn.Close()
				return
			}
		}
	}()
	return ch, nil
}

func (c *Client) dialEvents(ctx context.Context, path string) (*lxdws.Conn, error) {
	conn, resp, err := c.dialWS(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("lxd events: %w", errorFromHandshake("/1.0/events", resp, err))
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	conn.SetReadLimit(maxEventSize)
	lxdws.KeepReadingOnPongFailure(conn)
	return &lxdws.Conn{Conn: conn}, nil
}

// maxEventSize bounds one event message.
const maxEventSize = 4 << 20

// readEvents reads one connection until it fails or ctx ends. It never
// writes: LXD 5.0 ends the listener on any client message.
func (c *Client) readEvents(ctx context.Context, conn *lxdws.Conn, ch chan<- Event) {
	stop := context.AfterFunc(ctx, func() { conn.Conn.Close() })
	defer stop()
	for {
		_, raw, err := conn.Conn.ReadMessage()
		if err != nil {
			return
		}
		ev, err := decodeEvent(raw)
		if err != nil {
			continue
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
			return
		}
	}
}
