package provisioning

import (
	"context"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning/reconcile"
)

// fakeLister is an InstanceLister whose answer the test changes.
type fakeLister struct {
	mu    sync.Mutex
	insts []lxdexec.Instance
}

func (f *fakeLister) set(insts ...lxdexec.Instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.insts = insts
}

func (f *fakeLister) Instances(context.Context) ([]lxdexec.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]lxdexec.Instance(nil), f.insts...), nil
}

// eventsFunc is an EventSource from a function.
type eventsFunc func(ctx context.Context, types ...string) (<-chan lxdexec.Event, error)

func (f eventsFunc) Events(ctx context.Context, types ...string) (<-chan lxdexec.Event, error) {
	return f(ctx, types...)
}

// TestRunResyncsWhenEventsReconnect: after the event stream was down (LXD
// restarted), lifecycle events may have been lost — e.g. LXD autostarted a
// container before the stream was back — so Run resyncs at once on
// lxdexec's EventReconnected instead of waiting for the periodic resync.
func TestRunResyncsWhenEventsReconnect(t *testing.T) {
	store := newMemStore(api.Project{Name: "p", Container: "c", Status: StatusRunning})
	lister := &fakeLister{}
	lister.set(lxdexec.Instance{Name: "c", Status: "Running", Config: map[string]string{MarkerKey: testProjectID("p")}})
	events := make(chan lxdexec.Event, 1)
	subscribed := make(chan struct{})
	prep, err := New(Options{LXD: &lxdexec.Client{}, Projects: store})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := newReconciler(prep, reconcile.Options{Projects: store, Lister: lister,
		Events: eventsFunc(func(context.Context, ...string) (<-chan lxdexec.Event, error) {
			close(subscribed)
			return events, nil
		}),
		Resync: time.Hour, // only the reconnection can correct the status
	})
	if err != nil {
		t.Fatal(err)
	}
	runReconciler(t, rec)
	<-subscribed

	// While the stream was down the container stopped; no lifecycle event
	// will ever tell.
	lister.set(lxdexec.Instance{Name: "c", Status: "Stopped", Config: map[string]string{MarkerKey: testProjectID("p")}})
	events <- lxdexec.Event{Type: lxdexec.EventReconnected, Timestamp: time.Now()}
	testkit.Eventually(t, 90*time.Second, func() bool { return store.status("p") == StatusStopped }, "stored status stopped after the stream reconnected")
}

// TestRunRetriesEventSubscription: when LXD is away just as Run subscribes
// to lifecycle events, the subscription is tried again with the periodic
// resync instead of being given up for the daemon's lifetime.
func TestRunRetriesEventSubscription(t *testing.T) {
	store := newMemStore(api.Project{Name: "p", Container: "c", Status: StatusRunning})
	lister := &fakeLister{}
	lister.set(lxdexec.Instance{Name: "c", Status: "Running", Config: map[string]string{MarkerKey: testProjectID("p")}})
	prep, err := New(Options{LXD: &lxdexec.Client{}, Projects: store})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan lxdexec.Event, 1)
	var mu sync.Mutex
	calls := 0
	rec, err := newReconciler(prep, reconcile.Options{Projects: store, Lister: lister,
		Events: eventsFunc(func(context.Context, ...string) (<-chan lxdexec.Event, error) {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls == 1 {
				return nil, ErrUnavailable
			}
			return events, nil
		}),
		Resync: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runReconciler(t, rec)
	testkit.Eventually(t, 90*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return calls >= 2 }, "a second subscription")
	// Once open, the stream is kept: further resyncs do not subscribe again.
	time.Sleep(10 * 20 * time.Millisecond) //nolint:forbidigo // an absence that must last: ten resync periods without a new subscription
	mu.Lock()
	n := calls
	mu.Unlock()
	if n != 2 {
		t.Errorf("subscribed %d times, want 2 (no resubscription once the stream is open)", n)
	}
}

// runReconciler runs rec until the test ends, then stops it and checks
// that Run returned nil.
func runReconciler(t *testing.T, rec *reconcile.Reconciler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
