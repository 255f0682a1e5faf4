package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"remote/api"
	"remote/daemon/daemontest"
)

// routineStack is remote-web in front of a real daemon (daemontest).
type routineStack struct {
	d   *daemontest.Daemon
	srv *httptest.Server
	h   *harness // login helpers only
}

func newRoutineStack(t *testing.T) *routineStack {
	t.Helper()
	d := daemontest.New(t, daemontest.Options{})
	s, err := New(Options{Socket: d.Socket, Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return &routineStack{d: d, srv: hs, h: &harness{srv: hs, web: s}}
}

func (rs *routineStack) do(t *testing.T, c *http.Client, method, path, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, rs.srv.URL+path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAttackRoutineToken: a routine token fires its own schedule through
// remote-web's hook and does nothing else: another schedule's hook, a
// wrong token, a GET of the hook, the session API (with or without a
// session) and the daemon's schedule routes all answer 403.
func TestAttackRoutineToken(t *testing.T) {
	rs := newRoutineStack(t)
	ctx := context.Background()
	alice := rs.d.Client(testUser)
	chat, err := alice.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := alice.CreateSchedule(ctx, chat.ID, api.ScheduleRequest{Cron: "0 9 * * *", Prompt: "routine a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := alice.CreateSchedule(ctx, chat.ID, api.ScheduleRequest{Cron: "0 9 * * *", Prompt: "routine b"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := alice.ScheduleToken(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	bearer := "Bearer " + tok
	session := rs.h.loggedIn(t)

	for _, c := range []struct {
		what, method, path, auth string
		client                   *http.Client
	}{
		{"another schedule's hook", "POST", "/hooks/routines/" + b.ID, bearer, nil},
		{"a wrong token", "POST", "/hooks/routines/" + a.ID, "Bearer " + api.RoutineTokenPrefix + strings.Repeat("0", 64), nil},
		{"no token", "POST", "/hooks/routines/" + a.ID, "", nil},
		{"reading the hook", "GET", "/hooks/routines/" + a.ID, bearer, nil},
		{"the session API", "GET", "/v1/chats", bearer, nil},
		{"the session API with a session", "GET", "/v1/chats", bearer, session},
		{"the schedule's history", "GET", "/v1/schedules/" + a.ID + "/history", bearer, session},
		{"the daemon's fire route through the proxy", "POST", "/v1/schedules/" + a.ID + "/fire", bearer, session},
		{"the page", "GET", "/", bearer, session},
	} {
		if got, body := rs.do(t, c.client, c.method, c.path, c.auth); got != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", c.what, got, body)
		}
	}
	if h, _ := alice.ScheduleHistory(ctx, b.ID); len(h) != 0 {
		t.Fatalf("schedule b ran: %+v", h)
	}
	if h, _ := alice.ScheduleHistory(ctx, a.ID); len(h) != 0 {
		t.Fatalf("schedule a ran from a refused request: %+v", h)
	}

	got, body := rs.do(t, nil, "POST", "/hooks/routines/"+a.ID, bearer)
	var fired api.RoutineFired
	if got != http.StatusAccepted || json.Unmarshal([]byte(body), &fired) != nil || fired.ChatID != chat.ID || fired.RunID == "" {
		t.Fatalf("the hook with its own token: %d %s, want 202 {chatId, runId}", got, body)
	}
	if strings.Contains(body, tok) {
		t.Fatal("the answer carries the token")
	}
}

// TestAttackRoutineTokenOnPreviewOrigin: a routine token on a preview
// origin is refused (403) before anything else, not taken for a missing
// preview cookie.
func TestAttackRoutineTokenOnPreviewOrigin(t *testing.T) {
	s, err := New(Options{Socket: "/x.sock", PreviewURL: "https://*.preview.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://x/hooks/routines/0123456789ab", nil)
	req.Host = "8080-0123456789abcdef.preview.example.net"
	req.Header.Set("Authorization", "Bearer "+api.RoutineTokenPrefix+strings.Repeat("ab", 32))
	s.PreviewHandler().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "routine token") {
		t.Fatalf("a routine token on a preview origin: %d %s, want 403", rec.Code, rec.Body)
	}
}
