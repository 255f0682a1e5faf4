package daemon

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/providers"
)

// errCrashed is what every write gets once crashStore has "crashed".
var errCrashed = errors.New("simulated crash: the daemon died here")

// crashStore is the real store that dies (every later write fails, as if
// the process had been killed) right after it durably stored a run's
// terminal event.
type crashStore struct {
	*store.Store
	crashed atomic.Bool
}

func terminal(evs ...api.Event) bool {
	return slices.ContainsFunc(evs, func(ev api.Event) bool {
		return ev.Type == api.EventComplete || ev.Type == api.EventError
	})
}

func (c *crashStore) AppendAsyncIf(chatID string, ev api.Event, cond func() bool, done func(api.Event, error)) {
	c.AppendAsyncAt(chatID, ev, nil, cond, done)
}

func (c *crashStore) AppendAsyncAt(chatID string, ev api.Event, mark *store.RunMark, cond func() bool, done func(api.Event, error)) {
	if c.crashed.Load() {
		done(api.Event{}, errCrashed)
		return
	}
	c.Store.AppendAsyncAt(chatID, ev, mark, cond, func(stored api.Event, err error) {
		if err == nil && terminal(stored) {
			c.crashed.Store(true)
		}
		done(stored, err)
	})
}

func (c *crashStore) UpdateChat(id string, fn func(*api.Chat) error) (api.Chat, error) {
	if c.crashed.Load() {
		return api.Chat{}, errCrashed
	}
	return c.Store.UpdateChat(id, fn)
}

func (c *crashStore) UpdateChatAndAppend(id string, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error) {
	if c.crashed.Load() {
		return api.Chat{}, nil, errCrashed
	}
	ch, evs, err := c.Store.UpdateChatAndAppend(id, fn)
	if err == nil && terminal(evs...) {
		c.crashed.Store(true)
	}
	return ch, evs, err
}

// TestFaultCrashAfterCompleteStored kills the daemon's store right after a
// run's complete event is durable. The end of the run (complete, running
// false) is one transaction, so after the restart the run is complete:
// not marked running, no daemon_restarted, no "interrupted" error. (With
// complete and the running mark in two transactions the restart found
// the chat running and appended system/daemon_restarted + error.)
func TestFaultCrashAfterCompleteStored(t *testing.T) {
	p := &fakeProvider{id: providers.Claude}
	var cs *crashStore
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) {
		cs = &crashStore{Store: o.Store.(*store.Store)}
		o.Store = cs
	})
	chat := ts.createChat("alice", "claude")
	promptAndWait(t, ts, chat.ID, "hello")
	if !cs.crashed.Load() {
		t.Fatal("the run's terminal event was never stored")
	}
	ts.stop()

	// Restart on the same state.
	st := openStore(t, ts.dir)
	defer st.Close()
	svc := prompt.NewService(prompt.ServiceOptions{Store: st, Hub: runhub.NewHub(st, nil, nil, 0), Registry: prompt.NewRegistry()})
	if err := svc.RecoverInterrupted(); err != nil {
		t.Fatal(err)
	}
	var evs []api.Event
	if err := st.Events(chat.ID, 0, 0, func(ev api.Event) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	c, err := st.Chat(chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"user", "assistant_text", "complete"}; !slices.Equal(types(evs), want) || c.Running {
		t.Fatalf("after the restart: %v running=%v, want %v running=false", types(evs), c.Running, want)
	}
}
