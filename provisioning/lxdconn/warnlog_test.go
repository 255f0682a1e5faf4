package lxdconn

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/lxdexec"
)

// TestFaultNoLXDWarnsWithBackoff runs four hours of Conn.Dial retries
// against a socket nothing listens on (a host without LXD) on a fake
// clock: the "lxd unreachable" warning comes at start, then after 1, 3, 7,
// 15, 31 and 63 minutes, then hourly — 9 warnings, not one per 30 s retry
// (about 480), which stay at debug level.
func TestFaultNoLXDWarnsWithBackoff(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	oldNow, oldSleep := now, Sleep
	t.Cleanup(func() { now, Sleep = oldNow, oldSleep })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now = func() time.Time { return clock }
	var warnedAt []time.Duration
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf, DisableTime: true})
	attempts := 0
	Sleep = func(_ context.Context, d time.Duration) bool {
		attempts++
		if strings.Count(buf.String(), "[WARN]") > len(warnedAt) {
			warnedAt = append(warnedAt, clock.Sub(start))
		}
		clock = clock.Add(d)
		if clock.Sub(start) > 4*time.Hour {
			cancel()
			return false
		}
		return true
	}
	NewConn(nil).Dial(ctx, lxdexec.Options{Socket: filepath.Join(t.TempDir(), "no-lxd.sock")}, log)

	want := []time.Duration{0, 61 * time.Second, 181 * time.Second, 421 * time.Second, 901 * time.Second,
		1861 * time.Second, 3781 * time.Second, 7381 * time.Second, 10981 * time.Second}
	if len(warnedAt) != len(want) {
		t.Fatalf("%d warnings in %d retries over 4 h (at %v), want %d at %v", len(warnedAt), attempts, warnedAt, len(want), want)
	}
	for i := range want {
		if warnedAt[i] != want[i] {
			t.Fatalf("warnings at %v, want %v", warnedAt, want)
		}
	}
	if d := strings.Count(buf.String(), "[DEBUG]"); d != attempts-len(want) {
		t.Fatalf("%d debug lines for %d quiet retries", d, attempts-len(want))
	}
}

// The warning is due again exactly when its gap (1 min, then doubling to
// at most 1 h) has passed; reset warns at once again.
func TestWarnBackoffExactGaps(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	oldNow := now
	t.Cleanup(func() { now = oldNow })
	now = func() time.Time { return clock }
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf, DisableTime: true})
	var w WarnBackoff
	at := func(d time.Duration) string {
		clock = start.Add(d)
		buf.Reset()
		w.Log(log, "lxd unreachable")
		return strings.TrimSpace(buf.String())
	}
	steps := []struct {
		at   time.Duration
		want string
	}{
		{0, "[WARN]  lxd unreachable: next_warning_after=1m0s"},
		{59 * time.Second, "[DEBUG] lxd unreachable"},
		{time.Minute, "[WARN]  lxd unreachable: next_warning_after=2m0s"},
		{3 * time.Minute, "[WARN]  lxd unreachable: next_warning_after=4m0s"},
		{7 * time.Minute, "[WARN]  lxd unreachable: next_warning_after=8m0s"},
		{15 * time.Minute, "[WARN]  lxd unreachable: next_warning_after=16m0s"},
		{31 * time.Minute, "[WARN]  lxd unreachable: next_warning_after=32m0s"},
		{63 * time.Minute, "[WARN]  lxd unreachable: next_warning_after=1h0m0s"},
		{123 * time.Minute, "[WARN]  lxd unreachable: next_warning_after=1h0m0s"},
		{182 * time.Minute, "[DEBUG] lxd unreachable"},
		{183 * time.Minute, "[WARN]  lxd unreachable: next_warning_after=1h0m0s"},
	}
	for _, s := range steps {
		if got := at(s.at); got != s.want {
			t.Fatalf("at %v: %q, want %q", s.at, got, s.want)
		}
	}
	w.Reset()
	if got := at(184 * time.Minute); got != "[WARN]  lxd unreachable: next_warning_after=1m0s" {
		t.Fatalf("after reset: %q", got)
	}
}
