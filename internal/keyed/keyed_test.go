package keyed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// One container's lifecycle is serialized: while one holder has the lock
// a second waits, a third with a deadline gives up with the context's
// error; once all are done no entry is kept.
func TestKeyLockSerializesAndForgets(t *testing.T) {
	var k Lock
	unlockA, err := k.Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := k.Lock(context.Background(), "c2") // another key is free
	if err != nil {
		t.Fatal(err)
	}
	other()
	got := make(chan func(), 1)
	go func() {
		u, err := k.Lock(context.Background(), "c1")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := k.Lock(ctx, "c1"); !errors.Is(err, context.DeadlineExceeded) {
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
	if _, err := k.Lock(ctx2, "c1"); !errors.Is(err, context.DeadlineExceeded) {
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
	f := NewFlight()
	release := make(chan struct{})
	started := make(chan struct{})
	calls := 0
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = f.Do("k", func() error {
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
		errs[1] = f.Do("k", func() error { calls++; return errors.New("second") })
	}()
	time.Sleep(100 * time.Millisecond) //nolint:forbidigo // lets the second caller arrive (its wait is internal to Do; no hook to observe it)
	close(release)
	wg.Wait()
	if calls != 1 || errs[0] == nil || errs[0].Error() != "first" || errs[1] == nil || errs[1].Error() != "first" {
		t.Fatalf("calls %d, errors %v; want one call whose error both share", calls, errs)
	}
	if err := f.Do("k", func() error { calls++; return nil }); err != nil || calls != 2 {
		t.Fatalf("later call: %v, calls %d", err, calls)
	}
}
