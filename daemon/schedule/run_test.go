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

// TestScheduleRunLoop: Run, on synctest's fake clock, fires at each
// boundary and wakes for a schedule created while it waits.
func TestScheduleRunLoop(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		st, err := store.Open(filepath.Join(dir, "remoted.db"), store.Options{Key: key, Logger: testkit.Logger(t, "store")})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.CreateChat(api.Chat{ID: "c0ffee000001", Owner: "alice", Provider: "claude"}); err != nil {
			t.Fatal(err)
		}
		p := &prompts{st: st}
		s, err := New(Options{Store: st, Prompts: p, CatchUp: true, Logger: testkit.Logger(t, "schedule")})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		synctest.Wait() // Run waits, with nothing to fire
		if _, err := s.Create("alice", "c0ffee000001", api.ScheduleRequest{Cron: "*/5 * * * *", Prompt: "tick"}); err != nil {
			t.Fatal(err)
		}
		// The bubble's clock starts at midnight: boundaries at :05, :10.
		for i, want := range []int{0, 1, 1, 2} {
			time.Sleep([]time.Duration{4 * time.Minute, time.Minute + time.Second, 4 * time.Minute, time.Minute}[i]) //nolint:forbidigo // synctest's fake clock: the sleep is the subject
			synctest.Wait()
			if n, _ := p.counts(); n != want {
				t.Fatalf("at %s: %d runs, want %d", time.Now().UTC().Format(time.TimeOnly), n, want)
			}
		}
		cancel()
		<-done
	})
}
