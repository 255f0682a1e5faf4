//go:build systemd

package main

import (
	"strings"
	"testing"
	"time"

	"remote/api"
)

// Runs under remote-shim outlive remoted.service (docs/architecture.md, "Runs
// that outlive the daemon"), in the real-systemd bed (systemd_test.go,
// systemd_chat_test.go).

// checkRunUnit asserts that the run's CLI runs in the transient unit
// remote-run-<runID>.service the shim asked systemd for, outside
// remoted.service's cgroup, so that restarting or stopping remoted (with
// KillMode=mixed) leaves it alone.
func (b *sdBed) checkRunUnit(runID string) {
	b.t.Helper()
	unit := "remote-run-" + runID + ".service"
	if got := b.show(unit, "ActiveState"); got != "active" {
		b.t.Errorf("%s is %s, want active while the run streams; units: %s\nremoted's warnings:\n%s", unit, got,
			b.must("systemctl", "list-units", "--all", "--no-pager", "--plain", "--no-legend", "remote-run-*"), b.journal("-p", "warning"))
		return
	}
	own, runs := b.show("remoted.service", "ControlGroup"), b.show(unit, "ControlGroup")
	if own == "" || runs == "" || strings.HasPrefix(runs, own) {
		b.t.Errorf("%s's cgroup %q, remoted.service's %q: want the run outside remoted's", unit, runs, own)
	}
	b.t.Logf("the run's CLI is in %s (cgroup %s), remoted in %s", unit, runs, own)
	if status := b.must("systemctl", "status", "--no-pager", "-l", unit); !strings.Contains(status, "/opt/claude/claude") {
		b.t.Errorf("the CLI is not in %s:\n%s", unit, status)
	}
	if status, _ := b.exec(nil, "systemctl", "status", "--no-pager", "-l", "remoted.service"); strings.Contains(string(status), "/opt/claude/claude") {
		b.t.Errorf("the CLI runs in remoted.service's cgroup:\n%s", status)
	}
}

// checkTurn asserts the events of the turn starting at index from: the
// whole reply exactly once, one complete, no error, no restart notice;
// seqs gapless over the whole chat.
func checkTurn(t *testing.T, evs []api.Event, from int, want string) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq gap: event %d has seq %d", i, ev.Seq)
		}
	}
	turn := evs[from:]
	if got := assistantText(turn); got != want {
		t.Errorf("assistant text:\n got %q\nwant %q", got, want)
	}
	if n := count(turn, api.EventComplete); n != 1 {
		t.Errorf("%d complete events, want 1: %s", n, summarize(turn))
	}
	for _, ev := range turn {
		if ev.Type == api.EventError || ev.Subtype == api.SubtypeDaemonRestarted {
			t.Errorf("%s/%s %q in a run that survives remoted", ev.Type, ev.Subtype, ev.Message)
		}
	}
}

// TestSystemdRunSurvivesRestart: a loose Claude Code run (the real CLI,
// a slow fake model) goes on across `systemctl restart remoted`, across
// `systemctl stop remoted` + `start` and across a crash (SIGKILL, restarted
// by systemd), under the shipped unit and the real systemd: every delta
// once, one complete, no error.
func TestSystemdRunSurvivesRestart(t *testing.T) {
	t.Parallel() // each in its own container
	const parts = 30
	reply := surviveReply(parts, 300*time.Millisecond)
	b := newRunBed(t, reply, reply, reply)
	chat := b.createChat()
	streaming := func(from int) func([]api.Event) bool {
		return func(evs []api.Event) bool {
			return len(evs) > from && (count(evs[from:], api.EventAssistantText) >= 3 || ended(evs[from:]))
		}
	}

	// systemctl restart remoted, mid-stream.
	runID := b.prompt(chat.ID, "count slowly")
	if evs := b.waitEvents(chat.ID, 90*time.Second, streaming(0)); ended(evs) {
		t.Fatalf("the run ended before the restart: %s", summarize(evs))
	}
	b.checkRunUnit(runID)
	pid := b.show("remoted.service", "MainPID")
	b.must("systemctl", "restart", "remoted.service")
	if got := b.show("remoted.service", "MainPID"); got == pid {
		t.Errorf("MainPID %s after systemctl restart: not restarted", got)
	}
	if st, body := b.do("GET", "/v1/runs", nil); st != 200 || !strings.Contains(string(body), runID) || !strings.Contains(string(body), `"shim":{"dir"`) {
		t.Errorf("GET /v1/runs after the restart: %d %s", st, body)
	}
	evs := b.waitEvents(chat.ID, 90*time.Second, ended)
	checkTurn(t, evs, 0, surviveText(parts))
	b.waitRunsEmpty()

	// systemctl stop remoted, a pause while the CLI streams on, start.
	from := len(evs)
	runID = b.prompt(chat.ID, "count slowly again")
	if evs := b.waitEvents(chat.ID, 90*time.Second, streaming(from)); ended(evs[from:]) {
		t.Fatalf("the second run ended before the stop: %s", summarize(evs[from:]))
	}
	b.checkRunUnit(runID)
	b.must("systemctl", "stop", "remoted.service")
	time.Sleep(2 * time.Second) //nolint:forbidigo // no request meanwhile: one would activate it
	if got := b.show("remoted.service", "ActiveState"); got != "inactive" {
		t.Fatalf("remoted.service %s after stop", got)
	}
	if got := b.show("remote-run-"+runID+".service", "ActiveState"); got != "active" {
		t.Errorf("the run's unit is %s while remoted is stopped, want active", got)
	}
	b.must("systemctl", "start", "remoted.service")
	evs = b.waitEvents(chat.ID, 90*time.Second, func(evs []api.Event) bool { return ended(evs[from:]) })
	checkTurn(t, evs, from, surviveText(parts))
	b.waitRunsEmpty()
	if got := b.show("remote-run-"+runID+".service", "LoadState"); got != "not-found" {
		t.Errorf("the run's unit is %s after the run ended, want it gone (not-found)", got)
	}

	// A crash: SIGKILL to everything in remoted.service's cgroup; systemd
	// restarts it (Restart=on-failure) and the new daemon re-attaches.
	from = len(evs)
	runID = b.prompt(chat.ID, "count slowly once more")
	if evs := b.waitEvents(chat.ID, 90*time.Second, streaming(from)); ended(evs[from:]) {
		t.Fatalf("the third run ended before the crash: %s", summarize(evs[from:]))
	}
	b.checkRunUnit(runID)
	pid, restarts := b.show("remoted.service", "MainPID"), b.show("remoted.service", "NRestarts")
	b.must("systemctl", "kill", "--signal=SIGKILL", "remoted.service")
	sdWait(t, "systemd restarted the killed remoted", 30*time.Second, func() bool {
		again := b.show("remoted.service", "MainPID")
		return again != pid && again != "0" && b.show("remoted.service", "NRestarts") != restarts &&
			b.show("remoted.service", "ActiveState") == "active"
	})
	evs = b.waitEvents(chat.ID, 90*time.Second, func(evs []api.Event) bool { return ended(evs[from:]) })
	checkTurn(t, evs, from, surviveText(parts))
	b.waitRunsEmpty()
}
