package daemon

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"remote/api"
	"remote/daemon/store"
	"remote/internal/errdefs"
)

// usageGroupings are the by= values of GET /v1/usage.
var usageGroupings = []string{"chat", "project", "user", "provider", "day"}

// handleUsage serves GET /v1/usage?by=chat|project|user|provider|day
// [&from=&to=]: usage rows of the caller's own runs (every user's for an
// administrator acting as itself, IsAdmin), summed per key, sorted by key. from and to are dates (YYYY-MM-DD,
// UTC; to inclusive) or RFC 3339 times (to exclusive).
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	by := q.Get("by")
	if !slices.Contains(usageGroupings, by) {
		return errdefs.InvalidArgument("by: want one of chat, project, user, provider, day, got %q", by)
	}
	from, err := parseUsageTime("from", q.Get("from"), false)
	if err != nil {
		return err
	}
	to, err := parseUsageTime("to", q.Get("to"), true)
	if err != nil {
		return err
	}
	user, all := UserFrom(r.Context()), IsAdmin(r)
	rows := map[string]*api.UsageRow{}
	err = s.store.Usage(from, to, func(u store.UsageRecord) error {
		if !all && u.Owner != user {
			return nil
		}
		var key string
		switch by {
		case "chat":
			key = u.ChatID
		case "project":
			key = u.Project // "" groups the loose chats
		case "user":
			key = u.Owner
		case "provider":
			key = u.Provider
		case "day":
			key = time.UnixMilli(u.T).UTC().Format(time.DateOnly)
		}
		row := rows[key]
		if row == nil {
			row = &api.UsageRow{Key: key}
			rows[key] = row
		}
		row.Runs++
		row.InputTokens += u.InputTokens
		row.OutputTokens += u.OutputTokens
		row.CacheReadTokens += u.CacheReadTokens
		row.CacheCreationTokens += u.CacheCreationTokens
		row.CostUSD += u.CostUSD
		return nil
	})
	if err != nil {
		return fmt.Errorf("read usage: %w", err)
	}
	out := api.UsageResponse{Rows: make([]api.UsageRow, 0, len(rows))}
	for _, row := range rows {
		out.Rows = append(out.Rows, *row)
	}
	slices.SortFunc(out.Rows, func(a, b api.UsageRow) int { return cmp.Compare(a.Key, b.Key) })
	return writeJSON(w, http.StatusOK, out)
}

// parseUsageTime reads a from/to bound: "" (open), a date, or RFC 3339. A
// date as the upper bound includes that whole day.
func parseUsageTime(name, v string, upper bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		if upper {
			d = d.AddDate(0, 0, 1)
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errdefs.InvalidArgument("%s: want a date (2006-01-02) or an RFC 3339 time, got %q", name, v)
	}
	return t, nil
}
