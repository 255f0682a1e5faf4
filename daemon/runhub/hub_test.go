package runhub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/metrics"
)

// TestHubFollowMidStream: followers join at every point of a live stream,
// each with a different since; every one sees each event exactly once, in
// order, from since+1 to the end.
func TestHubFollowMidStream(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	h := NewHub(st, nil, nil, 0)
	const chat, total = "abcd", 2000
	if err := st.CreateChat(api.Chat{ID: chat, Owner: "u", Provider: "claude"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		since int64
		seqs  []int64
		err   error
	}
	results := make(chan result, 64)
	var wg sync.WaitGroup
	follow := func(since int64) {
		defer wg.Done()
		r := result{since: since}
		r.err = h.Follow(ctx, chat, since, func(ev api.Event) error {
			if ev.Seq > 0 {
				r.seqs = append(r.seqs, ev.Seq)
				if ev.Seq == total {
					return errDone
				}
			}
			return nil
		})
		results <- r
	}
	wg.Add(1)
	go follow(0)
	for i := 1; i <= total; i++ {
		if i%100 == 0 { // a new follower every 100 events, resuming from somewhere behind
			wg.Add(1)
			go follow(int64(i / 2))
		}
		h.AppendAsync(chat, api.Event{Type: api.EventAssistantText, Text: fmt.Sprint(i)}, nil)
	}
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		if !errors.Is(r.err, errDone) {
			t.Fatalf("follower since=%d ended with %v", r.since, r.err)
		}
		if int64(len(r.seqs)) != total-r.since {
			t.Fatalf("follower since=%d got %d events, want %d", r.since, len(r.seqs), total-r.since)
		}
		for i, s := range r.seqs {
			if s != r.since+int64(i)+1 {
				t.Fatalf("follower since=%d: event %d has seq %d, want %d", r.since, i, s, r.since+int64(i)+1)
			}
		}
	}
	if n != 21 {
		t.Fatalf("%d followers finished, want 21", n)
	}
}

var errDone = errors.New("done")

// TestHubSlowSubscriber: a follower that stops reading is dropped with
// ErrSlowSubscriber, the writer never blocks, and a resume from the last
// seq it got loses nothing.
func TestHubSlowSubscriber(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	m := metrics.New()
	h := NewHub(st, nil, m, 4)
	const chat = "beef"
	st.CreateChat(api.Chat{ID: chat, Owner: "u", Provider: "claude"})

	synced := make(chan struct{})
	release := make(chan struct{})
	var last int64
	errc := make(chan error, 1)
	go func() {
		errc <- h.Follow(context.Background(), chat, 0, func(ev api.Event) error {
			if ev.Type == api.EventSync && last == 0 {
				close(synced)
				<-release // stall: the queue fills up behind us
				return nil
			}
			if ev.Seq > 0 {
				last = ev.Seq
			}
			return nil
		})
	}()
	<-synced
	for i := 0; i < 50; i++ {
		if _, err := h.Append(chat, api.Event{Type: api.EventAssistantText, Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	err := <-errc
	if !errors.Is(err, ErrSlowSubscriber) {
		t.Fatalf("Follow = %v, want ErrSlowSubscriber", err)
	}
	if last >= 50 {
		t.Fatalf("slow follower got everything (last %d)", last)
	}
	// Resume from the last seq received.
	var got []int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = h.Follow(ctx, chat, last, func(ev api.Event) error {
		if ev.Type == api.EventSync {
			return errDone
		}
		got = append(got, ev.Seq)
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	if int64(len(got)) != 50-last || got[0] != last+1 {
		t.Fatalf("resume from %d got %v", last, got)
	}
	if h.Subscribers(chat) != 0 {
		t.Errorf("subscribers left: %d", h.Subscribers(chat))
	}
}

// TestHubRunLock: one run per chat; the lock is released by FinishRun.
func TestHubRunLock(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	h := NewHub(st, nil, nil, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []*Run
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.StartRun("c0ffee", func(error) {})
			if err == nil {
				mu.Lock()
				won = append(won, r)
				mu.Unlock()
			} else if !errors.Is(err, ErrPromptAlreadyRunning) {
				t.Errorf("StartRun: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d runs started, want 1", len(won))
	}
	if err := h.Cancel("c0ffee", errors.New("cancelled by the user")); err != nil {
		t.Fatal(err)
	}
	h.FinishRun(won[0])
	if h.Running("c0ffee") {
		t.Fatal("still running after FinishRun")
	}
	if err := h.Cancel("c0ffee", errors.New("cancelled by the user")); !errors.Is(err, ErrNoActiveRun) {
		t.Fatalf("Cancel idle = %v, want ErrNoActiveRun", err)
	}
}

// A follower's own sync (the answer to its refused prompt) carries the
// chat's state when it is queued and comes after every broadcast before
// it: while another run is active it says running:true, after that run's
// closing sync; Hub.Sync tells every follower the same.
func TestSubscriptionSyncIsTruthfulAndOrdered(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	h := NewHub(st, nil, nil, 0)
	const chat = "abce"
	if err := st.CreateChat(api.Chat{ID: chat, Owner: "u", Provider: "claude"}); err != nil {
		t.Fatal(err)
	}
	sub := h.Subscribe(chat)
	defer sub.Close()
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sub.FollowRaw(ctx, 0, nil, func(ev api.Event) error {
			got = append(got, fmt.Sprintf("%s:%v", ev.Type, ev.Running))
			if len(got) == 7 {
				return errDone
			}
			return nil
		})
	}()
	sub.Sync() // idle
	run, err := h.StartRun(chat, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	sub.Sync() // another client's run is active
	h.Sync(chat)
	h.FinishRun(run)
	sub.Sync()
	if err := <-done; !errors.Is(err, errDone) {
		t.Fatalf("follow: %v", err)
	}
	cancel()
	want := []string{"sync:false", "sync:false", "sync:true", "sync:true", "sync:true", "sync:false", "sync:false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("syncs %v, want %v (after replay, own idle, run start, own while running, Hub.Sync, closing, own idle)", got, want)
	}
}

// TestFollowerGetsEventsStoredBesideARun: an event stored in a transaction
// of its own (a queued prompt, a run's end: UpdateChatAndAppend) and a
// run's event group-committed right after it reach a follower in seq
// order, both of them, even when the goroutine that stored the first is
// slow to announce it. (Broadcast by its caller after the transaction
// returned, the first was overtaken by the second, and the follower,
// which skips every seq it has passed, never got it.)
func TestFollowerGetsEventsStoredBesideARun(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	const chat = "abcd"
	if err := st.CreateChat(api.Chat{ID: chat, Owner: "u", Provider: "claude"}); err != nil {
		t.Fatal(err)
	}
	// The store announces in registration order: this one runs before the
	// hub's and stalls the announcement of the queued event until the
	// run's event is committed, or 300 ms when the store (rightly) holds
	// every later commit back until the announcement is done.
	slow, committed := make(chan struct{}), make(chan struct{})
	st.OnAppend(func(_ string, evs []api.Event) {
		switch evs[0].Type {
		case api.EventQueued:
			close(slow)
			select {
			case <-committed:
			case <-time.After(300 * time.Millisecond):
			}
		case api.EventAssistantText:
			close(committed)
		}
	})
	h := NewHub(st, nil, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	sub := h.Subscribe(chat)
	defer sub.Close()
	got := make(chan []string, 1)
	go func() {
		var seen []string
		err := h.followSub(ctx, sub, 0, nil, func(ev api.Event) error {
			if ev.Seq > 0 {
				seen = append(seen, fmt.Sprintf("%d %s", ev.Seq, ev.Type))
			}
			if len(seen) == 2 {
				return errDone
			}
			return nil
		})
		if !errors.Is(err, errDone) {
			seen = append(seen, fmt.Sprintf("(no more events, follow ended with %v)", err))
		}
		got <- seen
	}()
	go func() {
		if _, _, err := st.UpdateChatAndAppend(chat, func(*api.Chat) ([]api.Event, error) {
			return []api.Event{{Type: api.EventQueued, ID: "q1"}}, nil
		}); err != nil {
			t.Error(err)
		}
	}()
	<-slow
	h.AppendAsync(chat, api.Event{Type: api.EventAssistantText, Text: "hi"}, nil)
	if seen, want := <-got, []string{"1 queued", "2 assistant_text"}; !slices.Equal(seen, want) {
		t.Fatalf("the follower got %q, want %q", seen, want)
	}
}

// TestSyncCarriesLastSeq: every sync a follower gets names the last event
// sent to it before the sync: after the replay the last replayed one
// (none when nothing was replayed, even with a since past the end), and
// later the last live one, so a client that applies events once per
// animation frame applies the sync after them (docs/api.md).
func TestSyncCarriesLastSeq(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	h := NewHub(st, nil, nil, 0)
	for i, tc := range []struct {
		since int64
		want  []int64 // LastSeq of the sync after the replay, then of one after a live event
	}{
		{0, []int64{2, 3}},
		{2, []int64{0, 3}},
		{9, []int64{0, 0}}, // the live event (seq 3) is not past since: not sent
	} {
		chat := fmt.Sprintf("abc%d", i)
		if err := st.CreateChat(api.Chat{ID: chat, Owner: "u", Provider: "claude"}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := h.Append(chat, api.Event{Type: api.EventQueued}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		sub := h.Subscribe(chat)
		replayed := make(chan struct{})
		got := make(chan []int64, 1)
		go func() {
			var syncs []int64
			_ = sub.FollowRaw(ctx, tc.since, nil, func(ev api.Event) error {
				if ev.Type == api.EventSync {
					if syncs = append(syncs, ev.LastSeq); len(syncs) == 1 {
						close(replayed)
					} else {
						got <- syncs
						return errDone
					}
				}
				return nil
			})
		}()
		<-replayed
		if _, err := h.Append(chat, api.Event{Type: api.EventUnqueued}); err != nil {
			t.Fatal(err)
		}
		h.Sync(chat)
		if syncs := <-got; !slices.Equal(syncs, tc.want) {
			t.Errorf("since %d: syncs with lastSeq %v, want %v", tc.since, syncs, tc.want)
		}
		cancel()
		sub.Close()
	}
}
