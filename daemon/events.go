package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"remote/api"
	"remote/daemon/eventstream"
	"remote/internal/errdefs"
)

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
		return errdefs.InvalidArgument("follow: want true or false, got %q", q.Get("follow"))
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		if last := r.Header.Get("Last-Event-ID"); last != "" {
			if since, err = parseSince("Last-Event-ID", last); err != nil {
				return err
			}
		}
		return s.followEvents(w, r, c.ID, since, "text/event-stream", eventstream.SSE)
	}
	if follow {
		return s.followEvents(w, r, c.ID, since, "application/x-ndjson", eventstream.NDJSON)
	}
	return eventstream.ReplayArray(w, s.store, c.ID, since, s.log)
}

// followEvents streams the chat's events (eventstream.Follow) until the
// client goes away or the server stops its streams.
func (s *Server) followEvents(w http.ResponseWriter, r *http.Request, chatID string, since int64, contentType string, format eventstream.Format) error {
	ctx, cancel := s.streamContext(r.Context())
	defer cancel()
	return eventstream.Follow(ctx, w, s.hub, chatID, since, contentType, format, s.log)
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
			return errdefs.InvalidArgument("limit: want an integer from 1 to %d, got %q", historyMaxLimit, v)
		}
		limit = n
	}
	before, err := parseSince("before", q.Get("before"))
	if err != nil {
		return err
	}
	if q.Has("before") && before == 0 {
		return errdefs.InvalidArgument("before: want a seq of 1 or more, got %q", q.Get("before"))
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
