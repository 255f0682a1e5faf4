package provisioning

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
	oldNow, oldSleep := now, sleep
	t.Cleanup(func() { now, sleep = oldNow, oldSleep })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now = func() time.Time { return clock }
	var warnedAt []time.Duration
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf, DisableTime: true})
	attempts := 0
	sleep = func(_ context.Context, d time.Duration) bool {
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
