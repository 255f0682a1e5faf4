package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/store"
	"remote/internal/testkit"
	"remote/providers"
)

// streamer is a fake CLI that streams n deltas of size bytes each (text
// "NNNNN:xxx…"), then completes; it stops as soon as its run is cancelled
// and records how many deltas it emitted.
func streamer(n, size int) (*fakeProvider, *atomic.Int64, *atomic.Bool) {
	var emitted atomic.Int64
	var stopped atomic.Bool
	p := &fakeProvider{id: providers.Claude}
	p.run = func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emitted.Store(0)
		stopped.Store(false)
		if !strings.Contains(req.Prompt, "stream") {
			emit(providers.Event{Type: providers.EventAssistantDelta, Text: "ok", MessageID: "m1"})
			emit(providers.Event{Type: providers.EventRunCompleted})
			return nil
		}
		for i := 0; i < n; i++ {
			if ctx.Err() != nil {
				stopped.Store(true)
				return ctx.Err()
			}
			text := fmt.Sprintf("%05d:", i)
			text += strings.Repeat("x", size-len(text))
			emit(providers.Event{Type: providers.EventAssistantDelta, Text: text, MessageID: "m1"})
			emitted.Add(1)
			if i%50 == 0 {
				time.Sleep(time.Millisecond) //nolint:forbidigo // a CLI's pace: let the committer keep up
			}
		}
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}
	return p, &emitted, &stopped
}

// follower collects a chat socket's events until the run's closing sync.
func follower(t *testing.T, ts *testServer, chatID, user string) <-chan []api.Event {
	t.Helper()
	c, _, err := ts.dialWS("/ws/chat/"+chatID, user)
	if err != nil {
		t.Fatal(err)
	}
	if ev := readEvent(t, c); ev.Type != api.EventSync {
		t.Fatalf("first frame %+v, want sync", ev)
	}
	out := make(chan []api.Event, 1)
	go func() {
		defer c.Close()
		var got []api.Event
		running := false
		for {
			_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
			var ev api.Event
			if err := c.ReadJSON(&ev); err != nil {
				break
			}
			got = append(got, ev)
			if ev.Type == api.EventSync {
				if running && !ev.Running {
					break
				}
				running = running || ev.Running
			}
		}
		out <- got
	}()
	return out
}

// checkDeltasContiguous fails unless the stored assistant_text events are
// deltas 0..k-1 of a streamer, in order: nothing missing in the middle.
func checkDeltasContiguous(t *testing.T, evs []api.Event) int {
	t.Helper()
	k := 0
	for _, ev := range evs {
		if ev.Type != api.EventAssistantText || ev.Text == "ok" {
			continue
		}
		if want := fmt.Sprintf("%05d:", k); !strings.HasPrefix(ev.Text, want) {
			t.Fatalf("stored delta %d (seq %d) is %.6q…: a delta before it was lost", k, ev.Seq, ev.Text)
		}
		k++
	}
	return k
}

func storageOpts(dir string, minFree int64) serverOpt {
	return func(o *Options) {
		o.StateDir = dir
		o.MinFree = minFree
		o.StorageCheckEvery = 50 * time.Millisecond
	}
}

// TestFaultDiskFullRun streams 2,000 deltas of 1 KiB from a fake CLI into
// a 2 MiB tmpfs state dir that has about 1 MiB left. Nothing may be lost
// silently: the CLI is stopped, the stored log is gapless and holds deltas
// 0..k-1 with no hole, no `complete` is stored, the live follower gets the
// `storage full:` error before the closing sync, and the log ends with
// that error as soon as it can be written. A prompt then answers 507
// storage_full naming the free space and min_free; once a filler file is
// deleted, prompts work again without a restart.
func TestFaultDiskFullRun(t *testing.T) {
	dir := testkit.Tmpfs(t, 2<<20)
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	p, emitted, stopped := streamer(2000, 1024)
	ts := newTestServerIn(t, dir, []providers.Provider{p}, storageOpts(dir, 64<<10))
	chat := ts.createChat("alice", "claude")
	other := ts.createChat("alice", "claude")

	live := follower(t, ts, chat.ID, "alice")
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "stream"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	ts.waitIdle(chat.ID)
	got := <-live

	if !stopped.Load() || emitted.Load() == 2000 {
		t.Errorf("the CLI was not stopped when its events could not be stored (emitted %d of 2000)", emitted.Load())
	}
	const wantMsg = "storage full: the run was stopped because its events could not be saved (no space left in the daemon's state directory); free space, then prompt again"
	i := slices.IndexFunc(got, func(ev api.Event) bool { return ev.Type == api.EventError })
	if i < 0 || got[i].Message != wantMsg {
		t.Fatalf("live follower got no storage error; last events %v", types(got[max(0, len(got)-3):]))
	}
	if last := got[len(got)-1]; i != len(got)-2 || last.Type != api.EventSync || last.Running {
		t.Fatalf("live follower: the error is not followed by the closing sync: %v", types(got[i:]))
	}
	stored := ts.events(chat.ID)
	checkGapless(t, stored, 1)
	k := checkDeltasContiguous(t, stored)
	if slices.ContainsFunc(stored, func(ev api.Event) bool { return ev.Type == api.EventComplete }) {
		t.Fatal("a `complete` was stored for a run that lost events")
	}
	if k == 2000 {
		t.Fatal("every delta fit: the disk never filled")
	}
	unrecorded := slices.Contains(ts.srv.svc.Unrepaired(), chat.ID)
	if lastStored := stored[len(stored)-1]; !unrecorded && (lastStored.Type != api.EventError || lastStored.Message != wantMsg) {
		t.Fatalf("the stored log ends with %s %q, and no end is pending", lastStored.Type, lastStored.Message)
	}
	t.Logf("stored %d of %d deltas; terminal error stored at once: %v", k, emitted.Load(), !unrecorded)

	// A full disk: prompts are refused with 507 storage_full, naming the
	// free space and the threshold.
	st, body := ts.do("POST", "/v1/chats/"+other.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
	var e api.ErrorResponse
	_ = json.Unmarshal(body, &e)
	if st != http.StatusInsufficientStorage || e.Error.Code != api.CodeStorageFull ||
		!strings.HasPrefix(e.Error.Message, "storage full: ") || !strings.Contains(e.Error.Message, " free in the daemon's state directory, below [daemon] min_free (64 KiB); free space, then prompt again") {
		t.Fatalf("prompt on a full disk: %d %s", st, body)
	}
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); st != http.StatusInsufficientStorage || errorCode(t, body) != api.CodeStorageFull {
		t.Fatalf("prompt in the failed chat on a full disk: %d %s", st, body)
	}
	// The chat socket's prompt is refused the same way, and recorded as a
	// run of its own saying why (not prompt_rejected, which a client
	// re-sends at once).
	c, _, err := ts.dialWS("/ws/chat/"+other.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readEvent(t, c) // sync
	if err := c.WriteJSON(api.ClientMessage{Type: "prompt", Text: "hi", ClientID: "c1"}); err != nil {
		t.Fatal(err)
	}
	evs := readUntilIdle(t, c)
	if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Subtype == api.SubtypePromptAccepted }) {
		t.Fatalf("socket prompt on a full disk answered %v, want prompt_accepted", types(evs))
	}
	if rec := ts.events(other.ID); len(rec) != 2 || rec[0].Text != "hi" || rec[1].Type != api.EventError ||
		!strings.HasPrefix(rec[1].Message, "the prompt could not start: storage full: ") || !strings.Contains(rec[1].Message, "below [daemon] min_free (64 KiB)") {
		t.Fatalf("socket prompt on a full disk recorded %+v", rec)
	}
	// Other writes: never a bare 500.
	if st, body := ts.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Cwd: ts.dir, Title: strings.Repeat("t", 199)}); st != http.StatusCreated && (st != http.StatusInsufficientStorage || errorCode(t, body) != api.CodeStorageFull) {
		t.Fatalf("create chat on a full disk: %d %s", st, body)
	}

	// Space freed: the same daemon takes prompts again, and the storage
	// error sits once, right before the new prompt.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); st != http.StatusAccepted {
		t.Fatalf("prompt after freeing space: %d %s", st, body)
	}
	ts.waitIdle(chat.ID)
	after := ts.events(chat.ID)
	checkGapless(t, after, 1)
	tail := after[len(stored)-1:]
	if unrecorded {
		tail = after[len(stored):]
	}
	if want := []string{"error", "user", "assistant_text", "complete"}; !slices.Equal(types(tail), want) || tail[0].Message != wantMsg {
		t.Fatalf("after freeing space the log goes on with %v (%q), want %v", types(tail), tail[0].Message, want)
	}
	if n := len(slices.DeleteFunc(slices.Clone(after), func(ev api.Event) bool { return ev.Type != api.EventError })); n != 1 {
		t.Fatalf("%d error events stored, want 1", n)
	}
	if c, _ := ts.st.Chat(chat.ID); c.Running {
		t.Fatal("chat still marked running")
	}
	if st, body := ts.do("POST", "/v1/chats/"+other.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); st != http.StatusAccepted {
		t.Fatalf("prompt in another chat after freeing space: %d %s", st, body)
	}
	ts.waitIdle(other.ID)
}

// TestFaultDiskFullStartup starts the daemon on a full disk with 150
// interrupted chats: it serves (recovery does not fail start-up), a chat it
// cannot repair is reported, and however often recovery runs (again in
// the same process, and in a second start on the still-full disk) no chat
// gets a second daemon_restarted. Once space is freed the periodic check
// repairs every chat without a restart: exactly one daemon_restarted and
// one error each.
func TestFaultDiskFullStartup(t *testing.T) {
	dir := testkit.Tmpfs(t, 2<<20)
	const n = 150
	st := openStore(t, dir)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("c%04d", i)
		ids = append(ids, id)
		if err := st.CreateChat(api.Chat{ID: id, Owner: "alice", Provider: "claude", Cwd: dir, Running: true, Title: strings.Repeat("t", 200)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(id, api.Event{Type: api.EventUser, Text: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	testkit.FillDisk(t, filler)

	restarts := func(ts *testServer) (max int, repaired int) {
		t.Helper()
		for _, id := range ids {
			evs := ts.events(id)
			k := 0
			for _, ev := range evs {
				if ev.Subtype == api.SubtypeDaemonRestarted {
					k++
				}
			}
			c, _ := ts.st.Chat(id)
			if k > max {
				max = k
			}
			if k == 1 {
				if want := []string{"user", "system/daemon_restarted", "error"}; !slices.Equal(types(evs), want) || evs[2].Message != "the run was interrupted by a daemon restart" || c.Running {
					t.Fatalf("chat %s after recovery: %v running=%v", id, types(evs), c.Running)
				}
				repaired++
			} else if !c.Running || len(evs) != 1 {
				t.Fatalf("chat %s not repaired but changed: %v running=%v", id, types(evs), c.Running)
			}
		}
		return max, repaired
	}

	p, _, _ := streamer(0, 0)
	ts := newTestServerIn(t, dir, []providers.Provider{p}, storageOpts(dir, 64<<10), func(o *Options) { o.StorageCheckEvery = time.Hour })
	if st, body := ts.do("GET", "/v1/chats", "alice", nil); st != http.StatusOK {
		t.Fatalf("list chats on a full disk: %d %s", st, body)
	}
	unrepaired := ts.srv.svc.Unrepaired()
	if len(unrepaired) == 0 {
		t.Fatal("every chat was repaired on the full disk: the test did not fill it")
	}
	m, repaired := restarts(ts)
	t.Logf("full disk: %d of %d chats repaired at start-up", repaired, n)
	if err := ts.srv.svc.RecoverInterrupted(); err != nil {
		t.Fatalf("RecoverInterrupted again: %v", err)
	}
	if m2, _ := restarts(ts); m > 1 || m2 > 1 {
		t.Fatalf("a chat got %d daemon_restarted events", max(m, m2))
	}
	metrics := func(ts *testServer) string {
		_, body := ts.do("GET", "/metrics", "", nil)
		return string(body)
	}
	if want := fmt.Sprintf("remoted_chats_unrepaired %d\n", len(ts.srv.svc.Unrepaired())); !strings.Contains(metrics(ts), want) {
		t.Errorf("metrics lack %q", want)
	}
	ts.stop()

	// A second start on the still-full disk (a crash loop's next attempt).
	ts = newTestServerIn(t, dir, []providers.Provider{p}, storageOpts(dir, 64<<10))
	if m, _ := restarts(ts); m > 1 {
		t.Fatalf("a chat got %d daemon_restarted events after a second start", m)
	}

	// Space freed: the periodic check repairs the rest, no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if u := ts.srv.svc.Unrepaired(); len(u) > 0 {
			return fmt.Errorf("unrepaired: %v", u)
		}
		return nil
	}, "every chat repaired once space is free")
	if m, repaired := restarts(ts); m != 1 || repaired != n {
		t.Fatalf("after freeing space: %d of %d chats repaired, max %d daemon_restarted", repaired, n, m)
	}
	if !strings.Contains(metrics(ts), "remoted_chats_unrepaired 0\n") {
		t.Error("remoted_chats_unrepaired is not 0 after the repairs")
	}
	if st, body := ts.do("POST", "/v1/chats/"+ids[0]+"/prompt", "alice", api.PromptRequest{Text: "hi"}); st != http.StatusAccepted {
		t.Fatalf("prompt after freeing space: %d %s", st, body)
	}
	ts.waitIdle(ids[0])
}

// TestFaultRunByteCap: a CLI that streams without end is stopped at
// max_run_bytes with a clear error; a chat that reaches max_chat_bytes
// stops its run with its own error and takes no new prompt.
func TestFaultRunByteCap(t *testing.T) {
	p, emitted, stopped := streamer(5000, 1024)
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) {
		o.MaxRunBytes = 64 << 10
		o.MaxChatBytes = 200 << 10
	})
	chat := ts.createChat("alice", "claude")
	runOnce := func() []api.Event {
		t.Helper()
		before := len(ts.events(chat.ID))
		if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "stream"}); st != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", st, body)
		}
		ts.waitIdle(chat.ID)
		evs := ts.events(chat.ID)
		checkGapless(t, evs, 1)
		if !stopped.Load() || emitted.Load() == 5000 {
			t.Fatalf("the CLI was not stopped at the cap (emitted %d of 5000)", emitted.Load())
		}
		return evs[before:]
	}

	run := runOnce()
	last := run[len(run)-1]
	if last.Type != api.EventError || last.Message != "run output exceeds max_run_bytes (64 KiB)" {
		t.Fatalf("run ended with %s %q", last.Type, last.Message)
	}
	var size int
	for _, ev := range run {
		raw, _ := json.Marshal(ev)
		size += len(raw)
	}
	if size > 66<<10 {
		t.Fatalf("the run stored %d bytes, over its 64 KiB cap", size)
	}
	if run[0].Type != api.EventUser || checkDeltasContiguous(t, run) < 50 {
		t.Fatalf("the run stored %v", types(run[:min(5, len(run))]))
	}

	// The chat fills up: its last run ends with the chat's error, then
	// prompts are refused.
	var runs int
	for {
		runs++
		if runs > 5 {
			t.Fatal("the chat never reached max_chat_bytes")
		}
		run = runOnce()
		if m := run[len(run)-1].Message; m == "chat exceeds max_chat_bytes (200 KiB): start a new chat" {
			break
		} else if m != "run output exceeds max_run_bytes (64 KiB)" {
			t.Fatalf("run ended with %q", m)
		}
	}
	st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
	var e api.ErrorResponse
	_ = json.Unmarshal(body, &e)
	if st != http.StatusConflict || e.Error.Code != api.CodeConflict ||
		!strings.HasSuffix(e.Error.Message, "of events, at its limit [daemon] max_chat_bytes (200 KiB): start a new chat") {
		t.Fatalf("prompt in a full chat: %d %s", st, body)
	}
	if n, _ := ts.st.EventBytes(chat.ID); n > 201<<10 {
		t.Fatalf("chat stores %d bytes, over its 200 KiB cap", n)
	}
	// A new chat works.
	fresh := ts.createChat("alice", "claude")
	if st, body := ts.do("POST", "/v1/chats/"+fresh.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); st != http.StatusAccepted {
		t.Fatalf("prompt in a new chat: %d %s", st, body)
	}
	ts.waitIdle(fresh.ID)
}

// failingEnds is the real store, except that while fail is set the
// one-transaction run-end write (the one that leaves the chat not
// running) fails as a full disk does, storing nothing.
type failingEnds struct {
	Store
	fail atomic.Bool
}

func (f *failingEnds) UpdateChatAndAppend(id string, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error) {
	return f.Store.UpdateChatAndAppend(id, func(c *api.Chat) ([]api.Event, error) {
		evs, err := fn(c)
		if err == nil && !c.Running && f.fail.Load() {
			return nil, fmt.Errorf("update chat %q: %w: write remoted.db: no space left on device", id, store.ErrNoSpace)
		}
		return evs, err
	})
}

// TestFaultDiskFullUnstoredEnd: when even the run's terminal error cannot
// be written, the connected follower still gets it live (no seq) before the
// closing sync, the chat is reported unrepaired and refuses prompts with
// 507 storage_full, and the error is stored by the periodic check as soon
// as it can be written.
func TestFaultDiskFullUnstoredEnd(t *testing.T) {
	dir := testkit.Tmpfs(t, 2<<20)
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _, _ := streamer(2000, 1024)
	var fe *failingEnds
	ts := newTestServerIn(t, dir, []providers.Provider{p}, storageOpts(dir, 0), func(o *Options) {
		fe = &failingEnds{Store: o.Store}
		fe.fail.Store(true)
		o.Store = fe
		o.StorageCheckEvery = 50 * time.Millisecond
	})
	chat := ts.createChat("alice", "claude")
	live := follower(t, ts, chat.ID, "alice")
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "stream"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	ts.waitIdle(chat.ID)
	got := <-live
	if n := len(got); n < 2 || got[n-2].Type != api.EventError || got[n-2].Seq != 0 || !strings.HasPrefix(got[n-2].Message, "storage full: ") ||
		got[n-1].Type != api.EventSync || got[n-1].Running {
		t.Fatalf("live follower's last events: %v (seq %d, %q)", types(got[max(0, n-2):]), got[max(0, n-2)].Seq, got[max(0, n-2)].Message)
	}
	stored := ts.events(chat.ID)
	checkGapless(t, stored, 1)
	checkDeltasContiguous(t, stored)
	if slices.ContainsFunc(stored, func(ev api.Event) bool { return ev.Type == api.EventError || ev.Type == api.EventComplete }) {
		t.Fatalf("stored an end although its write failed: %v", types(stored[len(stored)-2:]))
	}
	if !slices.Equal(ts.srv.svc.Unrepaired(), []string{chat.ID}) {
		t.Fatalf("unrepaired = %v, want [%s]", ts.srv.svc.Unrepaired(), chat.ID)
	}
	st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
	if st != http.StatusInsufficientStorage || errorCode(t, body) != api.CodeStorageFull {
		t.Fatalf("prompt while the run end is unsaved: %d %s", st, body)
	}

	os.Remove(filler)
	fe.fail.Store(false)
	testkit.Eventually(t, 30*time.Second, func() error {
		if u := ts.srv.svc.Unrepaired(); len(u) > 0 {
			return fmt.Errorf("unrepaired: %v", u)
		}
		return nil
	}, "every chat repaired once space is free")
	after := ts.events(chat.ID)
	checkGapless(t, after, 1)
	if len(after) != len(stored)+1 || after[len(stored)].Type != api.EventError || !strings.HasPrefix(after[len(stored)].Message, "storage full: ") {
		t.Fatalf("after space came back the log goes on with %v", types(after[len(stored):]))
	}
	if c, _ := ts.st.Chat(chat.ID); c.Running {
		t.Fatal("chat still marked running")
	}
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); st != http.StatusAccepted {
		t.Fatalf("prompt after the end was stored: %d %s", st, body)
	}
	ts.waitIdle(chat.ID)
}
