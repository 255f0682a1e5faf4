package schedule

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/internal/testkit"
)

// prompts stands in for the prompt service: it stores each started
// prompt's user event in the real store (so a run's seq is found as the
// daemon's would be) and refuses Start while busy, as the run hub does.
type prompts struct {
	st      *store.Store
	mu      sync.Mutex
	busy    bool
	started []string
	queued  []string
}

func (p *prompts) Start(_ context.Context, chatID string, in prompt.Input) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy {
		return "", runhub.ErrPromptAlreadyRunning
	}
	if _, err := p.st.Append(chatID, api.Event{Type: api.EventUser, Text: in.Text}); err != nil {
		return "", err
	}
	p.started = append(p.started, in.Text)
	return runhub.NewID(6), nil
}

func (p *prompts) Enqueue(ctx context.Context, chatID string, in prompt.Input) (string, string, error) {
	p.mu.Lock()
	busy := p.busy
	if busy {
		p.queued = append(p.queued, in.Text)
		p.mu.Unlock()
		return "", runhub.NewID(6), nil
	}
	p.mu.Unlock()
	id, err := p.Start(ctx, chatID, in)
	return id, "", err
}

func (p *prompts) counts() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.started), len(p.queued)
}

type fixture struct {
	t    *testing.T
	path string
	st   *store.Store
	p    *prompts
	s    *Scheduler
	now  time.Time
}

var key = bytes.Repeat([]byte{7}, 32)

func newFixture(t *testing.T, catchUp bool) *fixture {
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "remoted.db"), now: time.Date(2026, 12, 7, 9, 58, 0, 0, time.UTC)}
	f.open(catchUp)
	if err := f.st.CreateChat(api.Chat{ID: "c0ffee000001", Owner: "alice", Provider: "claude"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// open opens the store and a scheduler on it (again after close: a
// restart).
func (f *fixture) open(catchUp bool) {
	st, err := store.Open(f.path, store.Options{Key: key, Logger: testkit.Logger(f.t, "store")})
	if err != nil {
		f.t.Fatal(err)
	}
	f.st = st
	f.t.Cleanup(func() { st.Close() })
	f.p = &prompts{st: st}
	f.s, err = New(Options{Store: st, Prompts: f.p, CatchUp: catchUp, Now: func() time.Time { return f.now }, Logger: testkit.Logger(f.t, "schedule")})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) create(req api.ScheduleRequest) api.Schedule {
	f.t.Helper()
	sc, err := f.s.Create("alice", "c0ffee000001", req)
	if err != nil {
		f.t.Fatal(err)
	}
	return sc
}

func (f *fixture) history(id string) []api.ScheduleRun {
	f.t.Helper()
	h, err := f.s.History("alice", id)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// TestScheduleFiresAtEachBoundary: every five minutes, in the schedule's
// zone; nothing between boundaries; a tick late by several boundaries
// fires once.
func TestScheduleFiresAtEachBoundary(t *testing.T) {
	f := newFixture(t, true)
	sc := f.create(api.ScheduleRequest{Cron: "*/5 * * * *", Prompt: "check the build", Timezone: "Europe/Paris"})
	if sc.NextRun == nil || !sc.NextRun.Equal(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("nextRun %v, want 10:00 UTC", sc.NextRun)
	}
	ctx := context.Background()
	for _, c := range []struct {
		at   string
		want int
	}{{"09:59:59", 0}, {"10:00:00", 1}, {"10:00:30", 1}, {"10:04:59", 1}, {"10:05:00", 2}, {"10:10:01", 3}, {"10:31:00", 4}, {"10:31:30", 4}} {
		at, _ := time.Parse("15:04:05", c.at)
		f.now = time.Date(2026, 12, 7, at.Hour(), at.Minute(), at.Second(), 0, time.UTC)
		next := f.s.Tick(ctx, f.now)
		if n, _ := f.p.counts(); n != c.want {
			t.Fatalf("at %s: %d runs, want %d", c.at, n, c.want)
		}
		if !next.After(f.now) {
			t.Fatalf("at %s: next firing %v is not later", c.at, next)
		}
	}
	h := f.history(sc.ID)
	if len(h) != 4 || h[0].Outcome != api.RunRunning || h[0].Seq != 4 || h[3].Seq != 1 {
		t.Fatalf("history %+v", h)
	}
	// The run ends: its outcome and end come from the chat's log.
	if _, err := f.st.Append("c0ffee000001", api.Event{Type: api.EventError, Message: "claude exit: boom", T: f.now.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	h = f.history(sc.ID)
	if h[0].Outcome != api.RunFailed || h[0].Error != "claude exit: boom" || h[0].End == nil {
		t.Fatalf("ended run %+v", h[0])
	}
	if h[1].Outcome != api.RunRunning {
		t.Fatalf("an older run took a later turn's end: %+v", h[1])
	}
	if rec, err := f.st.Schedule(sc.ID); err != nil || rec.History[3].Outcome != api.RunFailed || rec.History[2].Outcome != api.RunRunning {
		t.Fatalf("the ended run is not stored as ended: %+v %v", rec.History, err)
	}
}

// TestScheduleSkipAndQueue: while the chat runs, "skip" records a skipped
// run and submits nothing; "queue" queues the prompt.
func TestScheduleSkipAndQueue(t *testing.T) {
	f := newFixture(t, true)
	skip := f.create(api.ScheduleRequest{Cron: "0 * * * *", Prompt: "skip me"})
	queue := f.create(api.ScheduleRequest{Cron: "0 * * * *", Prompt: "queue me", Overlap: "queue"})
	f.p.busy = true
	f.now = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	f.s.Tick(context.Background(), f.now)
	if started, queued := f.p.counts(); started != 0 || queued != 1 || f.p.queued[0] != "queue me" {
		t.Fatalf("started %d, queued %v", started, f.p.queued)
	}
	if h := f.history(skip.ID); len(h) != 1 || h[0].Outcome != "skipped" || h[0].End == nil {
		t.Fatalf("skip history %+v", h)
	}
	if h := f.history(queue.ID); len(h) != 1 || h[0].Outcome != "running" {
		t.Fatalf("queue history %+v", h)
	}
}

// TestScheduleMissedRunCatchUpOnce: a boundary passed while the daemon
// was down fires once at start, and never again after another restart;
// without catch-up it is recorded missed.
func TestScheduleMissedRunCatchUpOnce(t *testing.T) {
	for _, catchUp := range []bool{true, false} {
		f := newFixture(t, catchUp)
		sc := f.create(api.ScheduleRequest{Cron: "0 * * * *", Prompt: "hourly"})
		f.st.Close() // the daemon stops at 9:58 ...
		f.now = time.Date(2026, 12, 7, 12, 30, 0, 0, time.UTC)
		f.open(catchUp) // ... and starts again at 12:30: 10, 11 and 12 passed
		f.s.Start(context.Background(), f.now)
		f.s.Tick(context.Background(), f.now)
		want := 0
		if catchUp {
			want = 1
		}
		if n, _ := f.p.counts(); n != want {
			t.Fatalf("catch_up %v: %d runs at start, want %d", catchUp, n, want)
		}
		h := f.history(sc.ID)
		if len(h) != 1 || catchUp && h[0].Outcome != "running" || !catchUp && (h[0].Outcome != "missed" || !h[0].Start.Equal(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))) {
			t.Fatalf("catch_up %v: history %+v", catchUp, h)
		}
		f.st.Close() // a second restart at the same time: nothing again
		f.open(catchUp)
		f.s.Start(context.Background(), f.now)
		if n, _ := f.p.counts(); n != 0 {
			t.Fatalf("catch_up %v: fired again after a second restart", catchUp)
		}
		if h := f.history(sc.ID); len(h) != 1 {
			t.Fatalf("catch_up %v: history after a second restart %+v", catchUp, h)
		}
	}
}

// TestScheduleNoDoubleRun: two firings of one boundary from the same
// snapshot (two loops, or a tick racing a restart's start) fire it once:
// the boundary is claimed in the store's transaction before the prompt is
// submitted.
func TestScheduleNoDoubleRun(t *testing.T) {
	f := newFixture(t, true)
	sc := f.create(api.ScheduleRequest{Cron: "0 * * * *", Prompt: "once"})
	f.now = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	snap, err := f.st.Schedule(sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := f.s.fire(context.Background(), snap, f.now, true); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { f.s.Tick(context.Background(), f.now) })
	}
	wg.Wait()
	if n, _ := f.p.counts(); n != 1 {
		t.Fatalf("%d runs for one boundary", n)
	}
	if h := f.history(sc.ID); len(h) != 1 {
		t.Fatalf("history %+v", h)
	}
}

// TestScheduleBadInput: errors name the field; bounds per chat.
func TestScheduleBadInput(t *testing.T) {
	f := newFixture(t, true)
	for _, c := range []struct {
		req  api.ScheduleRequest
		want string
	}{
		{api.ScheduleRequest{Cron: "61 * * * *", Prompt: "x"}, "cron:"},
		{api.ScheduleRequest{Cron: "* * *", Prompt: "x"}, "cron:"},
		{api.ScheduleRequest{Cron: "@every 1s", Prompt: "x"}, "cron:"},
		{api.ScheduleRequest{Cron: "TZ=UTC * * * * *", Prompt: "x"}, "cron:"},
		{api.ScheduleRequest{Cron: "* * * * *", Prompt: "x", Timezone: "Mars/Olympus"}, "timezone:"},
		{api.ScheduleRequest{Cron: "* * * * *", Prompt: " "}, "prompt:"},
		{api.ScheduleRequest{Cron: "* * * * *", Prompt: "x", Overlap: "both"}, "overlap:"},
	} {
		_, err := f.s.Create("alice", "c0ffee000001", c.req)
		if !errdefs.IsInvalidArgument(err) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want invalid argument naming %s", c.req, err, c.want)
		}
	}
	f.s.o.MinInterval = 2 * time.Minute
	if _, err := f.s.Create("alice", "c0ffee000001", api.ScheduleRequest{Cron: "* * * * *", Prompt: "x"}); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "2m0s") {
		t.Errorf("every minute under a 2 minute minimum: %v", err)
	}
	if _, err := f.s.Create("bob", "c0ffee000001", api.ScheduleRequest{Cron: "0 * * * *", Prompt: "x"}); !errdefs.IsNotFound(err) {
		t.Errorf("bob on alice's chat: %v", err)
	}
	f.s.o.MaxPerChat = 2
	for i := range 3 {
		_, err := f.s.Create("alice", "c0ffee000001", api.ScheduleRequest{Cron: "0 * * * *", Prompt: "x"})
		if i < 2 && err != nil || i == 2 && (!errdefs.IsConflict(err) || !strings.Contains(err.Error(), "2 schedules")) {
			t.Fatalf("schedule %d: %v", i, err)
		}
	}
	// Per user, over all their chats.
	if err := f.st.CreateChat(api.Chat{ID: "c0ffee000002", Owner: "alice", Provider: "claude"}); err != nil {
		t.Fatal(err)
	}
	f.s.o.MaxPerUser = 3
	for i := range 2 {
		_, err := f.s.Create("alice", "c0ffee000002", api.ScheduleRequest{Cron: "0 * * * *", Prompt: "x"})
		if i < 1 && err != nil || i == 1 && (!errdefs.IsConflict(err) || !strings.Contains(err.Error(), "you already have 3 schedules")) {
			t.Fatalf("user schedule %d: %v", i, err)
		}
	}
}

// TestSchedulePatchCountsFromNow: a changed cron or a re-enabled
// schedule counts its next time from the change, so a time that passed
// before it does not fire at once.
func TestSchedulePatchCountsFromNow(t *testing.T) {
	f := newFixture(t, true)
	sc := f.create(api.ScheduleRequest{Cron: "0 0 1 1 *", Prompt: "yearly"})
	f.now = time.Date(2026, 12, 7, 10, 2, 0, 0, time.UTC)
	every5 := "*/5 * * * *"
	p, err := f.s.Patch("alice", sc.ID, api.SchedulePatch{Cron: &every5})
	if err != nil {
		t.Fatal(err)
	}
	if p.NextRun == nil || !p.NextRun.Equal(time.Date(2026, 12, 7, 10, 5, 0, 0, time.UTC)) {
		t.Fatalf("nextRun after the change %v, want 10:05", p.NextRun)
	}
	f.s.Tick(context.Background(), f.now)
	if n, _ := f.p.counts(); n != 0 {
		t.Fatalf("the changed schedule fired at once for a time before the change")
	}
	off, on := false, true
	if _, err := f.s.Patch("alice", sc.ID, api.SchedulePatch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	f.now = time.Date(2026, 12, 7, 11, 2, 0, 0, time.UTC)
	if n := f.s.Tick(context.Background(), f.now); !n.IsZero() {
		t.Fatalf("a disabled schedule is due at %v", n)
	}
	if _, err := f.s.Patch("alice", sc.ID, api.SchedulePatch{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	f.s.Tick(context.Background(), f.now)
	if n, _ := f.p.counts(); n != 0 {
		t.Fatalf("a re-enabled schedule fired for the times it was off")
	}
	if _, err := f.s.Patch("bob", sc.ID, api.SchedulePatch{Enabled: &off}); !errdefs.IsNotFound(err) {
		t.Fatalf("bob patches alice's schedule: %v", err)
	}
}
