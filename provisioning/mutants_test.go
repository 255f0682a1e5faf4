package provisioning

// Tests of provisioning's pure parts (flight, keylock, revert, warnlog)
// that kill the mutants gremlins found living there (make mutate
// PKGS=./provisioning; docs/testing.md).

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

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
	var w warnBackoff
	at := func(d time.Duration) string {
		clock = start.Add(d)
		buf.Reset()
		w.log(log, "lxd unreachable")
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
	w.reset()
	if got := at(184 * time.Minute); got != "[WARN]  lxd unreachable: next_warning_after=1m0s" {
		t.Fatalf("after reset: %q", got)
	}
}

// Undo steps run newest first, every one of them, once.
func TestReverterRunsAllUndoStepsNewestFirst(t *testing.T) {
	var order []int
	var r reverter
	for i := 1; i <= 3; i++ {
		r.add(func() { order = append(order, i) })
	}
	r.fail()
	r.fail()
	if len(order) != 3 || order[0] != 3 || order[1] != 2 || order[2] != 1 {
		t.Fatalf("undo order %v, want [3 2 1]", order)
	}
	r.add(func() { order = append(order, 9) })
	r.success()
	r.fail()
	if len(order) != 3 {
		t.Fatalf("undo ran after success: %v", order)
	}
}

// One container's lifecycle is serialized: while one holder has the lock
// a second waits, a third with a deadline gives up with the context's
// error; once all are done no entry is kept.
func TestKeyLockSerializesAndForgets(t *testing.T) {
	var k keyLock
	unlockA, err := k.lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := k.lock(context.Background(), "c2") // another key is free
	if err != nil {
		t.Fatal(err)
	}
	other()
	got := make(chan func(), 1)
	go func() {
		u, err := k.lock(context.Background(), "c1")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := k.lock(ctx, "c1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third locker = %v, want the deadline", err)
	}
	select {
	case <-got:
		t.Fatal("second locker got the lock while the first held it")
	default:
	}
	unlockA()
	unlockB := <-got
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := k.lock(ctx2, "c1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("locker while the second holds = %v, want the deadline", err)
	}
	unlockB()
	k.mu.Lock()
	n := len(k.m)
	k.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d lock entries kept after every holder left", n)
	}
}

// Callers of one key arriving while its call runs share its result; a
// later call runs again.
func TestFlightSharesOneCall(t *testing.T) {
	f := newFlight()
	release := make(chan struct{})
	started := make(chan struct{})
	calls := 0
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = f.do("k", func() error {
			calls++
			close(started)
			<-release
			return errors.New("first")
		})
	}()
	<-started
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[1] = f.do("k", func() error { calls++; return errors.New("second") })
	}()
	time.Sleep(100 * time.Millisecond) // let the second caller arrive
	close(release)
	wg.Wait()
	if calls != 1 || errs[0] == nil || errs[0].Error() != "first" || errs[1] == nil || errs[1].Error() != "first" {
		t.Fatalf("calls %d, errors %v; want one call whose error both share", calls, errs)
	}
	if err := f.do("k", func() error { calls++; return nil }); err != nil || calls != 2 {
		t.Fatalf("later call: %v, calls %d", err, calls)
	}
}
