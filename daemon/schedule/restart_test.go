package schedule

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"remote/api"
	"remote/daemon/store"
	"remote/internal/testkit"
)

// loop is one daemon's life on a store: a scheduler's Run until stop.
type loop struct {
	st     *store.Store
	p      *prompts
	s      *Scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

func startLoop(t *testing.T, path string) *loop {
	t.Helper()
	st, err := store.Open(path, store.Options{Key: key, Logger: testkit.Logger(t, "store")})
	if err != nil {
		t.Fatal(err)
	}
	l := &loop{st: st, p: &prompts{st: st}, done: make(chan struct{})}
	l.s, err = New(Options{Store: st, Prompts: l.p, CatchUp: true, Logger: testkit.Logger(t, "schedule")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() { defer close(l.done); l.s.Run(ctx) }()
	synctest.Wait() // Start has run; Run waits for the next boundary
	return l
}

// stop is the daemon stopping: the loop ends and the store is closed.
func (l *loop) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	<-l.done
	if err := l.st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleEveryMinuteAcrossRestart: on synctest's fake clock, a
// "*/1 * * * *" schedule fires at each minute boundary (its recorded
// start within ±5 s of it); stopped before a boundary and started again
// (a new scheduler on the same store) after it passed, the missed run
// runs exactly once at start, and the next boundaries keep firing; a
// restart at the very instant of a run does not run it again.
func TestScheduleEveryMinuteAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remoted.db")
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now().UTC() // the bubble's clock: 2000-01-01 00:00:00
		minute := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		sleepUntil := func(at time.Time) {
			time.Sleep(time.Until(at)) //nolint:forbidigo // synctest's fake clock: the sleep is the subject
			synctest.Wait()
		}
		l := startLoop(t, path)
		if err := l.st.CreateChat(api.Chat{ID: "c0ffee000001", Owner: "alice", Provider: "claude"}); err != nil {
			t.Fatal(err)
		}
		sc, err := l.s.Create("alice", "c0ffee000001", api.ScheduleRequest{Cron: "*/1 * * * *", Prompt: "every minute"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		total := 0 // runs over all the daemon's lives
		expect := func(at string, runs int) {
			t.Helper()
			if n, _ := l.p.counts(); n != runs {
				t.Fatalf("%s (%s): %d runs in this life, want %d", at, time.Now().UTC().Format(time.TimeOnly), n, runs)
			}
		}
		// checkHistory asserts the newest history entry started within
		// ±5 s of want, and that the history holds total runs.
		checkHistory := func(want time.Time) {
			t.Helper()
			h, err := l.s.History("alice", sc.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != total {
				t.Fatalf("history has %d runs, want %d: %+v", len(h), total, h)
			}
			if d := h[0].Start.Sub(want); d < -5*time.Second || d > 5*time.Second || h[0].Outcome != api.RunRunning || h[0].Seq == 0 {
				t.Fatalf("newest run %+v: want started at %s ±5 s, running, with its turn", h[0], want.Format(time.TimeOnly))
			}
		}

		// First life: boundaries 00:01, 00:02, 00:03, nothing between.
		for i := 1; i <= 3; i++ {
			sleepUntil(minute(i).Add(-time.Second))
			expect("just before a boundary", i-1)
			sleepUntil(minute(i))
			total++
			expect("at a boundary", i)
			checkHistory(minute(i))
		}
		sleepUntil(minute(3).Add(30 * time.Second))
		l.stop(t) // down at 00:03:30, across the 00:04 boundary

		// Second life from 00:04:20: the missed 00:04 runs once, at start.
		time.Sleep(50 * time.Second) //nolint:forbidigo // synctest's fake clock: the daemon is down
		restart := time.Now().UTC()
		l = startLoop(t, path)
		total++
		expect("at start after a missed boundary", 1)
		checkHistory(restart)
		sleepUntil(minute(5).Add(-time.Second))
		expect("after the catch-up, before the next boundary", 1)
		for i := 5; i <= 6; i++ {
			sleepUntil(minute(i))
			total++
			expect("at a boundary after the restart", i-3)
			checkHistory(minute(i))
		}

		// Third life, at the very instant of the 00:06 run: nothing again.
		l.stop(t)
		l = startLoop(t, path)
		expect("restarted at the instant of a run", 0)
		sleepUntil(minute(7).Add(-time.Second))
		expect("restarted right after a run", 0)
		sleepUntil(minute(7))
		total++
		expect("the next boundary after a restart", 1)
		checkHistory(minute(7))
		l.stop(t)
	})
}
