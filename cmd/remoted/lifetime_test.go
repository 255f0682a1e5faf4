package main

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/config"
)

// TestFaultGoroutineOutlivesStore: a goroutine remoted started (like the
// projects' reconciler, which writes project status) that still writes to
// the store after the daemon's context ended finds it open: close joins
// every such goroutine before it closes the store. The old run closed the
// store first (its deferred st.Close ran before the deferred cancel), so
// the reconciler's last write met a closed store.
func TestFaultGoroutineOutlivesStore(t *testing.T) {
	cfg := config.Config{Daemon: config.Daemon{StateDir: t.TempDir()}}
	d := newRemoted(flags{}, cfg, hclog.NewInterceptLogger(&hclog.LoggerOptions{Output: testWriter{t}}))
	if err := d.openStore(); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	d.goJoined(func(ctx context.Context) {
		<-ctx.Done()
		// The last write of a goroutine that is stopping.
		written <- d.store.CreateChat(api.Chat{ID: "c0ffee", Owner: "u", Provider: "claude", CreatedAt: time.Now()})
	})
	d.close()
	if err := <-written; err != nil {
		t.Fatalf("write of a stopping goroutine: %v (the store was closed under it)", err)
	}
	d.close() // idempotent: a second close (run's defer after an early return) is harmless
}

// testWriter sends log output to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
