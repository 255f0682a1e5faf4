package runhub

// Following a chat through the hub: subscriber queue sizes, the run lock
// outliving followers, a follower staying after the run ends, a live send
// error ending the follow, replay beyond one page, cancel-all and
// respond, and a failed append logged.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/errdefs"
	"remote/providers"
)

// newHubChat opens a real store with the chats and a hub over it.
func newHubChat(t *testing.T, chat string, queueLen int, more ...string) *Hub {
	t.Helper()
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	for _, id := range append([]string{chat}, more...) {
		if err := st.CreateChat(api.Chat{ID: id, Owner: "u", Provider: "claude"}); err != nil {
			t.Fatal(err)
		}
	}
	return NewHub(st, nil, nil, queueLen)
}

// stalledFollower follows chat and blocks in its first send (the sync)
// until release is closed; it returns once the follower is subscribed and
// stalled. got receives the number of events sent after the sync; errc
// Follow's result.
func stalledFollower(ctx context.Context, t *testing.T, h *Hub, chat string) (release chan struct{}, got *int, errc chan error) {
	t.Helper()
	stalled := make(chan struct{})
	release = make(chan struct{})
	errc = make(chan error, 1)
	n := 0
	first := true
	go func() {
		errc <- h.Follow(ctx, chat, 0, func(ev api.Event) error {
			if first {
				first = false
				close(stalled)
				<-release
				return nil
			}
			n++
			return nil
		})
	}()
	<-stalled
	return release, &n, errc
}

// TestHubSubscriberQueueSizes: with queueLen 0 a follower may lag 8192
// live events behind and is dropped at the 8193rd; with queueLen 3 it is
// dropped at the 4th. A dropped follower first gets what was queued.
func TestHubSubscriberQueueSizes(t *testing.T) {
	for _, tc := range []struct {
		queueLen, lag int
	}{{0, 8192}, {-1, 8192}, {3, 3}} {
		t.Run(fmt.Sprint(tc.queueLen), func(t *testing.T) {
			const chat = "aaa1"
			h := newHubChat(t, chat, tc.queueLen)
			release, got, errc := stalledFollower(context.Background(), t, h, chat)
			for i := 0; i < tc.lag; i++ {
				h.Broadcast(chat, api.Event{Type: api.EventAssistantText, Text: "x"})
			}
			if n := h.Subscribers(chat); n != 1 {
				t.Fatalf("follower %d events behind: %d subscribers, want 1 (not dropped)", tc.lag, n)
			}
			h.Broadcast(chat, api.Event{Type: api.EventAssistantText, Text: "x"})
			if n := h.Subscribers(chat); n != 0 {
				t.Fatalf("follower %d events behind: %d subscribers, want 0 (dropped)", tc.lag+1, n)
			}
			close(release)
			if err := <-errc; !errors.Is(err, ErrSlowSubscriber) {
				t.Fatalf("Follow = %v, want ErrSlowSubscriber", err)
			}
			if *got != tc.lag {
				t.Fatalf("dropped follower got %d queued events, want %d", *got, tc.lag)
			}
		})
	}
}

// TestHubRunLockOutlivesFollowers: a follower leaving a chat whose run is
// active must not release the run lock (S2): Running stays true and a
// second StartRun is refused. Once the run ends and no one follows, the
// chat's in-memory room is freed.
func TestHubRunLockOutlivesFollowers(t *testing.T) {
	const chat = "bbb2"
	h := newHubChat(t, chat, 0)
	run, err := h.StartRun(chat, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	var sync api.Event
	if err := h.Follow(context.Background(), chat, 0, func(ev api.Event) error { sync = ev; return errDone }); !errors.Is(err, errDone) {
		t.Fatalf("Follow = %v", err)
	}
	if sync.Type != "sync" || !sync.Running {
		t.Fatalf("follower joining a running chat got %+v, want sync running:true", sync)
	}
	if !h.Running(chat) {
		t.Fatal("Running = false after a follower left, want true")
	}
	if _, err := h.StartRun(chat, func(error) {}); !errors.Is(err, ErrPromptAlreadyRunning) {
		t.Fatalf("second StartRun after a follower left = %v, want ErrPromptAlreadyRunning", err)
	}
	h.FinishRun(run)
	h.mu.Lock()
	rooms := len(h.rooms)
	h.mu.Unlock()
	if rooms != 0 {
		t.Fatalf("%d rooms kept after the run ended with no follower, want 0", rooms)
	}
}

// TestHubFollowerStaysAfterRunEnds: a follower attached across a run's end
// stays subscribed and gets the live events stored after it; an idle chat
// with a follower is not Running, and the follower's sync says running:false.
func TestHubFollowerStaysAfterRunEnds(t *testing.T) {
	const chat = "ccc3"
	h := newHubChat(t, chat, 0)
	synced := make(chan struct{})
	var evs []api.Event
	errc := make(chan error, 1)
	go func() {
		errc <- h.Follow(context.Background(), chat, 0, func(ev api.Event) error {
			evs = append(evs, ev)
			if len(evs) == 1 {
				close(synced)
			}
			if ev.Seq == 1 {
				return errDone
			}
			return nil
		})
	}()
	<-synced
	if h.Running(chat) {
		t.Fatal("Running = true for an idle chat with a follower, want false")
	}
	run, err := h.StartRun(chat, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	h.FinishRun(run)
	if n := h.Subscribers(chat); n != 1 {
		t.Fatalf("%d subscribers after the run ended, want 1", n)
	}
	if _, err := h.Append(chat, api.Event{Type: api.EventAssistantText, Text: "after"}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, errDone) {
		t.Fatalf("Follow = %v, want errDone", err)
	}
	want := []string{"sync running=false", "sync running=true", "sync running=false", "assistant_text seq=1 after"}
	var got []string
	for _, ev := range evs {
		if ev.Type == "sync" {
			got = append(got, fmt.Sprintf("sync running=%v", ev.Running))
		} else {
			got = append(got, fmt.Sprintf("%s seq=%d %s", ev.Type, ev.Seq, ev.Text))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("follower got %q, want %q", got, want)
	}
}

// TestHubLiveSendErrorEndsFollow: an error from send on a live event ends
// Follow with that error, after the events before it.
func TestHubLiveSendErrorEndsFollow(t *testing.T) {
	const chat = "ddd4"
	h := newHubChat(t, chat, 0)
	synced := make(chan struct{})
	var seqs []int64
	errc := make(chan error, 1)
	go func() {
		errc <- h.Follow(context.Background(), chat, 0, func(ev api.Event) error {
			if ev.Type == "sync" {
				close(synced)
				return nil
			}
			seqs = append(seqs, ev.Seq)
			if ev.Seq == 3 {
				return errDone
			}
			return nil
		})
	}()
	<-synced
	for i := 0; i < 3; i++ {
		if _, err := h.Append(chat, api.Event{Type: api.EventAssistantText, Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; !errors.Is(err, errDone) {
		t.Fatalf("Follow = %v, want errDone", err)
	}
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatalf("follower got seqs %v, want [1 2 3]", seqs)
	}
}

// TestHubReplayBeyondOnePage: a follower joining a chat of 600 stored
// events (more than one 512-event store page) gets all 600 replayed, in
// order, before its sync.
func TestHubReplayBeyondOnePage(t *testing.T) {
	const chat, total = "eee5", 600
	h := newHubChat(t, chat, 0)
	for i := 0; i < total; i++ {
		h.AppendAsync(chat, api.Event{Type: api.EventAssistantText, Text: "x"}, nil)
	}
	if _, err := h.Append(chat, api.Event{Type: api.EventAssistantText, Text: "last"}); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []bool{false, true} {
		var seqs []int64
		send := func(ev api.Event) error {
			if ev.Type == "sync" {
				return errDone
			}
			seqs = append(seqs, ev.Seq)
			return nil
		}
		var err error
		if raw {
			err = h.FollowRaw(context.Background(), chat, 0, func(seq int64, _ []byte) error { seqs = append(seqs, seq); return nil }, send)
		} else {
			err = h.Follow(context.Background(), chat, 0, send)
		}
		if !errors.Is(err, errDone) {
			t.Fatalf("raw=%v: Follow = %v", raw, err)
		}
		if len(seqs) != total+1 || seqs[0] != 1 || seqs[total] != total+1 {
			t.Fatalf("raw=%v: replay got %d events (first %v), want %d: 1..%d", raw, len(seqs), seqs[:1], total+1, total+1)
		}
	}
}

// TestHubCancelAllAndRespond: CancelAll cancels every active run with its
// cause and none of the idle chats; Respond reaches only a running chat,
// queues 16 answers and refuses the 17th with a conflict.
func TestHubCancelAllAndRespond(t *testing.T) {
	const chat = "fff6"
	h := newHubChat(t, chat, 0, "1d1e")
	// An idle chat with a follower has a room but no run.
	ctx, cancel := context.WithCancel(context.Background())
	release, _, errc := stalledFollower(ctx, t, h, "1d1e")
	defer func() { cancel(); close(release); <-errc }()
	var causes []error
	for _, id := range []string{chat, "0007"} {
		if _, err := h.StartRun(id, func(c error) { causes = append(causes, c) }); err != nil {
			t.Fatal(err)
		}
	}
	shutdown := errors.New("daemon shutting down")
	h.CancelAll(shutdown)
	if len(causes) != 2 || !errors.Is(causes[0], shutdown) || !errors.Is(causes[1], shutdown) {
		t.Fatalf("CancelAll causes = %v, want the shutdown cause twice", causes)
	}
	for _, id := range []string{"1d1e", "dead"} {
		if err := h.Respond(id, providers.InteractionResponse{ID: "1"}); !errors.Is(err, ErrNoActiveRun) {
			t.Fatalf("Respond(%s) = %v, want ErrNoActiveRun", id, err)
		}
	}
	for i := 0; i < 16; i++ {
		if err := h.Respond(chat, providers.InteractionResponse{ID: fmt.Sprint(i)}); err != nil {
			t.Fatalf("Respond #%d = %v", i+1, err)
		}
	}
	if err := h.Respond(chat, providers.InteractionResponse{ID: "16"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("17th Respond = %v, want a conflict", err)
	}
}

// TestHubLogsFailedAppend: an append the store refuses (here: closed) is
// logged through the hub's logger as "append failed" and returned; with no
// logger given the hub still works.
func TestHubLogsFailedAppend(t *testing.T) {
	for _, withLog := range []bool{true, false} {
		st := openStore(t, t.TempDir())
		var buf bytes.Buffer
		var log hclog.Logger
		if withLog {
			log = hclog.New(&hclog.LoggerOptions{Output: &buf})
		}
		h := NewHub(st, log, nil, 0)
		st.Close()
		if _, err := h.Append("aaaa", api.Event{Type: api.EventAssistantText, Text: "x"}); err == nil {
			t.Fatal("Append to a closed store succeeded")
		}
		if withLog && !strings.Contains(buf.String(), "append failed") {
			t.Fatalf("log = %q, want an \"append failed\" line", buf.String())
		}
	}
}
