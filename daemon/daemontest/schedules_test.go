package daemontest_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/client"
	"remote/daemon/daemontest"
	"remote/internal/testkit"
)

// waitUntil polls cond for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, cond, "waiting for %s", what)
}

func wantStatus(t *testing.T, what string, err error, status int, text string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Status != status || !strings.Contains(e.Message, text) {
		t.Fatalf("%s: %v, want %d containing %q", what, err, status, text)
	}
}

// TestScheduleRoutes: create, list, patch, run now, history (with the
// turn's seq, whose diff the chat's diff route serves), delete; another
// user's chat and schedule are not found; bad input names its field.
func TestScheduleRoutes(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	ctx := context.Background()
	alice, bob := d.Client("alice"), d.Client("bob")
	chat, err := alice.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := alice.CreateSchedule(ctx, chat.ID, api.ScheduleRequest{Cron: "*/5 * * * *", Prompt: "check the build", Timezone: "Europe/Paris"})
	if err != nil {
		t.Fatal(err)
	}
	if sc.ChatID != chat.ID || sc.Overlap != "skip" || !sc.Enabled || sc.Timezone != "Europe/Paris" || sc.NextRun == nil || sc.Created.IsZero() || len(sc.ID) != 12 {
		t.Fatalf("created %+v", sc)
	}
	if l, err := alice.Schedules(ctx, chat.ID); err != nil || len(l) != 1 || l[0].ID != sc.ID {
		t.Fatalf("list: %+v %v", l, err)
	}

	// Bad input: 400 naming the field.
	for _, c := range []struct {
		req   api.ScheduleRequest
		field string
	}{
		{api.ScheduleRequest{Cron: "every day", Prompt: "x"}, "cron:"},
		{api.ScheduleRequest{Cron: "* * * * *", Prompt: "x", Timezone: "Europe/Nowhere"}, "timezone:"},
		{api.ScheduleRequest{Cron: "* * * * *", Prompt: ""}, "prompt:"},
		{api.ScheduleRequest{Cron: "* * * * *", Prompt: "x", Overlap: "twice"}, "overlap:"},
	} {
		_, err := alice.CreateSchedule(ctx, chat.ID, c.req)
		wantStatus(t, "create "+c.field, err, 400, c.field)
	}
	_, err = alice.PatchSchedule(ctx, sc.ID, api.SchedulePatch{Cron: ptr("* * *")})
	wantStatus(t, "patch a bad cron", err, 400, "cron:")
	_, err = alice.RunSchedule(ctx, "NOT-AN-ID")
	wantStatus(t, "a bad schedule id", err, 400, "id:")

	// Another user: 404 everywhere, exactly like a missing schedule.
	_, err = bob.CreateSchedule(ctx, chat.ID, api.ScheduleRequest{Cron: "* * * * *", Prompt: "x"})
	wantStatus(t, "bob creates on alice's chat", err, 404, "not found")
	_, err = bob.Schedules(ctx, chat.ID)
	wantStatus(t, "bob lists", err, 404, "not found")
	_, err = bob.PatchSchedule(ctx, sc.ID, api.SchedulePatch{Prompt: ptr("rm -rf /")})
	wantStatus(t, "bob patches", err, 404, "not found")
	_, err = bob.RunSchedule(ctx, sc.ID)
	wantStatus(t, "bob runs", err, 404, "not found")
	_, err = bob.ScheduleHistory(ctx, sc.ID)
	wantStatus(t, "bob reads history", err, 404, "not found")
	_, err = bob.ScheduleToken(ctx, sc.ID)
	wantStatus(t, "bob makes a token", err, 404, "not found")
	wantStatus(t, "bob deletes", bob.DeleteSchedule(ctx, sc.ID), 404, "not found")

	// Patch: any field.
	p, err := alice.PatchSchedule(ctx, sc.ID, api.SchedulePatch{Prompt: ptr("check the tests"), Overlap: ptr("queue"), Enabled: ptr(false)})
	if err != nil || p.Prompt != "check the tests" || p.Overlap != "queue" || p.Enabled || p.NextRun != nil || p.Cron != "*/5 * * * *" {
		t.Fatalf("patch: %+v %v", p, err)
	}

	// Run now: the prompt runs as alice's through the prompt service.
	res, err := alice.RunSchedule(ctx, sc.ID)
	if err != nil || res.RunID == "" {
		t.Fatalf("run now: %+v %v", res, err)
	}
	var h []api.ScheduleRun
	waitUntil(t, "the run completed in the history", func() bool {
		h, err = alice.ScheduleHistory(ctx, sc.ID)
		return err == nil && len(h) == 1 && h[0].Outcome == "completed"
	})
	evs, err := alice.Events(ctx, chat.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h[0].Seq == 0 || evs[h[0].Seq-1].Type != api.EventUser || evs[h[0].Seq-1].Text != "check the tests" || h[0].End == nil {
		t.Fatalf("history %+v against events %+v", h[0], evs)
	}

	// Deleting the chat deletes its schedules.
	other, err := alice.CreateSchedule(ctx, chat.ID, api.ScheduleRequest{Cron: "@daily", Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := alice.DeleteChat(ctx, chat.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Store.Schedule(other.ID); err == nil {
			t.Fatal("a deleted chat's schedule is still stored")
		}
	}()

	// Delete: 204, then gone.
	if err := alice.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	_, err = alice.ScheduleHistory(ctx, sc.ID)
	wantStatus(t, "history after delete", err, 404, "not found")
	if n := d.AuditCount("POST /v1/chats/{id}/schedules"); n == 0 {
		t.Errorf("no audit line for schedule create")
	}
}

// TestScheduleOverlapThroughDaemon: fired while the chat runs, "skip"
// records a skipped run; "queue" queues the prompt on the chat's real
// queue, which runs when the turn ends.
func TestScheduleOverlapThroughDaemon(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	ctx := context.Background()
	alice := d.Client("alice")
	chat, err := alice.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	skip, err := alice.CreateSchedule(ctx, chat.ID, api.ScheduleRequest{Cron: "0 9 * * 1", Prompt: "skipped"})
	if err != nil {
		t.Fatal(err)
	}
	queue, err := alice.CreateSchedule(ctx, chat.ID, api.ScheduleRequest{Cron: "0 9 * * 1", Prompt: "queued", Overlap: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	d.Claude.SetHold(true)
	if _, err := alice.Prompt(ctx, chat.ID, api.PromptRequest{Text: "a long turn"}); err != nil {
		t.Fatal(err)
	}
	_, err = alice.RunSchedule(ctx, skip.ID)
	wantStatus(t, "skip while running", err, 409, "still running")
	if h, err := alice.ScheduleHistory(ctx, skip.ID); err != nil || len(h) != 1 || h[0].Outcome != "skipped" {
		t.Fatalf("skip history %+v %v", h, err)
	}
	res, err := alice.RunSchedule(ctx, queue.ID)
	if err != nil || res.QueueID == "" || res.RunID != "" {
		t.Fatalf("queue while running: %+v %v", res, err)
	}
	if q, err := alice.Queue(ctx, chat.ID); err != nil || len(q) != 1 || q[0].Text != "queued" {
		t.Fatalf("chat queue %+v %v", q, err)
	}
	// A second firing, removed from the queue before it runs, fails.
	res2, err := alice.RunSchedule(ctx, queue.ID)
	if err != nil || res2.QueueID == "" {
		t.Fatalf("queue again: %+v %v", res2, err)
	}
	if err := alice.Unqueue(ctx, chat.ID, res2.QueueID); err != nil {
		t.Fatal(err)
	}
	d.Claude.SetHold(false)
	if err := alice.Cancel(ctx, chat.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the queued schedule's turn completed", func() bool {
		h, err := alice.ScheduleHistory(ctx, queue.ID)
		return err == nil && len(h) == 2 && h[1].Outcome == "completed" && h[1].Seq > 0 &&
			h[0].Outcome == "failed" && strings.Contains(h[0].Error, "removed from the chat's queue")
	})
}

// fireRoutine POSTs /v1/schedules/{id}/fire on the daemon's socket with
// token as the bearer credential (as remote-web forwards a hook).
func fireRoutine(t *testing.T, d *daemontest.Daemon, id, auth string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.Socket)
	}}}
	req, err := http.NewRequest(http.MethodPost, "http://remoted/v1/schedules/"+id+"/fire", nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAttackRoutineTokenDaemon: a routine token fires its own schedule
// and no other; a wrong, missing or replaced token is 403 (constant-time
// compare of SHA-256 sums; the token is never stored or shown again).
func TestAttackRoutineTokenDaemon(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	ctx := context.Background()
	alice := d.Client("alice")
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
	tokA, err := alice.ScheduleToken(ctx, a.ID)
	if err != nil || !strings.HasPrefix(tokA, "rrt_") {
		t.Fatalf("token %q %v", tokA, err)
	}
	if _, err := alice.ScheduleToken(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	rec, err := d.Store.Schedule(a.ID)
	if err != nil || strings.Contains(string(rec.TokenHash), tokA) || len(rec.TokenHash) != 32 {
		t.Fatalf("stored token: %v (%d bytes)", err, len(rec.TokenHash))
	}
	for _, c := range []struct {
		what, id, auth string
	}{
		{"another schedule with A's token", b.ID, "Bearer " + tokA},
		{"a wrong token", a.ID, "Bearer " + wrongToken(tokA)},
		{"no token", a.ID, ""},
		{"a token not bearer", a.ID, tokA},
		{"an unknown schedule", "0123456789ab", "Bearer " + tokA},
	} {
		if got := fireRoutine(t, d, c.id, c.auth); got != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.what, got)
		}
	}
	if h, _ := alice.ScheduleHistory(ctx, b.ID); len(h) != 0 {
		t.Fatalf("schedule b ran with a's token: %+v", h)
	}
	if got := fireRoutine(t, d, a.ID, "Bearer "+tokA); got != http.StatusAccepted {
		t.Fatalf("A's token on A: %d, want 202", got)
	}
	var last []api.ScheduleRun
	defer func() {
		if t.Failed() {
			t.Logf("routine a's last history: %+v", last)
		}
	}()
	waitUntil(t, "routine a ran", func() bool {
		h, err := alice.ScheduleHistory(ctx, a.ID)
		last = h
		return err == nil && len(h) == 1 && h[0].Outcome == "completed"
	})
	// A new token replaces the old one.
	if _, err := alice.ScheduleToken(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := fireRoutine(t, d, a.ID, "Bearer "+tokA); got != http.StatusForbidden {
		t.Fatalf("a replaced token: %d, want 403", got)
	}
}

func ptr[T any](v T) *T { return &v }

// wrongToken is tok with its last character changed.
func wrongToken(tok string) string {
	last := "0"
	if strings.HasSuffix(tok, "0") {
		last = "1"
	}
	return tok[:len(tok)-1] + last
}
