package lxdconn

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Seams of the retry loops, replaced by tests that run hours of retries in
// an instant: now is the clock, sleep waits d or until ctx ends (false).
var (
	now = time.Now
	// Sleep waits d or until ctx ends (false); tests replace it.
	Sleep = func(ctx context.Context, d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
)

// First and longest gap between two "LXD unreachable" warnings of one
// retry loop.
const (
	firstWarnGap = time.Minute
	maxWarnGap   = time.Hour
)

// WarnBackoff backs off a retry loop's warnings as the retries back off:
// the first failure is a warning, later ones only once the gap since the
// last warning (1 min, doubling to 1 h) has passed; the rest are debug
// lines. A host without LXD thus logs a warning at start, after 1, 3, 7,
// 15, 31 and 63 minutes, then hourly, instead of one every 30 s forever.
type WarnBackoff struct {
	last time.Time
	gap  time.Duration
}

// Log writes msg at warn level when one is due, else at debug level.
func (w *WarnBackoff) Log(l hclog.Logger, msg string, args ...any) {
	t := now()
	if w.last.IsZero() || t.Sub(w.last) >= w.gap {
		if w.last.IsZero() {
			w.gap = firstWarnGap
		} else {
			w.gap = min(w.gap*2, maxWarnGap)
		}
		w.last = t
		l.Warn(msg, append(args, "next_warning_after", w.gap)...)
		return
	}
	l.Debug(msg, args...)
}

// Reset starts over after a success: the next failure warns at once.
func (w *WarnBackoff) Reset() { *w = WarnBackoff{} }
