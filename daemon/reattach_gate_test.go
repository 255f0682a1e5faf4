package daemon

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/providers"
)

// TestReattachWaitsForServing: at start-up a run that outlived the previous
// daemon takes its chat's run lock before the daemon serves (no request sees
// the chat idle, no prompt starts a second run), but its catch-up (the
// provider's run on the stored request, which parses the whole spool) waits
// until the daemon serves, so it never delays the first answer. A daemon
// stopped before it served leaves the run as it found it, for the next one.
func TestReattachWaitsForServing(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	defer st.Close()
	chat := api.Chat{ID: "c1c1", Owner: "alice", Provider: "claude", Cwd: dir, Running: true}
	if err := st.CreateChat(chat); err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]string{"provider": "claude", "conversationId": "c1c1", "runId": "r1", "prompt": "go", "cwd": dir})
	if err := st.PutRun("c1c1", store.RunRecord{RunID: "r1", Provider: "claude", Started: time.Now(), Request: req}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRunShim("c1c1", "r1", json.RawMessage(`{"dir":"/nonexistent/r1"}`)); err != nil {
		t.Fatal(err)
	}
	attached := make(chan *providers.RunSlot, 1)
	p := &fakeProvider{id: providers.Claude, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		attached <- providers.RunSlotFrom(ctx)
		<-ctx.Done()
		return ctx.Err()
	}}
	newService := func() (*prompt.Service, *runhub.Hub) {
		reg := prompt.NewRegistry()
		reg.Set(map[providers.ProviderID]providers.Provider{providers.Claude: p}, nil, nil)
		hub := runhub.NewHub(st, nil, nil, 0)
		return prompt.NewService(prompt.ServiceOptions{Store: st, Hub: hub, Registry: reg}), hub
	}

	// Stopped before serving: nothing ran, nothing was stored or cleared.
	svc, hub := newService()
	if err := svc.RecoverInterrupted(make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	if !hub.Running("c1c1") {
		t.Fatal("the re-attached run does not hold its chat's run lock before serving")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := svc.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown before serving: %v", err)
	}
	select {
	case <-attached:
		t.Fatal("the run was re-attached although the daemon never served")
	default:
	}
	if rec, ok, err := st.Run("c1c1"); err != nil || !ok || rec.RunID != "r1" || len(rec.Shim) == 0 {
		t.Fatalf("run record after a stop before serving: %+v %v %v", rec, ok, err)
	}
	if c, _ := st.Chat("c1c1"); !c.Running {
		t.Fatal("a stop before serving cleared the chat's running mark: the next daemon would not re-attach")
	}

	// Served: the catch-up starts then, and not before.
	svc, hub = newService()
	serving := make(chan struct{})
	if err := svc.RecoverInterrupted(serving); err != nil {
		t.Fatal(err)
	}
	select {
	case <-attached:
		t.Fatal("the re-attached run's catch-up started before the daemon served")
	case <-time.After(200 * time.Millisecond):
	}
	close(serving)
	select {
	case slot := <-attached:
		if slot == nil || slot.Attach == nil || slot.Attach.Dir != "/nonexistent/r1" {
			t.Fatalf("the provider ran without the stored shim handle: %+v", slot)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the re-attached run never started after the daemon served")
	}
	if !hub.Running("c1c1") {
		t.Fatal("the chat is not running while its run is re-attached")
	}
	svc.Shutdown(ctx)
}
