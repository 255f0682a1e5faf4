package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
)

// schedule add, list, run, history and rm against the real daemon; bad
// input is the daemon's 400 naming the field; a prompt's control
// sequences never reach the terminal.
func TestScheduleCommands(t *testing.T) {
	fake := seeded(t)
	ctx := context.Background()
	r := runCtl(ctx, fake, "", "schedule", "add", "-cron", "*/5 * * * *", "-tz", "Europe/Paris", "-overlap", "queue", "abcdef012345", "check", "the \x1b]0;owned\x07build")
	m := regexp.MustCompile(`^([0-9a-f]{12})\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("schedule add: %+v", r)
	}
	id := m[1]
	r = runCtl(ctx, fake, "", "schedule", "list", "abcdef012345")
	if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "*/5 * * * *") || !strings.Contains(r.stdout, "Europe/Paris") ||
		!strings.Contains(r.stdout, "queue") || !strings.Contains(r.stdout, "check the build") || strings.ContainsAny(r.stdout, "\x1b\x07") {
		t.Fatalf("schedule list: %+v", r)
	}
	r = runCtl(ctx, fake, "", "schedule", "run", id)
	if r.code != 0 || !regexp.MustCompile(`^[0-9a-f]+\n$`).MatchString(r.stdout) {
		t.Fatalf("schedule run: %+v", r)
	}
	testkit.Eventually(t, time.Minute, func() bool {
		r = runCtl(ctx, fake, "", "schedule", "history", id)
		return r.code == 0 && strings.Contains(r.stdout, "completed")
	}, "the run in the history")
	if !strings.HasPrefix(r.stdout, "START") {
		t.Fatalf("schedule history: %+v", r)
	}
	r = runCtl(ctx, fake, "", "schedule", "add", "-cron", "61 * * * *", "abcdef012345", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "bad_request: cron:") {
		t.Fatalf("schedule add with a bad cron: %+v", r)
	}
	r = runCtl(ctx, fake, "", "schedule", "add", "-cron", "* * * * *", "-tz", "Mars/Base", "abcdef012345", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "bad_request: timezone:") {
		t.Fatalf("schedule add with a bad zone: %+v", r)
	}
	if r = runCtl(ctx, fake, "", "schedule", "add", "abcdef012345", "x"); r.code != 2 || !strings.Contains(r.stderr, "-cron is required") {
		t.Fatalf("schedule add without -cron: %+v", r)
	}
	if r = runCtl(ctx, fake, "", "schedule", "rm", id); r.code != 0 {
		t.Fatalf("schedule rm: %+v", r)
	}
	if r = runCtl(ctx, fake, "", "schedule", "rm", id); r.code != 1 || !strings.Contains(r.stderr, "not_found") {
		t.Fatalf("schedule rm twice: %+v", r)
	}
}
