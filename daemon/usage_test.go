package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/user"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/providers"
)

// TestUsageRows: each run's usage is stored; Claude's cumulative session
// cost is charged per run as the difference (a fork continuing the session
// too); rows group by key and are the caller's own unless root.
func TestUsageRows(t *testing.T) {
	claudeCost := map[string]float64{} // prompt → the session's running total
	claude := &fakeProvider{id: "claude", caps: providers.Capabilities{Resume: true, Fork: true}, run: func(_ context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "s1"})
		var total float64
		for p, c := range claudeCost {
			if strings.HasSuffix(req.Prompt, p) {
				total = c
			}
		}
		emit(providers.Event{Type: providers.EventRunCompleted, Usage: json.RawMessage(fmt.Sprintf(
			`{"inputTokens":10,"cachedInputTokens":100,"cacheWriteInputTokens":7,"outputTokens":5,"totalTokens":122,"costUsd":%g,"turns":1}`, total))})
		return nil
	}}
	codex := &fakeProvider{id: "codex", run: func(_ context.Context, _ providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventRunCompleted, Usage: json.RawMessage(`{"inputTokens":1000,"cachedInputTokens":400,"outputTokens":50,"reasoningOutputTokens":20,"totalTokens":1050}`)})
		return nil
	}}
	claudeCost["one"], claudeCost["two"], claudeCost["three"] = 0.25, 0.625, 1.0
	ts := newTestServer(t, []providers.Provider{claude, codex})
	prompt := func(user, chat, text string) {
		t.Helper()
		if st, body := ts.do("POST", "/v1/chats/"+chat+"/prompt", user, api.PromptRequest{Text: text}); st != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", st, body)
		}
		ts.waitIdle(chat)
	}
	a := ts.createChat("alice", "claude")
	prompt("alice", a.ID, "one")
	prompt("alice", a.ID, "two")
	st, body := ts.do("POST", "/v1/chats/"+a.ID+"/fork", "alice", nil)
	if st != http.StatusCreated {
		t.Fatalf("fork: %d %s", st, body)
	}
	var fork api.Chat
	_ = json.Unmarshal(body, &fork)
	prompt("alice", fork.ID, "three") // the session's total goes on from 0.625
	c := ts.createChat("alice", "codex")
	prompt("alice", c.ID, "hi")
	b := ts.createChat("bob", "codex")
	prompt("bob", b.ID, "hi")

	rows := func(user, query string) []api.UsageRow {
		t.Helper()
		st, body := ts.do("GET", "/v1/usage"+query, user, nil)
		if st != http.StatusOK {
			t.Fatalf("usage%s: %d %s", query, st, body)
		}
		var out api.UsageResponse
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Rows
	}
	got := rows("alice", "?by=provider")
	want := []api.UsageRow{
		{Key: "claude", Runs: 3, InputTokens: 30, OutputTokens: 15, CacheReadTokens: 300, CacheCreationTokens: 21, CostUSD: 1.0},
		{Key: "codex", Runs: 1, InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 400},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("alice by provider:\n%+v\nwant\n%+v", got, want)
	}
	byChat := rows("alice", "?by=chat")
	costs := map[string]float64{}
	for _, r := range byChat {
		costs[r.Key] = r.CostUSD
	}
	if costs[a.ID] != 0.625 || costs[fork.ID] != 0.375 || len(byChat) != 3 {
		t.Fatalf("alice by chat %+v: want %s 0.625, fork %s 0.375 (the turn's own cost)", byChat, a.ID, fork.ID)
	}
	if got := rows("bob", "?by=user"); len(got) != 1 || got[0].Key != "bob" || got[0].Runs != 1 {
		t.Fatalf("bob sees %+v, want only his own", got)
	}
	// An administrator (the daemon's own uid, root under make test, acting
	// as itself) sees everyone's.
	if got := rows(selfName(t), "?by=user"); len(got) != 2 || got[0].Key != "alice" || got[0].Runs != 4 || got[1].Key != "bob" {
		t.Fatalf("the administrator %s sees %+v, want alice and bob", selfName(t), got)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	if got := rows("alice", "?by=day&from="+today+"&to="+today); len(got) != 1 || got[0].Key != today || got[0].Runs != 4 {
		t.Fatalf("by day %+v", got)
	}
	if got := rows("alice", "?by=day&to=2000-01-01"); len(got) != 0 {
		t.Fatalf("before 2000: %+v", got)
	}
	if got := rows("alice", "?by=project"); len(got) != 1 || got[0].Key != "" || got[0].Runs != 4 {
		t.Fatalf("loose chats by project %+v", got)
	}
	for q, msg := range map[string]string{
		"":                       `by: want one of chat, project, user, provider, day, got ""`,
		"?by=month":              `by: want one of chat, project, user, provider, day, got "month"`,
		"?by=day&from=yesterday": `from: want a date (2006-01-02) or an RFC 3339 time, got "yesterday"`,
	} {
		st, body := ts.do("GET", "/v1/usage"+q, "alice", nil)
		var e api.ErrorResponse
		_ = json.Unmarshal(body, &e)
		if st != http.StatusBadRequest || e.Error.Message != msg {
			t.Errorf("usage%s: %d %s, want 400 %q", q, st, body, msg)
		}
	}
	// Prometheus counters.
	st, body = ts.do("GET", "/metrics", "", nil)
	if st != http.StatusOK || !strings.Contains(string(body), `remoted_usage_tokens_total{kind="input",provider="codex"} 2000`) ||
		!strings.Contains(string(body), `remoted_usage_cost_usd_total{provider="claude"} 1`) {
		t.Errorf("metrics lack the usage counters:\n%s", body)
	}
}

// selfName is the login name of the uid running the test, which is also
// the daemon's own uid: acting as itself it is an administrator (root
// under make test, the developer's user under make test-short).
func selfName(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatalf("the test's own login name: %v", err)
	}
	return u.Username
}
