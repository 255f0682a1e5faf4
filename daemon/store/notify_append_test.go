package store

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/api"
)

// Change notices only for what was saved or deleted (chats and projects),
// the order of chats created at the same time, and appends: an event of
// exactly 8 MiB, a batch that keeps the rest after one failure, the byte
// counts of chats appended together, the wire framing.

func TestCreateChatNotifiesOnlyWhenSaved(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	var mu sync.Mutex
	var got []string
	s.OnChange(func(c Change) {
		mu.Lock()
		defer mu.Unlock()
		if c.Chat != nil {
			got = append(got, c.Chat.ID)
		}
	})
	c := api.Chat{ID: "c1c1", Title: "one", Provider: "claude", CreatedAt: time.Now().UTC()}
	if err := s.CreateChat(c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 {
		t.Errorf("changes after CreateChat: %q, want one", got)
	}
	mu.Unlock()
	if err := s.CreateChat(c); !errors.Is(err, ErrExists) {
		t.Fatalf("second CreateChat: %v, want ErrExists", err)
	}
	mu.Lock()
	if len(got) != 1 || got[0] != "c1c1" {
		t.Errorf("changes %q, want one for c1c1", got)
	}
	mu.Unlock()
	// OnChange(nil) stops the notifications.
	s.OnChange(nil)
	c.ID = "c2c2"
	if err := s.CreateChat(c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Errorf("changes after OnChange(nil): %q", got)
	}
}

func TestChatsSameCreationTimeByID(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, c := range []api.Chat{
		{ID: "bbbb", Provider: "claude", CreatedAt: at},
		{ID: "cccc", Provider: "claude", CreatedAt: at.Add(-time.Second)},
		{ID: "aaaa", Provider: "claude", CreatedAt: at},
		{ID: "dddd", Provider: "claude", CreatedAt: at},
	} {
		if err := s.CreateChat(c); err != nil {
			t.Fatal(err)
		}
	}
	chats, err := s.Chats()
	if err != nil {
		t.Fatal(err)
	}
	var ids string
	for _, c := range chats {
		ids += c.ID[:1]
	}
	if ids != "cabd" {
		t.Errorf("Chats order %q, want \"cabd\" (oldest first, then by id)", ids)
	}
}

func TestUpdateChatSavesAStoppedChat(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	if err := s.CreateChat(api.Chat{ID: "e1e1", Title: "old", Provider: "claude", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	for _, running := range []bool{true, false} {
		title := "new"
		if running {
			title = "running"
		}
		if _, err := s.UpdateChat("e1e1", func(c *api.Chat) error { c.Title, c.Running = title, running; return nil }); err != nil {
			t.Fatal(err)
		}
		c, err := s.Chat("e1e1")
		if err != nil || c.Title != title || c.Running != running {
			t.Errorf("after UpdateChat(title %q, running %v): %+v, %v", title, running, c, err)
		}
	}
}

func TestDeleteChatNotifiesOnlyWhenDeleted(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	if err := s.CreateChat(api.Chat{ID: "f1f1", Title: "gone", Provider: "claude", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	changes := recordChanges(s)
	if err := s.DeleteChat("f1f1"); err != nil {
		t.Fatal(err)
	}
	if got := changes(); len(got) != 1 || !got[0].Deleted || got[0].Chat == nil || got[0].Chat.Title != "gone" {
		t.Errorf("changes after DeleteChat: %+v, want one deletion of \"gone\"", got)
	}
	if err := s.DeleteChat("f1f1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second DeleteChat: %v, want ErrNotFound", err)
	}
	if got := changes(); len(got) != 1 {
		t.Errorf("a failed DeleteChat notified: %+v", got[1:])
	}
}

// An event of exactly 8 MiB of JSON is stored; one byte more is refused.
func TestAppendEventOfExactly8MiB(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "a8a8")
	overhead := len(`{"t":1,"type":"x","text":""}`)
	for _, size := range []int{8 << 20, 8<<20 + 1} {
		ev := api.Event{T: 1, Type: "x", Text: strings.Repeat("a", size-overhead)}
		_, err := s.Append("a8a8", ev)
		if size == 8<<20 && err != nil {
			t.Errorf("event of %d bytes: %v", size, err)
		}
		if size > 8<<20 && !errors.Is(err, ErrInvalid) {
			t.Errorf("event of %d bytes: %v, want ErrInvalid", size, err)
		}
	}
}

// Events queued behind one stored with its run mark are all stored too:
// the mark does not end the transaction early.
func TestAppendAtKeepsTheRestOfTheBatch(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "b9b9")
	const n = 200
	done := make(chan error, n)
	for i := range n {
		var mark *RunMark
		if i%2 == 0 {
			mark = &RunMark{RunID: "r1", Line: int64(i + 1)}
		}
		s.AppendAsyncAt("b9b9", api.Event{T: 1, Type: "x", Text: "hello"}, mark, nil,
			func(_ api.Event, err error) { done <- err })
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	count := 0
	if err := s.Events("b9b9", 0, 0, func(api.Event) error { count++; return nil }); err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Errorf("%d events stored, want %d", count, n)
	}
}

// Each chat's byte count stays exact when one transaction appends to
// several chats.
func TestEventBytesOfChatsAppendedTogether(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	chats := []string{"c0c0", "c1c1", "c2c2"}
	for _, id := range chats {
		mkChat(t, s, id)
		if _, err := s.Append(id, api.Event{T: 1, Type: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 300
	done := make(chan error, n)
	for i := range n {
		s.AppendAsync(chats[i%3], api.Event{T: 1, Type: "x", Text: "hello"}, func(_ api.Event, err error) { done <- err })
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	want := int64(len(`{"t":1,"type":"x"}`) + n/3*len(`{"t":1,"type":"x","text":"hello"}`))
	for _, id := range chats {
		if got, err := s.EventBytes(id); err != nil || got != want {
			t.Errorf("EventBytes(%s) = %d, %v; want %d", id, got, err, want)
		}
	}
}

func TestWireEventFraming(t *testing.T) {
	t.Parallel()
	if seq, raw, err := wireEvent(seqKey(5), []byte(`{}`)); err != nil || seq != 5 || string(raw) != `{"seq":5}` {
		t.Errorf("wireEvent(5, {}) = %d, %s, %v", seq, raw, err)
	}
	if seq, raw, err := wireEvent(seqKey(1), []byte(`{"type":"x"}`)); err != nil || seq != 1 || string(raw) != `{"seq":1,"type":"x"}` {
		t.Errorf("wireEvent(1, ...) = %d, %s, %v", seq, raw, err)
	}
	for _, tc := range []struct {
		seq int64
		val string
	}{{0, `{}`}, {-1, `{}`}, {1, `{`}, {1, ``}, {1, `x}`}, {1, `{x`}} {
		if _, _, err := wireEvent(seqKey(tc.seq), []byte(tc.val)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("wireEvent(%d, %q) error %v, want ErrCorrupt", tc.seq, tc.val, err)
		}
	}
}

func TestCreateProjectNotifiesOnlyWhenSaved(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	var mu sync.Mutex
	var got []string
	s.OnChange(func(c Change) {
		mu.Lock()
		defer mu.Unlock()
		if c.Project != nil {
			got = append(got, c.Project.Name)
		}
	})
	p := api.Project{Name: "proj"}
	if err := s.CreateProject(p); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 || got[0] != "proj" {
		t.Errorf("changes after CreateProject: %q, want one for proj", got)
	}
	mu.Unlock()
	if err := s.CreateProject(p); !errors.Is(err, ErrExists) {
		t.Fatalf("second CreateProject: %v, want ErrExists", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Errorf("a failed CreateProject notified: %q", got)
	}
}

func TestDeleteProjectNotifiesOnlyWhenDeleted(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	if err := s.CreateProject(api.Project{Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	changes := recordChanges(s)
	if err := s.DeleteProject("gone"); err != nil {
		t.Fatal(err)
	}
	if got := changes(); len(got) != 1 || !got[0].Deleted || got[0].Project == nil || got[0].Project.Name != "gone" {
		t.Errorf("changes after DeleteProject: %+v, want one deletion of gone", got)
	}
	if err := s.DeleteProject("gone"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second DeleteProject: %v, want ErrNotFound", err)
	}
	if got := changes(); len(got) != 1 {
		t.Errorf("a failed DeleteProject notified: %+v", got[1:])
	}
}

// recordChanges subscribes to s's change notices; the returned function
// gives a copy of those received so far.
func recordChanges(s *Store) func() []Change {
	var mu sync.Mutex
	var got []Change
	s.OnChange(func(c Change) { mu.Lock(); got = append(got, c); mu.Unlock() })
	return func() []Change {
		mu.Lock()
		defer mu.Unlock()
		return append([]Change(nil), got...)
	}
}
