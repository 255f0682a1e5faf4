package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/socket"
	"remote/internal/testkit"
	"remote/providers"
)

// TestFaultPromptDuringShutdown: once the prompt service is shutting down a
// prompt answers 503 unavailable naming the shutdown (it answered 500
// internal before), and nothing runs.
func TestFaultPromptDuringShutdown(t *testing.T) {
	p := &fakeProvider{id: providers.Claude}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	if err := ts.srv.svc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
	var env api.ErrorResponse
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("answer %d %s: %v", status, body, err)
	}
	e := env.Error
	want := "start prompt in chat " + chat.ID + ": the daemon is shutting down"
	if status != http.StatusServiceUnavailable || e.Code != "unavailable" || e.Message != want {
		t.Fatalf("prompt during shutdown = %d %s %q, want 503 unavailable %q", status, e.Code, e.Message, want)
	}
	if evs := ts.events(chat.ID); len(evs) != 0 {
		t.Fatalf("events after a refused prompt: %v", types(evs))
	}
}

// TestFaultPromptRacesShutdown: prompts sent while Shutdown runs either
// start (and their runs end with the shutdown's error event before
// Shutdown returns) or answer 503 unavailable; none is left running and
// none answers 500. Run with -race: a run admitted after Shutdown began
// waiting would be a WaitGroup misuse.
func TestFaultPromptRacesShutdown(t *testing.T) {
	for round := range 10 {
		p := &fakeProvider{id: providers.Claude, run: func(ctx context.Context, _ providers.RunRequest, emit func(providers.Event)) error {
			<-ctx.Done()
			return ctx.Err()
		}}
		ts := newTestServer(t, []providers.Provider{p})
		chats := make([]api.Chat, 8)
		for i := range chats {
			chats[i] = ts.createChat("alice", "claude")
		}
		var wg sync.WaitGroup
		statuses := make([]int, len(chats))
		for i, c := range chats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], _ = ts.do("POST", "/v1/chats/"+c.ID+"/prompt", "alice", api.PromptRequest{Text: fmt.Sprint("hi ", round)})
			}()
		}
		if err := ts.srv.svc.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, c := range chats {
			if s := statuses[i]; s != http.StatusAccepted && s != http.StatusServiceUnavailable {
				t.Fatalf("round %d: prompt answered %d, want 202 or 503", round, s)
			}
			if ts.srv.hub.Running(c.ID) {
				t.Fatalf("round %d: chat %s still running after Shutdown returned", round, c.ID)
			}
		}
		ts.stop()
	}
}

// TestFaultShutdownBeforeServe: a Shutdown that runs before Serve has
// registered its server (a SIGTERM during start-up) makes that Serve
// return at once, closing its listener. It served forever before.
func TestFaultShutdownBeforeServe(t *testing.T) {
	dir := t.TempDir()
	srv, err := New(Options{Store: openStore(t, dir), Registry: prompt.NewRegistry(), Version: "test",
		Logger: testkit.Logger(t, "remoted"), Roots: prompt.NewRoots([]string{dir}, ""), DefaultCwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := socket.Listen(filepath.Join(t.TempDir(), "late.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Shutdown = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		ln.Close()
		t.Fatal("Serve after Shutdown still serving after 10 s")
	}
	if c, err := net.Dial("unix", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the listener still accepts connections after Serve returned")
	}
}
