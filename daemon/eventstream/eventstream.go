package eventstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/runhub"
)

// WriteTimeout bounds one write to a follower.
const WriteTimeout = 15 * time.Second

// RawEvents reads a chat's stored events as their wire JSON (the store's
// EventsRaw).
type RawEvents interface {
	EventsRaw(chatID string, afterSeq int64, limit int, fn func(seq int64, raw []byte) error) error
}

// Follower replays a chat's stored events as their wire JSON, then sends
// its sync and live events (the run hub's FollowRaw).
type Follower interface {
	FollowRaw(ctx context.Context, chatID string, since int64, replay func(seq int64, raw []byte) error, send func(api.Event) error) error
}

var _ Follower = (*runhub.Hub)(nil)

// Format frames one event's wire JSON (seq 0: an event not stored).
type Format func(buf *bytes.Buffer, seq int64, wire []byte)

// ReplayArray writes the stored events after since as one JSON array,
// straight from their stored wire JSON (EventsRaw: no decode and
// re-encode). The store reads in bounded batches and calls back outside its
// transactions, so memory stays bounded and a slow client never holds a
// store transaction open. A store failure after the array has started
// truncates it (logged); the client sees invalid JSON, never a silently
// short but valid answer.
func ReplayArray(w http.ResponseWriter, events RawEvents, chatID string, since int64, log hclog.Logger) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("["))
	var werr error // a failed write: the client is gone, nothing to log
	n := 0
	err := events.EventsRaw(chatID, since, 0, func(seq int64, raw []byte) error {
		if n > 0 {
			_, _ = w.Write([]byte(","))
		}
		n++
		_, werr = w.Write(raw)
		return werr
	})
	switch {
	case werr != nil:
		return nil
	case err != nil:
		log.Error("replay chat", "chat", chatID, "after", since, "sent", n, "error", err)
		return nil
	}
	_, _ = w.Write([]byte("]\n"))
	return nil
}

// NDJSON frames one event's wire JSON as an NDJSON line.
func NDJSON(buf *bytes.Buffer, _ int64, b []byte) {
	buf.Write(b)
	buf.WriteByte('\n')
}

// SSE frames one event's wire JSON as an SSE message, with id: SEQ
// for stored events.
func SSE(buf *bytes.Buffer, seq int64, b []byte) {
	if seq > 0 {
		buf.WriteString("id: " + strconv.FormatInt(seq, 10) + "\n")
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
}

// Follow follows the chat through hub, writing each event's wire JSON
// framed by format and flushing it, until ctx ends (the client went away
// or the server stops its streams).
// Replayed events go out as stored (FollowRaw); only sync and live events
// are encoded here.
func Follow(ctx context.Context, w http.ResponseWriter, hub Follower, chatID string, since int64, contentType string, format Format, log hclog.Logger) error {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush stream start: %w", err)
	}
	var buf bytes.Buffer
	write := func(seq int64, wire []byte) error {
		buf.Reset()
		format(&buf, seq, wire)
		_ = rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := hub.FollowRaw(ctx, chatID, since, write, func(ev api.Event) error {
		b, _ := json.Marshal(ev)
		return write(ev.Seq, b)
	})
	if errors.Is(err, runhub.ErrSlowSubscriber) {
		log.Info("follower dropped", "chat", chatID, "error", err)
	}
	return err
}
