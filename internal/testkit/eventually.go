package testkit

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test after timeout with
// msg (a fmt format with args) and, for a func() error, the last error cond
// returned. cond is either a func() bool (holds when true) or a func() error
// (holds when nil). It polls at once, then with a short backoff (1 ms,
// doubling up to 100 ms), so a condition that holds soon costs little and one
// that takes seconds is not polled in a busy loop.
//
// The timeout bounds a hang; it is not a timing assertion: pick it large
// (seconds to minutes) so a loaded machine does not fail the test. Call it
// from the test's goroutine (it calls t.Fatalf).
func Eventually[C func() bool | func() error](t testing.TB, timeout time.Duration, cond C, msg string, args ...any) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatalf("%s: not within %v: %v", fmt.Sprintf(msg, args...), timeout, err)
	}
}

// errNotYet is the last error of a func() bool condition that never held.
var errNotYet = errors.New("the condition never held")

// Poll is Eventually without the test, for a test that has something to
// do before it fails: nil once cond holds, else the last error (or "the
// condition never held" for a func() bool) once timeout has passed.
func Poll[C func() bool | func() error](timeout time.Duration, cond C) error {
	check := func() error {
		switch c := any(cond).(type) {
		case func() bool:
			if c() {
				return nil
			}
			return errNotYet
		case func() error:
			return c()
		}
		panic("unreachable")
	}
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := check()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(wait, time.Until(deadline)+time.Millisecond))
		wait = min(2*wait, 100*time.Millisecond)
	}
}
