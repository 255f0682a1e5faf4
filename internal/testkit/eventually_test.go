package testkit

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Eventually returns as soon as the condition holds, of either kind.
func TestEventuallyHolds(t *testing.T) {
	var n atomic.Int32
	Eventually(t, time.Minute, func() bool { return n.Add(1) >= 3 }, "a bool condition")
	var m atomic.Int32
	Eventually(t, time.Minute, func() error {
		if m.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	}, "an error condition")
	if n.Load() != 3 || m.Load() != 3 {
		t.Fatalf("polled %d and %d times, want 3 each", n.Load(), m.Load())
	}
}

// fatalTB records the failure Eventually reports instead of failing.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

// A condition that never holds fails with the message and the last error
// once the timeout has passed, not before; the polls back off (a fake
// clock: time is the subject here).
func TestEventuallyFailsWithLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var polls atomic.Int32
		f := &fatalTB{TB: t}
		start := time.Now()
		Eventually(f, 10*time.Second, func() error {
			return errors.New("poll " + string(rune('0'+polls.Add(1)%10)))
		}, "the %s", "widget")
		if waited := time.Since(start); waited < 10*time.Second {
			t.Errorf("gave up after %v, want the whole 10s", waited)
		}
		last := string(rune('0' + polls.Load()%10))
		if !strings.Contains(f.msg, "the widget") || !strings.Contains(f.msg, "poll "+last) {
			t.Errorf("failure %q does not name the message and the last error (poll %s)", f.msg, last)
		}
		// 1+2+4+...+64 ms, then 100 ms steps: about 100 polls in 10 s, not 10,000.
		if n := polls.Load(); n > 120 {
			t.Errorf("%d polls in 10s: no backoff", n)
		}
		f.msg = ""
		Eventually(f, time.Second, func() bool { return false }, "never")
		if !strings.Contains(f.msg, "never") || !strings.Contains(f.msg, errNotYet.Error()) {
			t.Errorf("failure %q", f.msg)
		}
	})
}
