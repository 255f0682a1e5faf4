package provisioning

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning/reconcile"
)

func TestReconcilerRealLXD(t *testing.T) {
	cl := testkit.LXD(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := newMemStore()
	var names []string
	for i := range 4 {
		name := testkit.NewContainer(t, cl, "rec")
		if err := cl.SetState(ctx, name, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		// Projects 0–2 autostart; 3 does not. Stored status claims running.
		proj := api.Project{ID: testProjectID(fmt.Sprint("p", i)), Name: fmt.Sprint("p", i), Container: name, Autostart: i < 3, Status: StatusRunning}
		markContainer(t, cl, name, proj)
		store.projects[proj.Name] = proj
	}
	prep, err := New(Options{LXD: cl, Projects: store})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := newReconciler(prep, reconcile.Options{Projects: store, Lister: cl, Events: cl})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("start-up starts autostart projects and corrects the rest", func(t *testing.T) {
		if err := rec.StartAll(ctx); err != nil {
			t.Fatalf("StartAll: %v", err)
		}
		for i, name := range names {
			inst, _, err := cl.Instance(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			wantLXD, wantStored := "Running", StatusRunning
			if i == 3 {
				wantLXD, wantStored = "Stopped", StatusStopped
			}
			if inst.Status != wantLXD || store.status(fmt.Sprint("p", i)) != wantStored {
				t.Errorf("project %d: lxd %s stored %s, want %s/%s", i, inst.Status, store.status(fmt.Sprint("p", i)), wantLXD, wantStored)
			}
		}
	})

	t.Run("lifecycle events keep status true", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		// Let Run's start-up pass subscribe before acting.
		testkit.Eventually(t, 90*time.Second, func() bool { return rec.Available() == nil }, "reconciler available")
		if err := cl.SetState(ctx, names[0], lxdexec.StateRequest{Action: "stop", Timeout: 5}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 90*time.Second, func() bool { return store.status("p0") == StatusStopped }, "p0 stopped")
		if err := cl.ForceDeleteInstance(ctx, names[1]); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 90*time.Second, func() bool { return store.status("p1") == StatusMissing }, "p1 missing")
		if err := cl.SetState(ctx, names[3], lxdexec.StateRequest{Action: "start"}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 90*time.Second, func() bool { return store.status("p3") == StatusRunning }, "p3 running")
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

func TestNewRejectsPartialDependencies(t *testing.T) {
	deps, _ := NewDependencies(StepsOptions{})
	deps.Browser = nil
	_, err := New(Options{LXD: &lxdexec.Client{}, Projects: newMemStore(), Deps: deps})
	if !errors.Is(err, ErrIncompleteDependencies) {
		t.Fatalf("err %v, want ErrIncompleteDependencies", err)
	}
	if _, err := New(Options{LXD: &lxdexec.Client{}, Projects: newMemStore()}); err != nil {
		t.Fatalf("no dependencies: %v", err)
	}
}

func TestPrepareRejectsMissingContainerName(t *testing.T) {
	prep, err := New(Options{LXD: &lxdexec.Client{}, Projects: newMemStore(api.Project{Name: "p"})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prep.Prepare(context.Background(), providersReq("p"), nil); !errors.Is(err, ErrNoContainer) {
		t.Fatalf("err %v, want ErrNoContainer", err)
	}
}

// TestPrepareRefusesReplacedProject: a run bound to a project id never
// prepares a later project of the same name (another id); nothing reaches
// LXD (the zero client would fail any request).
func TestPrepareRefusesReplacedProject(t *testing.T) {
	prep, err := New(Options{LXD: &lxdexec.Client{}, Projects: newMemStore(api.Project{Name: "p", Container: "c"})})
	if err != nil {
		t.Fatal(err)
	}
	req := providersReq("p")
	req.ProjectUID = testProjectID("an earlier p")
	_, err = prep.Prepare(context.Background(), req, nil)
	if !errors.Is(err, ErrProjectReplaced) || err.Error() != `project "p": project was deleted or replaced since the chat was created` {
		t.Fatalf("err %v, want ErrProjectReplaced", err)
	}
}

// TestResyncForeignContainer: a container under a project's container
// name that is not the project's (another id, or no marker) is reported
// as status unknown, never as the project's running container; one from
// before ids (name marker only) keeps its LXD status until Start decides.
func TestResyncForeignContainer(t *testing.T) {
	for _, tc := range []struct {
		config map[string]string
		want   string
	}{
		{map[string]string{MarkerKey: testProjectID("p")}, StatusRunning},
		{map[string]string{MarkerKey: testProjectID("q"), NameKey: "p"}, StatusUnknown},
		{nil, StatusUnknown},
		{map[string]string{NameKey: "p"}, StatusRunning},
	} {
		store := newMemStore(api.Project{Name: "p", Container: "c", Status: StatusMissing})
		lister := &fakeLister{}
		lister.set(lxdexec.Instance{Name: "c", Status: "Running", Config: tc.config})
		prep, err := New(Options{LXD: &lxdexec.Client{}, Projects: store})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := newReconciler(prep, reconcile.Options{Projects: store, Lister: lister})
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Resync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := store.status("p"); got != tc.want {
			t.Errorf("config %v: status %q, want %q", tc.config, got, tc.want)
		}
	}
}
