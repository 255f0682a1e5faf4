package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"remote/api"
	"remote/internal/testkit"
)

// TestFaultDiskFullStore fills a 2 MiB tmpfs under the store: the failing
// append is ErrNoSpace (so the daemon can tell a full disk from a broken
// one), nothing of it is stored, seqs stay gapless, the store reopens on the
// full disk (Open writes nothing when the schema is current), and appends
// work again once space is freed, continuing the same seqs.
func TestFaultDiskFullStore(t *testing.T) {
	dir := testkit.Tmpfs(t, 2<<20)
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "remoted.db")
	s := openTest(t, path)
	mkChat(t, s, "f011")
	text := strings.Repeat("x", 2000)
	var appendErr error
	for i := 0; i < 5000 && appendErr == nil; i++ {
		_, appendErr = s.Append("f011", api.Event{Type: api.EventAssistantText, Text: text})
	}
	if !errors.Is(appendErr, ErrNoSpace) {
		t.Fatalf("append on a full disk = %v, want ErrNoSpace", appendErr)
	}
	stored := allEvents(t, s, "f011", 0)
	checkGapless(t, stored)
	if _, err := s.UpdateChat("f011", func(c *api.Chat) error { c.Title = strings.Repeat("t", 4000); return nil }); err != nil && !errors.Is(err, ErrNoSpace) {
		t.Fatalf("UpdateChat on a full disk = %v, want nil or ErrNoSpace", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.FillDisk(t, filepath.Join(dir, "filler2"))

	s = openTest(t, path) // a restart on the full disk
	defer s.Close()
	if got := allEvents(t, s, "f011", 0); len(got) != len(stored) {
		t.Fatalf("after reopen %d events, want %d", len(got), len(stored))
	}
	os.Remove(filler)
	got, err := s.Append("f011", api.Event{Type: api.EventError, Message: "storage full: test"})
	if err != nil {
		t.Fatalf("append after freeing space: %v", err)
	}
	if want := int64(len(stored) + 1); got[0].Seq != want {
		t.Fatalf("append after freeing space got seq %d, want %d", got[0].Seq, want)
	}
	checkGapless(t, allEvents(t, s, "f011", 0))
}

// TestAppendAsyncIf: a refusing condition stores nothing and uses no seq,
// and an unconditional append goes on with the next seq.
func TestAppendAsyncIf(t *testing.T) {
	s, _ := newTestStore(t)
	mkChat(t, s, "c0d1")
	type res struct {
		ev  api.Event
		err error
	}
	ch := make(chan res, 3)
	var stop atomic.Bool
	cond := func() bool { return !stop.Load() }
	s.AppendAsyncIf("c0d1", api.Event{Type: api.EventAssistantText, Text: "a"}, cond, func(ev api.Event, err error) { stop.Store(true); ch <- res{ev, err} })
	a := <-ch
	s.AppendAsyncIf("c0d1", api.Event{Type: api.EventAssistantText, Text: "b"}, cond, func(ev api.Event, err error) { ch <- res{ev, err} })
	s.AppendAsync("c0d1", api.Event{Type: api.EventError, Message: "end"}, func(ev api.Event, err error) { ch <- res{ev, err} })
	b, end := <-ch, <-ch
	if a.err != nil || a.ev.Seq != 1 {
		t.Fatalf("first append: seq %d, %v", a.ev.Seq, a.err)
	}
	if !errors.Is(b.err, ErrSkipped) {
		t.Fatalf("refused append: %v, want ErrSkipped", b.err)
	}
	if end.err != nil || end.ev.Seq != 2 {
		t.Fatalf("unconditional append: seq %d, %v, want seq 2", end.ev.Seq, end.err)
	}
	if got := types(allEvents(t, s, "c0d1", 0)); strings.Join(got, ",") != "assistant_text,error" {
		t.Fatalf("stored %v", got)
	}
}

func types(evs []api.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// TestEventBytes: the per-chat byte counter follows appends, the atomic
// update-and-append, forks and deletes, and a log stored before counters
// existed is summed.
func TestEventBytes(t *testing.T) {
	s, _ := newTestStore(t)
	mkChat(t, s, "b17e")
	want := func(chat string, n int64) {
		t.Helper()
		got, err := s.EventBytes(chat)
		if err != nil || got != n {
			t.Fatalf("EventBytes(%s) = %d, %v, want %d", chat, got, err, n)
		}
	}
	want("b17e", 0)
	evs, err := s.Append("b17e", api.Event{Type: api.EventUser, Text: "hello", T: 1}, api.Event{Type: api.EventAssistantText, Text: "hi", T: 2})
	if err != nil {
		t.Fatal(err)
	}
	// {"t":1,"type":"user","text":"hello"} and {"t":2,"type":"assistant_text","text":"hi"}
	n := int64(len(`{"t":1,"type":"user","text":"hello"}`) + len(`{"t":2,"type":"assistant_text","text":"hi"}`))
	want("b17e", n)
	_, added, err := s.UpdateChatAndAppend("b17e", func(c *api.Chat) ([]api.Event, error) {
		c.Running = false
		return []api.Event{{Type: api.EventError, Message: "x", T: 3}}, nil
	})
	if err != nil || len(added) != 1 || added[0].Seq != evs[1].Seq+1 {
		t.Fatalf("UpdateChatAndAppend: %v %v", added, err)
	}
	n += int64(len(`{"t":3,"type":"error","message":"x"}`))
	want("b17e", n)
	if err := s.CopyEvents("b17e", "f0f0"); err != nil {
		t.Fatal(err)
	}
	mkChat(t, s, "f0f0")
	want("f0f0", n)
	// A log from before the counters: drop the counter bucket.
	if err := s.db.Update(func(tx *boltTx) error { return tx.DeleteBucket(bucketEventBytes) }); err != nil {
		t.Fatal(err)
	}
	want("b17e", n)
	if _, err := s.Append("b17e", api.Event{Type: api.EventAssistantText, Text: "more", T: 4}); err != nil {
		t.Fatal(err)
	}
	n += int64(len(`{"t":4,"type":"assistant_text","text":"more"}`))
	want("b17e", n)
	if err := s.DeleteChat("b17e"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventBytes("b17e"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("EventBytes of a deleted chat: %v", err)
	}
	mkChat(t, s, "b17e")
	want("b17e", 0)
}

// TestUpdateChatAndAppendAtomic: a bad event or an error from fn stores
// neither the chat change nor any event.
func TestUpdateChatAndAppendAtomic(t *testing.T) {
	s, _ := newTestStore(t)
	mkChat(t, s, "a70c")
	if _, err := s.UpdateChat("a70c", func(c *api.Chat) error { c.Running = true; return nil }); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, s)
	_, _, err := s.UpdateChatAndAppend("a70c", func(c *api.Chat) ([]api.Event, error) {
		c.Running = false
		return []api.Event{{Type: api.EventError, Message: "ok"}, {Type: api.EventSync}}, nil
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a sync event: %v, want ErrInvalid", err)
	}
	boom := errors.New("boom")
	if _, _, err := s.UpdateChatAndAppend("a70c", func(c *api.Chat) ([]api.Event, error) { c.Running = false; return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if after := snapshot(t, s); after != before {
		t.Fatalf("store changed:\n%s\nwant\n%s", after, before)
	}
	if _, _, err := s.UpdateChatAndAppend("dead", func(*api.Chat) ([]api.Event, error) { return nil, nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown chat: %v", err)
	}
}
