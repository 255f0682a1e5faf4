package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
)

// schedule creates a schedule on chatID.
func (d *daemonProc) schedule(chatID string, req api.ScheduleRequest) api.Schedule {
	d.t.Helper()
	st, body := d.do("POST", "/v1/chats/"+chatID+"/schedules", req)
	var sc api.Schedule
	if err := json.Unmarshal(body, &sc); st != 201 || err != nil {
		d.t.Fatalf("create schedule: %d %s", st, body)
	}
	return sc
}

// history is the schedule's history, newest first.
func (d *daemonProc) history(id string) []api.ScheduleRun {
	d.t.Helper()
	st, body := d.do("GET", "/v1/schedules/"+id+"/history", nil)
	var h []api.ScheduleRun
	if err := json.Unmarshal(body, &h); st != 200 || err != nil {
		d.t.Fatalf("schedule history: %d %s", st, body)
	}
	return h
}

// waitHistory polls the schedule's history until it holds n runs, the
// newest of them ended, and returns it; more than n fails.
func (d *daemonProc) waitHistory(id string, n int, within time.Duration) []api.ScheduleRun {
	d.t.Helper()
	var h []api.ScheduleRun
	if err := testkit.Poll(within, func() error {
		h = d.history(id)
		switch {
		case len(h) < n:
			return fmt.Errorf("%d runs", len(h))
		case h[0].Outcome == api.RunRunning:
			return fmt.Errorf("the newest run still runs")
		}
		return nil
	}); err != nil {
		d.t.Fatalf("schedule %s: %v in %v: history %+v\nlogs:\n%s", id, err, within, h, d.logs)
	}
	if len(h) != n {
		d.t.Fatalf("schedule %s: %d runs, want %d (a run twice?): %+v", id, len(h), n, h)
	}
	return h
}

// nearBoundary asserts at is within ±5 s of want.
func nearBoundary(t *testing.T, what string, at, want time.Time) {
	t.Helper()
	if d := at.Sub(want); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("%s fired at %s, %v from its boundary %s (want within ±5 s)", what, at.Format(time.TimeOnly+".000"), d, want.Format(time.TimeOnly))
	}
}

// TestScheduleEveryMinuteAcrossDaemonRestart: the real remoted with a
// "*/1 * * * *" schedule on a loose Claude Code chat (the real CLI, a
// fake model). One run fires at a minute boundary; remoted is stopped
// across the next boundary and started again after it: exactly one
// catch-up run at start, then the next boundary's run, each within ±5 s
// of its time, each in the history with its outcome and turn, and each
// turn once in the chat's log. Takes two to three minutes of wall time.
func TestScheduleEveryMinuteAcrossDaemonRestart(t *testing.T) {
	d, dir := surviveDaemon(t)
	chat := d.createChat(dir)
	sc := d.schedule(chat.ID, api.ScheduleRequest{Cron: "*/1 * * * *", Prompt: "the minute's check"})
	if sc.NextRun == nil || sc.NextRun.Second() != 0 || sc.NextRun.Sub(sc.Created) > time.Minute {
		t.Fatalf("nextRun %v of a */1 schedule created %v", sc.NextRun, sc.Created)
	}
	b1 := *sc.NextRun

	h := d.waitHistory(sc.ID, 1, time.Until(b1)+90*time.Second)
	nearBoundary(t, "the first run", h[0].Start, b1)

	// Stop remoted now, before the next boundary, and start it again once
	// that boundary has passed.
	d.stop()
	down := time.Now()
	missed := down.Truncate(time.Minute).Add(time.Minute)
	if missed.Sub(b1) > time.Minute {
		t.Logf("the first run ended late: remoted is down across %s instead of %s", missed.Format(time.TimeOnly), b1.Add(time.Minute).Format(time.TimeOnly))
	}
	testkit.Eventually(t, time.Until(missed)+10*time.Second, func() bool { return time.Now().After(missed.Add(2 * time.Second)) }, "the boundary %s passes while remoted is down", missed.Format(time.TimeOnly))
	restart := time.Now()
	t.Logf("remoted down from %s to %s, across %s", down.Format(time.TimeOnly+".000"), restart.Format(time.TimeOnly+".000"), missed.Format(time.TimeOnly))
	d.start()
	up := time.Now()
	next := missed.Add(time.Minute)

	h = d.waitHistory(sc.ID, 2, 90*time.Second)
	if h[0].Start.Before(restart.Add(-time.Second)) || h[0].Start.After(up.Add(5*time.Second)) {
		t.Errorf("the catch-up run started at %s, want at remoted's start (%s to %s)", h[0].Start.Format(time.TimeOnly+".000"),
			restart.Format(time.TimeOnly+".000"), up.Format(time.TimeOnly+".000"))
	}
	if !h[0].Start.Before(next) {
		t.Fatalf("no catch-up run before the next boundary %s: history %+v", next.Format(time.TimeOnly), h)
	}

	h = d.waitHistory(sc.ID, 3, time.Until(next)+90*time.Second)
	nearBoundary(t, "the run after the restart", h[0].Start, next)

	// Three runs, each once: its outcome and its turn (the seq of its user
	// event, distinct, in order), and three user turns in the chat's log.
	evs := d.events(chat.ID)
	users := map[int64]bool{}
	for _, ev := range evs {
		if ev.Type == api.EventUser {
			users[ev.Seq] = true
			if !strings.Contains(ev.Text, "the minute's check") {
				t.Errorf("user turn %d: %q", ev.Seq, ev.Text)
			}
		}
	}
	if len(users) != 3 {
		t.Errorf("%d user turns in the chat, want 3 (one per run): %s", len(users), summarize(evs))
	}
	for i, run := range h {
		if run.Outcome != api.RunCompleted || run.End == nil || run.Seq == 0 || !users[run.Seq] {
			t.Errorf("run %d: %+v, want completed with its turn's seq", i, run)
		}
		if i > 0 && (run.Seq >= h[i-1].Seq || !run.Start.Before(h[i-1].Start)) {
			t.Errorf("runs %d and %d out of order: %+v", i-1, i, h)
		}
	}
	for _, run := range h {
		t.Logf("run at %s: %s, turn %d", run.Start.Format(time.TimeOnly+".000"), run.Outcome, run.Seq)
		if run.Start.After(down) && run.Start.Before(restart) {
			t.Errorf("a run while remoted was down: %+v", run)
		}
	}
}
