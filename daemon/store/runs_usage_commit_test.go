package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// Run records and positions, secret and key-file bounds, usage accounting,
// group commit (at most 8192 events a transaction), and EventsBefore.

// appendAt stores one event of chat with mark as its run position and waits
// for the commit.
func appendAt(t *testing.T, s *Store, chat string, m RunMark) {
	t.Helper()
	done := make(chan error, 1)
	s.AppendAsyncAt(chat, api.Event{Type: api.EventAssistantText, Text: "x"}, &m, nil, func(_ api.Event, err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A run started while another run's record (with a stored position) is
// still there replaces that record, and starts without a position: also
// when it has the same run id.
func TestPutRunReplacesAPositionedRun(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "a1a1")
	if err := s.PutRun("a1a1", RunRecord{RunID: "r1", Provider: "claude", UserSeq: 1}); err != nil {
		t.Fatal(err)
	}
	appendAt(t, s, "a1a1", RunMark{RunID: "r1", Line: 7, Index: 1})
	if rec, ok, err := s.Run("a1a1"); err != nil || !ok || !rec.HasNext || rec.Next.Line != 7 {
		t.Fatalf("Run before the replacement: %+v, %v, %v", rec, ok, err)
	}
	for _, rec := range []RunRecord{{RunID: "r2", Provider: "codex", UserSeq: 3}, {RunID: "r2", Provider: "codex", UserSeq: 5}} {
		if err := s.PutRun("a1a1", rec); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.Run("a1a1")
		if err != nil || !ok || got.RunID != "r2" || got.Provider != "codex" || got.UserSeq != rec.UserSeq || got.HasNext {
			t.Fatalf("Run after PutRun(%+v): %+v, %v, %v; want that record without a position", rec, got, ok, err)
		}
		if runs, err := s.Runs(); err != nil || len(runs) != 1 || runs["a1a1"].UserSeq != rec.UserSeq || runs["a1a1"].HasNext {
			t.Fatalf("Runs after PutRun(%+v): %+v, %v", rec, runs, err)
		}
		appendAt(t, s, "a1a1", RunMark{RunID: "r2", Line: 9, Index: 2})
	}
}

// The stored position of a run only moves forward: by line, then by index
// within a line; a position of another run replaces it whatever its value.
func TestRunPositionOnlyMovesForward(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "a2a2")
	if err := s.PutRun("a2a2", RunRecord{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		mark RunMark
		want [2]int64 // line, index stored afterwards
	}{
		{RunMark{RunID: "r1", Line: 10, Index: 5}, [2]int64{10, 5}},
		{RunMark{RunID: "r1", Line: 10, Index: 6}, [2]int64{10, 6}},   // same line, next index
		{RunMark{RunID: "r1", Line: 10, Index: 4}, [2]int64{10, 6}},   // same line, earlier index
		{RunMark{RunID: "r1", Line: 10, Index: 6}, [2]int64{10, 6}},   // the same position again
		{RunMark{RunID: "r1", Line: 20, Index: 1}, [2]int64{20, 1}},   // later line, smaller index
		{RunMark{RunID: "r1", Line: 19, Index: 9}, [2]int64{20, 1}},   // earlier line, larger index
		{RunMark{RunID: "r1", Line: 0, Index: 1}, [2]int64{20, 1}},    // earlier line, smaller index
		{RunMark{RunID: "r0", Line: 3, Index: 3}, [2]int64{-1, -1}},   // another run's mark: not this run's position
		{RunMark{RunID: "r1", Line: 2, Index: 2}, [2]int64{2, 2}},     // after another run's, any position is taken
		{RunMark{RunID: "r1", Line: 30, Index: 0}, [2]int64{30, 0}},   // index 0 of a later line
		{RunMark{RunID: "r1", Line: 30, Index: 30}, [2]int64{30, 30}}, // equal line and index values
	}
	for i, st := range steps {
		appendAt(t, s, "a2a2", st.mark)
		rec, ok, err := s.Run("a2a2")
		if err != nil || !ok {
			t.Fatalf("step %d: Run: %v, %v", i, ok, err)
		}
		if st.want[0] < 0 {
			if rec.HasNext {
				t.Errorf("step %d (%+v): position %+v, want none for run r1", i, st.mark, rec.Next)
			}
			continue
		}
		if !rec.HasNext || rec.Next.RunID != "r1" || rec.Next.Line != st.want[0] || rec.Next.Index != st.want[1] {
			t.Errorf("step %d (%+v): position %+v (has %v), want line %d index %d", i, st.mark, rec.Next, rec.HasNext, st.want[0], st.want[1])
		}
	}
}

// fileKeys walks every bucket of the store file at path and returns each
// key and value, as "bucket/sub key=value" lines.
func fileKeys(t *testing.T, path string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+string(k)+"/", b.Bucket(k))
			}
			out = append(out, fmt.Sprintf("%s%s=%s", prefix, k, v))
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name)+"/", b) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Stopping a chat removes its run's record and position from the store
// file, and deleting a chat leaves nothing of it there (no key or value
// naming it).
func TestStoppedAndDeletedChatsLeaveNoRunInTheFile(t *testing.T) {
	t.Parallel()
	s, path := newTestStore(t)
	mkChat(t, s, "b1b1")
	mkChat(t, s, "b2b2")
	for _, id := range []string{"b1b1", "b2b2"} {
		if _, err := s.UpdateChat(id, func(c *api.Chat) error { c.Running = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRun(id, RunRecord{RunID: "run-" + id}); err != nil {
			t.Fatal(err)
		}
		appendAt(t, s, id, RunMark{RunID: "run-" + id, Line: 4, Index: 1})
	}
	if _, err := s.UpdateChat("b1b1", func(c *api.Chat) error { c.Running = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteChat("b2b2"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, kv := range fileKeys(t, path) {
		if strings.Contains(kv, "run-b1b1") {
			t.Errorf("the stopped chat's run is still in the file: %q", kv)
		}
		if strings.Contains(kv, "b2b2") {
			t.Errorf("the deleted chat is still in the file: %q", kv)
		}
	}
}

// A secret value of exactly 64 KiB (65,536 bytes) is stored and read back;
// one byte more is refused with an error saying both sizes.
func TestSecretValueOfExactly64KiB(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("v", 65536)
	if err := s.PutSecret("web", "BIG", value); err != nil {
		t.Fatalf("a 65536-byte secret: %v", err)
	}
	if secs, err := s.Secrets("web"); err != nil || len(secs) != 1 || secs[0].Value != value {
		t.Fatalf("Secrets after a 65536-byte value: %d secrets, %v", len(secs), err)
	}
	err := s.PutSecret("web", "BIGGER", value+"w")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "value of 65537 bytes exceeds 65536") || strings.Contains(err.Error(), "vvvv") {
		t.Fatalf("a 65537-byte secret: %v, want ErrInvalid saying 65537 bytes exceed 65536", err)
	}
	if keys, err := s.SecretKeys("web"); err != nil || len(keys) != 1 || keys[0].Key != "BIG" {
		t.Fatalf("SecretKeys after the refused value: %+v, %v", keys, err)
	}
}

// usageOf returns the usage records Usage reports for [from, to), as
// "runId:cost" strings, oldest first.
func usageOf(t *testing.T, s *Store, from, to time.Time) []string {
	t.Helper()
	var out []string
	err := s.Usage(from, to, func(r UsageRecord) error {
		out = append(out, fmt.Sprintf("%s:%g", r.RunID, r.CostUSD))
		return nil
	})
	if err != nil {
		t.Fatalf("Usage(%v, %v): %v", from, to, err)
	}
	return out
}

// Usage reports the runs that ended in [from, to) to the millisecond,
// oldest first; a zero time leaves that side open.
func TestUsageWindowToTheMillisecond(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	base := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i, ms := range []int64{2, 0, 1, 3} { // stored out of order
		rec := UsageRecord{T: base.UnixMilli() + ms, RunID: fmt.Sprintf("r%d", ms), ChatID: "c1c1", Provider: "codex", CostUSD: float64(i)}
		if _, err := s.RecordUsage(rec, false); err != nil {
			t.Fatal(err)
		}
	}
	ms := func(n int64) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	for _, tc := range []struct {
		from, to time.Time
		want     string
	}{
		{time.Time{}, time.Time{}, "r0:1 r1:2 r2:0 r3:3"},
		{ms(1), ms(3), "r1:2 r2:0"},
		{ms(1), time.Time{}, "r1:2 r2:0 r3:3"},
		{time.Time{}, ms(1), "r0:1"},
		{ms(3), ms(4), "r3:3"},
		{ms(4), time.Time{}, ""},
		{time.Unix(0, 0), ms(1), "r0:1"},
		{time.Unix(-5, 0), ms(1), "r0:1"},
	} {
		if got := strings.Join(usageOf(t, s, tc.from, tc.to), " "); got != tc.want {
			t.Fatalf("Usage(%s, %s) = %q, want %q", tc.from.Format(time.RFC3339Nano), tc.to.Format(time.RFC3339Nano), got, tc.want)
		}
	}
	// fn's error ends the walk and is returned.
	stop := errors.New("stop")
	n := 0
	if err := s.Usage(time.Time{}, time.Time{}, func(UsageRecord) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("Usage with a failing fn: %v after %d calls, want stop after 1", err, n)
	}
}

// A usage record needs a run id and a time after 1970 (Unix ms > 0).
func TestRecordUsageNeedsRunIDAndTime(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	for _, rec := range []UsageRecord{
		{T: 0, RunID: "r", ChatID: "c1c1"},
		{T: -1, RunID: "r", ChatID: "c1c1"},
		{T: 1, RunID: "", ChatID: "c1c1"},
	} {
		if _, err := s.RecordUsage(rec, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("RecordUsage(T %d, run %q): %v, want ErrInvalid", rec.T, rec.RunID, err)
		}
	}
	if _, err := s.RecordUsage(UsageRecord{T: 1, RunID: "r", ChatID: "c1c1"}, false); err != nil {
		t.Errorf("RecordUsage(T 1): %v", err)
	}
	if got := usageOf(t, s, time.Time{}, time.Time{}); len(got) != 1 || got[0] != "r:0" {
		t.Errorf("usage stored: %q, want the one valid record", got)
	}
}

// A provider reporting its session's running total (cumulative) is charged
// the difference to the chat's previous total: nothing when the total did
// not grow, the whole total when it is smaller (a new session). Totals are
// kept per chat and provider.
func TestCumulativeCostIsChargedTheDifference(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	steps := []struct {
		chat, provider string
		total, charged float64
	}{
		{"c1c1", "claude", 1.5, 1.5},
		{"c1c1", "claude", 4, 2.5},
		{"c1c1", "claude", 4, 0}, // no growth
		{"c2c2", "claude", 3, 3}, // another chat
		{"c1c1", "other", 1, 1},  // another provider
		{"c1c1", "claude", 1, 1}, // a new session
		{"c1c1", "claude", 1.25, 0.25},
	}
	for i, st := range steps {
		rec, err := s.RecordUsage(UsageRecord{T: int64(1000 + i), RunID: fmt.Sprintf("r%d", i), ChatID: st.chat, Provider: st.provider, CostUSD: st.total}, true)
		if err != nil || rec.CostUSD != st.charged {
			t.Errorf("step %d (%s %s total %g): charged %g, %v; want %g", i, st.chat, st.provider, st.total, rec.CostUSD, err, st.charged)
		}
	}
	// Without cumulative the cost is taken as it is, and no total is kept.
	if rec, err := s.RecordUsage(UsageRecord{T: 2000, RunID: "x", ChatID: "c3c3", Provider: "claude", CostUSD: 0.5}, false); err != nil || rec.CostUSD != 0.5 {
		t.Errorf("non-cumulative: %g, %v", rec.CostUSD, err)
	}
	if rec, _ := s.RecordUsage(UsageRecord{T: 2001, RunID: "y", ChatID: "c3c3", Provider: "claude", CostUSD: 0.5}, true); rec.CostUSD != 0.5 {
		t.Errorf("first cumulative run after a non-cumulative one charged %g, want 0.5", rec.CostUSD)
	}
	want := []string{"r0:1.5", "r1:2.5", "r2:0", "r3:3", "r4:1", "r5:1", "r6:0.25", "x:0.5", "y:0.5"}
	if got := usageOf(t, s, time.Time{}, time.Time{}); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("stored usage %q, want %q", got, want)
	}
}

// A fork gets its parent's running totals, every provider's, so its first
// run is charged only its own cost; other chats' totals are not copied,
// nor a key without a provider name.
func TestForkContinuesTheParentsTotals(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	for i, m := range []struct {
		chat, provider string
		total          float64
	}{{"abcd1", "claude", 2}, {"abcd1", "zeta", 5}, {"abcd10", "claude", 9}, {"abcd", "claude", 7}} {
		if _, err := s.RecordUsage(UsageRecord{T: int64(10 + i), RunID: fmt.Sprintf("p%d", i), ChatID: m.chat, Provider: m.provider, CostUSD: m.total}, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CopyUsageMarks("abcd1", "bbbb"); err != nil {
		t.Fatal(err)
	}
	for i, st := range []struct {
		provider       string
		total, charged float64
	}{{"claude", 2.75, 0.75}, {"zeta", 6, 1}, {"other", 4, 4}} {
		rec, err := s.RecordUsage(UsageRecord{T: int64(100 + i), RunID: fmt.Sprintf("f%d", i), ChatID: "bbbb", Provider: st.provider, CostUSD: st.total}, true)
		if err != nil || rec.CostUSD != st.charged {
			t.Errorf("fork's first %s run (total %g): charged %g, %v; want %g", st.provider, st.total, rec.CostUSD, err, st.charged)
		}
	}
	// A mark stored without a provider name is no provider's total.
	if _, err := s.RecordUsage(UsageRecord{T: 200, RunID: "n", ChatID: "cccc", CostUSD: 3}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyUsageMarks("cccc", "dddd"); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.RecordUsage(UsageRecord{T: 201, RunID: "m", ChatID: "dddd", CostUSD: 5}, true); err != nil || rec.CostUSD != 5 {
		t.Errorf("a nameless total was copied: charged %g, %v; want 5", rec.CostUSD, err)
	}
}

// A secret key (an environment variable name) may be 256 characters long,
// not 257.
func TestSecretKeyOfExactly256Characters(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	key := "K" + strings.Repeat("_", 255)
	if !ValidSecretKey(key) || ValidSecretKey(key+"_") {
		t.Errorf("ValidSecretKey: 256 characters %v, 257 %v; want true, false", ValidSecretKey(key), ValidSecretKey(key+"_"))
	}
	if err := s.PutSecret("web", key, "v"); err != nil {
		t.Errorf("a 256-character key: %v", err)
	}
	if err := s.PutSecret("web", key+"_", "v"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a 257-character key: %v, want ErrInvalid", err)
	}
	if keys, err := s.SecretKeys("web"); err != nil || len(keys) != 1 || keys[0].Key != key {
		t.Errorf("SecretKeys: %d keys, %v; want the 256-character one", len(keys), err)
	}
}

// Errors quote a bad name of up to 64 bytes whole, and the first 64 bytes
// of a longer one followed by "...".
func TestErrorsQuoteBadNamesUpTo64Bytes(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	name64 := strings.Repeat("n", 63) + "-"
	err := s.CreateProject(api.Project{Name: name64})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `project name "`+name64+`":`) {
		t.Errorf("64-byte bad name: %v, want it quoted whole", err)
	}
	err = s.CreateProject(api.Project{Name: name64 + "x"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `project name "`+name64+`...":`) {
		t.Errorf("65-byte bad name: %v, want its first 64 bytes and ...", err)
	}
}

// A new store file logs its schema migrations, "from=0 to=1" for the
// first.
func TestOpenLogsSchemaMigration(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	path := filepath.Join(t.TempDir(), "remote.db")
	s, err := Open(path, Options{Key: testKey, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := logs.String(); !strings.Contains(got, "store schema migrated: from=0 to=1\n") {
		t.Errorf("logs of a new store file:\n%s\nwant \"store schema migrated: from=0 to=1\"", got)
	}
}

// holdCommitter queues an append to chat whose condition holds the group
// committer inside its transaction until release is called (at the latest
// by the test's cleanup, before the store closes). Its done, and those the
// test adds, report to done (n slots).
func holdCommitter(t *testing.T, s *Store, chat string, n int) (release func(), done chan error) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	done = make(chan error, n)
	s.AppendAsyncIf(chat, api.Event{Type: "x", Text: "first"}, func() bool {
		close(entered)
		<-held
		return true
	}, func(_ api.Event, err error) { done <- err })
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the first append ended (%v) without asking its condition", err)
	}
	return release, done
}

// Appends queued while a transaction is being written are committed
// together by the next one (group commit): the second one's condition is
// asked in the same transaction as the first one's write, before the
// first one's done; then each done runs in order.
func TestQueuedAppendsCommitTogether(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "d1d1")
	release, done := holdCommitter(t, s, "d1d1", 3)
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	s.AppendAsync("d1d1", api.Event{Type: "x", Text: "a"}, func(_ api.Event, err error) { note("done a"); done <- err })
	s.AppendAsyncIf("d1d1", api.Event{Type: "x", Text: "b"}, func() bool { note("cond b"); return true },
		func(_ api.Event, err error) { note("done b"); done <- err })
	release()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(order, ", "); got != "cond b, done a, done b" {
		t.Errorf("order %q, want \"cond b, done a, done b\" (a and b in one transaction)", got)
	}
	if evs := allEvents(t, s, "d1d1", 0); len(evs) != 3 || evs[1].Text != "a" || evs[2].Text != "b" {
		t.Errorf("stored %+v", evs)
	}
}

// One transaction writes at most 8,192 queued events: appends beyond that
// wait for the next one, even when already queued.
func TestAtMost8192EventsPerTransaction(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "d2d2")
	release, done := holdCommitter(t, s, "d2d2", 4)
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	s.AppendAsync("d2d2", api.Event{Type: "x", Text: "a"}, func(_ api.Event, err error) { note("done a"); done <- err })
	many := make([]api.Event, 8191) // with a: 8,192 events
	for i := range many {
		many[i] = api.Event{Type: "x", Text: "m"}
	}
	go func() {
		_, err := s.Append("d2d2", many...)
		done <- err
	}()
	for len(s.queue) < 2 { // a, then the 8,191 events, are queued
		select {
		case err := <-done:
			t.Fatalf("an append ended (%v) while the committer was held", err)
		default:
			runtime.Gosched()
		}
	}
	s.AppendAsyncIf("d2d2", api.Event{Type: "x", Text: "b"}, func() bool { note("cond b"); return true },
		func(_ api.Event, err error) { note("done b"); done <- err })
	release()
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(order, ", "); got != "done a, cond b, done b" {
		t.Errorf("order %q, want \"done a, cond b, done b\" (b in the next transaction)", got)
	}
	if evs := allEvents(t, s, "d2d2", 0); len(evs) != 8194 || evs[8193].Text != "b" {
		t.Errorf("stored %d events", len(evs))
	}
}

// EventsBefore pages backwards through a chat's log: the newest limit
// events with seq < before (before <= 0: from the end), oldest first, and
// whether older ones remain.
func TestEventsBeforePagesBackwards(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "e5e5")
	mkChat(t, s, "e0e0") // no events
	for i := 1; i <= 5; i++ {
		if _, err := s.Append("e5e5", api.Event{T: 1, Type: "x", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		chat     string
		before   int64
		limit    int
		want     string
		wantMore bool
	}{
		{"e5e5", 0, 2, "4 5", true},
		{"e5e5", -1, 10, "1 2 3 4 5", false},
		{"e5e5", 0, 5, "1 2 3 4 5", false},
		{"e5e5", 4, 2, "2 3", true},
		{"e5e5", 3, 2, "1 2", false},
		{"e5e5", 1, 5, "", false},
		{"e5e5", 6, 5, "1 2 3 4 5", false},
		{"e5e5", 100, 3, "3 4 5", true},
		{"e5e5", 5, 1, "4", true},
		{"e0e0", 0, 5, "", false},
	} {
		evs, more, err := s.EventsBefore(tc.chat, tc.before, tc.limit)
		var seqs []string
		for _, raw := range evs {
			var ev api.Event
			if err := json.Unmarshal(raw, &ev); err != nil || fmt.Sprint(ev.Seq) != ev.Text {
				t.Fatalf("EventsBefore(%s, %d, %d): event %s (%v)", tc.chat, tc.before, tc.limit, raw, err)
			}
			seqs = append(seqs, ev.Text)
		}
		if got := strings.Join(seqs, " "); err != nil || got != tc.want || more != tc.wantMore {
			t.Errorf("EventsBefore(%s, %d, %d) = %q, more %v, %v; want %q, more %v", tc.chat, tc.before, tc.limit, got, more, err, tc.want, tc.wantMore)
		}
	}
	for _, tc := range []struct {
		chat  string
		limit int
		want  error
	}{{"e5e5", 0, ErrInvalid}, {"e5e5", -1, ErrInvalid}, {"ffff", 1, ErrNotFound}, {"XYZ", 1, ErrInvalid}} {
		if evs, _, err := s.EventsBefore(tc.chat, 0, tc.limit); !errors.Is(err, tc.want) || len(evs) != 0 {
			t.Errorf("EventsBefore(%s, 0, %d) = %d events, %v; want %v", tc.chat, tc.limit, len(evs), err, tc.want)
		}
	}
}
