package provisioning

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning/reconcile"
)

// TestFaultMoveDeleteIsNotMissing replays, on the real LXD, what LXD 5.0
// does to a container it moves between cluster members (evacuation):
// instance-shutdown, instance-created for "lxd-move-of-<uuid>" (a copy
// carrying the project's id), instance-deleted for the real name,
// instance-renamed (the copy takes the name) and instance-started. The
// reconciler follows the real events: the stored status goes running ->
// stopped -> running and is never "missing"; a prompt (Preparer.Start)
// arriving between the delete and the rename waits for the move instead
// of creating a second container under the name. On the old code the
// delete was recorded as missing and Start created a new container.
func TestFaultMoveDeleteIsNotMissing(t *testing.T) {
	cl := testkit.LXD(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := testkit.NewContainer(t, cl, "move")
	proj := api.Project{ID: testProjectID("moving"), Name: "moving", Container: name, Status: StatusRunning}
	markContainer(t, cl, name, proj)
	store := newMemStore(proj)
	prep, err := New(Options{LXD: cl, Projects: store, Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := newReconciler(prep, reconcile.Options{Projects: store, Lister: cl, Events: cl})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	testkit.Eventually(t, 90*time.Second, func() bool { return rec.Available() == nil }, "reconciler available")

	var (
		mu   sync.Mutex
		seen []string
	)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			st := store.status("moving")
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != st {
				seen = append(seen, st)
			}
			mu.Unlock()
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	inst, _, err := cl.Instance(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	copyName := lxdexec.MovePrefix + inst.Config["volatile.uuid"]
	if len(copyName) > 63 || inst.Config["volatile.uuid"] == "" {
		t.Fatalf("container %s: volatile.uuid %q", name, inst.Config["volatile.uuid"])
	}
	// 1. instance-shutdown.
	if err := cl.SetState(ctx, name, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 90*time.Second, func() bool { return store.status("moving") == StatusStopped }, "stopped")
	// 2. instance-created for the copy, with the project's id.
	if err := cl.CreateInstance(ctx, lxdexec.InstancesPost{Name: copyName, Source: lxdexec.InstanceSource{Alias: "busybox"},
		Config: map[string]string{MarkerKey: proj.ID, NameKey: proj.Name}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testkit.CleanupContainer(t, cl, copyName) })
	// 3. instance-deleted for the real name.
	if err := cl.DeleteInstance(ctx, name); err != nil {
		t.Fatal(err)
	}
	// A prompt now: it must wait for the move, not create a container.
	started := make(chan error, 1)
	go func() {
		p, err := store.Project("moving")
		if err != nil {
			started <- err
			return
		}
		c, err := prep.Start(ctx, p)
		if err == nil && c.Name != name {
			err = errWrongName
		}
		started <- err
	}()
	time.Sleep(2 * time.Second) //nolint:forbidigo // the event and the prompt's wait are under way
	// 4. instance-renamed: the copy takes the name.
	r, err := cl.Query(ctx, http.MethodPost, "/1.0/instances/"+copyName, map[string]string{"name": name}, "")
	if err != nil {
		t.Fatalf("rename the copy: %v", err)
	}
	if _, err := cl.WaitOperation(ctx, r.Operation); err != nil {
		t.Fatalf("rename the copy: %v", err)
	}
	// 5. instance-started (by the waiting Start).
	if err := <-started; err != nil {
		t.Fatalf("Start during the move: %v", err)
	}
	testkit.Eventually(t, 90*time.Second, func() bool { return store.status("moving") == StatusRunning }, "running after the move")
	close(stopWatch)
	<-watched
	if _, _, err := cl.Instance(ctx, copyName); err == nil {
		t.Errorf("the copy %s is still there: Start created a container instead of waiting", copyName)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if s == StatusMissing || s == StatusUnknown {
			t.Errorf("stored status went %v during the move; never missing or unknown", seen)
			break
		}
	}
	t.Logf("stored status during the move: %v", seen)
	cancel()
	<-done
}

var errWrongName = errorString("Start returned another container")

type errorString string

func (e errorString) Error() string { return string(e) }
