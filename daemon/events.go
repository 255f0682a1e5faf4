package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"remote/api"
	"remote/daemon/runhub"
)

// streamWriteTimeout bounds one write to a follower.
const streamWriteTimeout = 15 * time.Second

// handleEvents serves GET /v1/chats/{id}/events: a JSON array replay by
// default, NDJSON replay-then-live with follow=true, and SSE (id: SEQ,
// honouring Last-Event-ID) when the client accepts text/event-stream.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	since, err := parseSince("since", q.Get("since"))
	if err != nil {
		return err
	}
	follow := false
	switch q.Get("follow") {
	case "", "false", "0":
	case "true", "1":
		follow = true
	default:
		return BadRequest("follow: want true or false, got %q", q.Get("follow"))
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		if last := r.Header.Get("Last-Event-ID"); last != "" {
			if since, err = parseSince("Last-Event-ID", last); err != nil {
				return err
			}
		}
		return s.streamEvents(w, r, c.ID, since, "text/event-stream", writeSSE)
	}
	if follow {
		return s.streamEvents(w, r, c.ID, since, "application/x-ndjson", writeNDJSON)
	}
	return s.replayArray(w, c.ID, since)
}

// replayArray writes the stored events after since as one JSON array,
// straight from their stored wire JSON (EventsRaw: no decode and
// re-encode). The store reads in bounded batches and calls back outside its
// transactions, so memory stays bounded and a slow client never holds a
// store transaction open. A store failure after the array has started
// truncates it (logged); the client sees invalid JSON, never a silently
// short but valid answer.
func (s *Server) replayArray(w http.ResponseWriter, chatID string, since int64) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("["))
	var werr error // a failed write: the client is gone, nothing to log
	n := 0
	err := s.store.EventsRaw(chatID, since, 0, func(seq int64, raw []byte) error {
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
		s.log.Error("replay chat", "chat", chatID, "after", since, "sent", n, "error", err)
		return nil
	}
	_, _ = w.Write([]byte("]\n"))
	return nil
}

// writeNDJSON frames one event's wire JSON as an NDJSON line.
func writeNDJSON(buf *bytes.Buffer, _ int64, b []byte) {
	buf.Write(b)
	buf.WriteByte('\n')
}

// writeSSE frames one event's wire JSON as an SSE message, with id: SEQ
// for stored events.
func writeSSE(buf *bytes.Buffer, seq int64, b []byte) {
	if seq > 0 {
		buf.WriteString("id: " + strconv.FormatInt(seq, 10) + "\n")
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
}

// streamEvents follows the chat, writing each event's wire JSON framed by
// format and flushing it, until the client goes away or the server stops.
// Replayed events go out as stored (FollowRaw); only sync and live events
// are encoded here.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, chatID string, since int64, contentType string, format func(buf *bytes.Buffer, seq int64, wire []byte)) error {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush stream start: %w", err)
	}
	ctx, cancel := s.streamContext(r.Context())
	defer cancel()
	var buf bytes.Buffer
	write := func(seq int64, wire []byte) error {
		buf.Reset()
		format(&buf, seq, wire)
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := s.hub.FollowRaw(ctx, chatID, since, write, func(ev api.Event) error {
		b, _ := json.Marshal(ev)
		return write(ev.Seq, b)
	})
	if errors.Is(err, runhub.ErrSlowSubscriber) {
		s.log.Info("follower dropped", "chat", chatID, "error", err)
	}
	return err
}

// History page sizes: the default and the largest a client may ask for.
const (
	historyDefaultLimit = 200
	historyMaxLimit     = 1000
)

// handleHistory serves GET /v1/chats/{id}/history?limit=N&before=SEQ: the
// newest limit events with seq < before (no bound when before is absent),
// so that a long chat opens with its last page instead of a full replay.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit := historyDefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > historyMaxLimit {
			return BadRequest("limit: want an integer from 1 to %d, got %q", historyMaxLimit, v)
		}
		limit = n
	}
	before, err := parseSince("before", q.Get("before"))
	if err != nil {
		return err
	}
	if q.Has("before") && before == 0 {
		return BadRequest("before: want a seq of 1 or more, got %q", q.Get("before"))
	}
	// LastSeq first: an event appended between the two reads is then
	// delivered by the socket from LastSeq, never lost between the two.
	last, err := s.store.LastSeq(c.ID)
	if err != nil {
		return fmt.Errorf("history of chat %s: %w", c.ID, err)
	}
	if before == 0 || before > last+1 {
		before = last + 1
	}
	raws, more, err := s.store.EventsBefore(c.ID, before, limit)
	if err != nil {
		return fmt.Errorf("history of chat %s: %w", c.ID, err)
	}
	page := api.HistoryPage{Events: make([]json.RawMessage, len(raws)), LastSeq: last, HasMore: more}
	for i, raw := range raws {
		page.Events[i] = raw
	}
	if more {
		var first struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(page.Events[0], &first); err != nil {
			return fmt.Errorf("history of chat %s: %w", c.ID, err)
		}
		page.NextBefore = first.Seq
	}
	return writeJSON(w, http.StatusOK, page)
}
