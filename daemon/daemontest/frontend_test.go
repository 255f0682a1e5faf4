package daemontest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/daemon"
	"remote/daemon/daemontest"
	"remote/providers"
)

// tab is one browser tab of the original Remote frontend, as its chat hook,
// prompt queue and reducers behave (docs/api.md, "Chat WebSocket"): it keeps a client-side
// queue of prompts and sends the first one whenever it believes the chat
// idle; it marks the chat streaming when it sends a prompt, on a sync with
// running:true and on any live stored event other than complete or error
// (the reducer takes them for run activity; complete and error end it),
// and idle on a sync without running. It reconnects with since set to the
// last seq it saw.
//
// Like that frontend it applies frames without a seq (sync, acks,
// transient errors) as it reads them, but buffers stored events and
// flushes them to the reducer once per animation frame: every 16 ms, or,
// for a hidden tab (browsers pause animation frames there), only when the
// test calls frame. A sync whose lastSeq it has not applied yet waits for
// the flush that applies that event (docs/api.md).
type tab struct {
	t      *testing.T
	d      *daemontest.Daemon
	chatID string
	name   string

	mu        sync.Mutex
	conn      *websocket.Conn
	synced    bool // saw the sync that follows the replay
	streaming bool
	awaiting  string // clientId of the prompt frame not yet answered
	queue     []string
	lastSeq   int64      // the last seq read (the since of a reconnect)
	applied   int64      // the last seq the reducer applied
	pending   []tabEvent // stored events read, not yet flushed
	heldSync  *api.Event // a sync waiting for the flush of its lastSeq
	hidden    bool       // animation frames only when the test calls frame
	seen      []string   // every event's type as applied, "sync:running" for a running sync
	frames    int        // prompt frames sent
	accepted  int
	rejected  int
	changed   chan struct{}
	readerEnd chan struct{}
	stop      chan struct{}
}

// tabEvent is a stored event as read: live when it came after the sync
// that follows the replay.
type tabEvent struct {
	ev   api.Event
	live bool
}

func newTab(t *testing.T, d *daemontest.Daemon, chatID, name string, queue ...string) *tab {
	return openTab(t, d, chatID, name, false, queue...)
}

// newHiddenTab is a tab in the background: its stored events are flushed
// only when the test calls frame.
func newHiddenTab(t *testing.T, d *daemontest.Daemon, chatID, name string, queue ...string) *tab {
	return openTab(t, d, chatID, name, true, queue...)
}

func openTab(t *testing.T, d *daemontest.Daemon, chatID, name string, hidden bool, queue ...string) *tab {
	tb := &tab{t: t, d: d, chatID: chatID, name: name, queue: queue, hidden: hidden,
		changed: make(chan struct{}, 1), stop: make(chan struct{})}
	tb.connect()
	t.Cleanup(tb.close)
	if !hidden {
		go tb.animate()
		t.Cleanup(func() { close(tb.stop) })
	}
	return tb
}

// animate runs the visible tab's animation frames.
func (tb *tab) animate() {
	tick := time.NewTicker(16 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tb.stop:
			return
		case <-tick.C:
			tb.frame()
		}
	}
}

// frame is one animation frame: the buffered stored events go through the
// reducer, then a sync held for them is applied.
func (tb *tab) frame() {
	tb.mu.Lock()
	if len(tb.pending) == 0 {
		tb.mu.Unlock()
		return
	}
	for _, p := range tb.pending {
		tb.reduce(p.ev, p.live)
	}
	tb.pending = nil
	if h := tb.heldSync; h != nil && h.LastSeq <= tb.applied {
		tb.heldSync = nil
		tb.applySync(*h)
	}
	tb.sendIfIdleLocked()
	tb.mu.Unlock()
	tb.notify()
}

func (tb *tab) notify() {
	select {
	case tb.changed <- struct{}{}:
	default:
	}
}

// connect opens the chat socket with since = the last seq seen.
func (tb *tab) connect() {
	tb.t.Helper()
	dialer := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", tb.d.Socket)
	}}
	h := http.Header{}
	h.Set(api.HeaderUser, "alice")
	tb.mu.Lock()
	since := tb.lastSeq
	tb.mu.Unlock()
	conn, resp, err := dialer.Dial("ws://remoted/ws/chat/"+tb.chatID+"?since="+strconv.FormatInt(since, 10), h)
	if err != nil {
		tb.t.Fatalf("%s: dial chat socket: %v", tb.name, err)
	}
	resp.Body.Close()
	end := make(chan struct{})
	tb.mu.Lock()
	tb.conn, tb.synced, tb.readerEnd = conn, false, end
	tb.mu.Unlock()
	go tb.read(conn, end)
}

// reconnect drops the socket and opens a new one (since = last seq), as
// the frontend does after a network hiccup. It waits until no prompt
// frame is unanswered, so a lost answer cannot make it resend one.
func (tb *tab) reconnect() {
	tb.t.Helper()
	tb.waitFor("no unanswered prompt", func() bool { return tb.awaiting == "" })
	tb.close()
	tb.connect()
}

func (tb *tab) close() {
	tb.mu.Lock()
	conn, end := tb.conn, tb.readerEnd
	tb.mu.Unlock()
	_ = conn.Close()
	<-end
}

func (tb *tab) read(conn *websocket.Conn, end chan struct{}) {
	defer close(end)
	for {
		var ev api.Event
		if err := conn.ReadJSON(&ev); err != nil {
			return
		}
		tb.mu.Lock()
		tb.receive(ev)
		tb.sendIfIdleLocked()
		tb.mu.Unlock()
		tb.notify()
	}
}

// receive is the frontend's socket handler: stored events are buffered
// for the next animation frame, anything else is applied at once.
func (tb *tab) receive(ev api.Event) {
	if ev.Seq > 0 {
		if ev.Seq != tb.lastSeq+1 {
			tb.t.Errorf("%s: event seq %d after %d: a gap or a duplicate", tb.name, ev.Seq, tb.lastSeq)
		}
		tb.lastSeq = ev.Seq
		tb.pending = append(tb.pending, tabEvent{ev, tb.synced})
		return
	}
	switch {
	case ev.Type == api.EventSync:
		tb.synced = true
		if ev.LastSeq > tb.applied {
			tb.heldSync = &ev // applied after the frame that applies lastSeq
			return
		}
		tb.heldSync = nil
		tb.applySync(ev)
	case ev.Type == api.EventSystem && ev.Subtype == api.SubtypePromptAccepted:
		if clientID(ev) == tb.awaiting && tb.awaiting != "" {
			tb.queue = tb.queue[1:]
		}
		tb.awaiting = ""
		tb.accepted++
		tb.seen = append(tb.seen, ev.Subtype)
	case ev.Type == api.EventSystem && ev.Subtype == api.SubtypePromptRejected:
		tb.awaiting = "" // it stays queued and is sent again on idle
		tb.rejected++
		tb.seen = append(tb.seen, ev.Subtype)
	}
}

func (tb *tab) applySync(ev api.Event) {
	seen := ev.Type
	if ev.Running {
		seen += ":running"
	}
	tb.seen = append(tb.seen, seen)
	tb.streaming = ev.Running
}

// reduce is the frontend's reducer of stored events.
func (tb *tab) reduce(ev api.Event, live bool) {
	tb.applied = ev.Seq
	tb.seen = append(tb.seen, ev.Type)
	switch {
	case !live:
	case ev.Type == api.EventComplete || ev.Type == api.EventError:
		tb.streaming = false
	default:
		tb.streaming = true
	}
}

// clientID is the clientId a prompt_accepted or prompt_rejected answers.
func clientID(ev api.Event) string {
	var d struct{ ClientID string }
	_ = json.Unmarshal(ev.Data, &d)
	return d.ClientID
}

// sendIfIdleLocked sends the first queued prompt when the tab believes the
// chat idle and has no prompt frame unanswered.
func (tb *tab) sendIfIdleLocked() {
	if !tb.synced || tb.streaming || tb.awaiting != "" || len(tb.queue) == 0 {
		return
	}
	tb.frames++
	tb.awaiting = fmt.Sprintf("%s-%d", tb.name, tb.frames)
	tb.streaming = true
	msg := api.ClientMessage{Type: "prompt", Text: tb.queue[0], ClientID: tb.awaiting}
	_ = tb.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := tb.conn.WriteJSON(msg); err != nil {
		tb.t.Errorf("%s: send prompt: %v", tb.name, err)
	}
}

// send writes one frame as it is (a prompt with queue: true).
func (tb *tab) send(msg api.ClientMessage) {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if msg.Type == "prompt" {
		tb.frames++
		tb.streaming = true
	}
	if err := tb.conn.WriteJSON(msg); err != nil {
		tb.t.Fatalf("%s: send: %v", tb.name, err)
	}
}

// waitFor waits up to 30 s for cond, evaluated under the tab's lock.
func (tb *tab) waitFor(what string, cond func() bool) {
	tb.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		tb.mu.Lock()
		ok := cond()
		tb.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-tb.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			tb.mu.Lock()
			defer tb.mu.Unlock()
			tb.t.Fatalf("%s: timed out waiting for %s (streaming %v, queue %q, %d prompt frames, lastSeq %d)",
				tb.name, what, tb.streaming, tb.queue, tb.frames, tb.lastSeq)
		}
	}
}

// settle waits until every tab has sent its whole queue, the daemon runs
// nothing, and each tab has seen every stored event of the chat; then a
// tab still "streaming" (or with prompts left) is stuck for good.
func settle(t *testing.T, tabs ...*tab) {
	t.Helper()
	for _, tb := range tabs {
		tb.waitFor("its queue sent", func() bool { return len(tb.queue) == 0 && tb.awaiting == "" })
	}
	d, chatID := tabs[0].d, tabs[0].chatID
	tabs[0].waitFor("the daemon to be idle", func() bool { return !d.System.Hub.Running(chatID) })
	evs, err := d.Client("alice").Events(context.Background(), chatID, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1].Seq
	for _, tb := range tabs {
		tb.waitFor(fmt.Sprintf("every event (seq %d)", last), func() bool { return tb.lastSeq >= last })
	}
	time.Sleep(200 * time.Millisecond) //nolint:forbidigo // what the daemon sends after its last event
	for _, tb := range tabs {
		tb.frame() // a hidden tab shown again; a visible one has flushed already
	}
	for _, tb := range tabs {
		tb.mu.Lock()
		if tb.streaming || len(tb.queue) > 0 {
			t.Errorf("%s: stuck: streaming %v with queue %q after the chat's last event (seq %d) — the client never sees the chat idle",
				tb.name, tb.streaming, tb.queue, last)
		}
		tb.mu.Unlock()
	}
}

func (tb *tab) counts() (frames, accepted, rejected int) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.frames, tb.accepted, tb.rejected
}

// userCounts counts the chat's stored user events by text.
func userCounts(t *testing.T, d *daemontest.Daemon, chatID string) (map[string]int, []api.Event) {
	t.Helper()
	evs, err := d.Client("alice").Events(context.Background(), chatID, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range evs {
		if ev.Type == api.EventUser {
			n[ev.Text]++
		}
	}
	return n, evs
}

// Two tabs of the original frontend on one chat, each with a client-side
// queue it sends on idle, runs of random short length, and a reconnect
// with since in the middle: every prompt runs exactly once (one user
// event each), a tab sends no more prompt frames than its prompts plus
// one per run it saw end (no storm: a prompt refused because the other
// tab's run streams gets a sync with running:true, not "idle"), and both
// tabs end idle.
func TestFrontendTwoTabsClientQueues(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	d.Claude.SetRun(func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, MessageID: "m", Text: "working"})
		select {
		case <-time.After(time.Duration(rand.IntN(40)) * time.Millisecond):
		case <-ctx.Done():
		}
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	})
	chat, err := d.Client("alice").CreateChat(context.Background(), api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const perTab = 6
	var aq, bq []string
	for i := range perTab {
		aq = append(aq, fmt.Sprintf("a%d", i))
		bq = append(bq, fmt.Sprintf("b%d", i))
	}
	a := newTab(t, d, chat.ID, "tab A", aq...)
	b := newTab(t, d, chat.ID, "tab B", bq...)
	a.waitFor("half its prompts accepted", func() bool { return a.accepted >= perTab/2 })
	a.reconnect()
	b.reconnect()
	settle(t, a, b)

	n, evs := userCounts(t, d, chat.ID)
	for _, text := range append(aq, bq...) {
		if n[text] != 1 {
			t.Errorf("prompt %q ran %d times (user events), want 1", text, n[text])
		}
	}
	runs := 2 * perTab
	for _, tb := range []*tab{a, b} {
		frames, accepted, rejected := tb.counts()
		t.Logf("%s: %d prompt frames, %d accepted, %d rejected", tb.name, frames, accepted, rejected)
		// One frame per prompt, plus at most one refused frame per run
		// whose closing sync it saw, per (re)connect's first sync.
		if limit := perTab + runs + 2; frames > limit {
			t.Errorf("%s sent %d prompt frames for %d prompts and %d runs (at most %d): a prompt storm — the tab was told idle while a run streamed",
				tb.name, frames, perTab, runs, limit)
		}
	}
	if last := evs[len(evs)-1]; last.Type != api.EventComplete {
		t.Errorf("last stored event %s, want complete", last.Type)
	}
}

// A prompt refused on socket B while socket A's run streams is answered on
// B with prompt_rejected and a sync saying running:true: B stays
// "streaming" until A's run's closing sync.
func TestFrontendRefusedWhileOtherRunsSyncsRunning(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	d.Claude.SetHold(true)
	chat, err := d.Client("alice").CreateChat(context.Background(), api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a := newTab(t, d, chat.ID, "tab A", "from A")
	a.waitFor("its prompt accepted", func() bool { return a.accepted == 1 })
	b := newTab(t, d, chat.ID, "tab B")
	b.waitFor("the sync after replay", func() bool { return b.synced && b.streaming })
	b.mu.Lock()
	b.queue = []string{"from B"}
	b.streaming = false // as if it had missed the running sync: it sends at once
	b.sendIfIdleLocked()
	b.mu.Unlock()
	b.waitFor("its prompt refused", func() bool { return b.rejected == 1 })
	time.Sleep(200 * time.Millisecond) //nolint:forbidigo // the sync that follows the refusal
	b.mu.Lock()
	streaming, frames := b.streaming, b.frames
	b.mu.Unlock()
	if !streaming {
		t.Fatalf("tab B believes the chat idle while tab A's run streams: the sync after its refused prompt did not say running:true")
	}
	if frames != 1 {
		t.Fatalf("tab B sent %d prompt frames while A's run streamed, want 1", frames)
	}
	d.Claude.SetHold(false) // B's prompt, sent when A's run ends, completes
	if err := d.Client("alice").Cancel(context.Background(), chat.ID); err != nil {
		t.Fatal(err)
	}
	settle(t, a, b)
	if n, _ := userCounts(t, d, chat.ID); n["from A"] != 1 || n["from B"] != 1 {
		t.Fatalf("user events %v, want one of each", n)
	}
}

// A prompt queued on the daemon (queue: true) behind a run, whose cwd is
// removed during that run, cannot start: it ends as a run of its own
// (user event, error, closing sync), nothing is stored after that sync,
// the tab ends idle and the chat's last stored event is the error.
func TestFrontendQueuedPromptThatCannotStart(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	release := make(chan struct{})
	d.Claude.SetRun(func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, MessageID: "m", Text: "working"})
		<-release
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	})
	cwd := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	chat, err := d.Client("alice").CreateChat(context.Background(), api.CreateChatRequest{Provider: "claude", Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	a := newTab(t, d, chat.ID, "tab A", "one")
	a.waitFor("its prompt accepted", func() bool { return a.accepted == 1 })
	a.send(api.ClientMessage{Type: "prompt", Text: "two", ClientID: "q", Queue: true})
	a.waitFor("the queued prompt accepted", func() bool { return a.accepted == 2 })
	if err := os.Remove(cwd); err != nil {
		t.Fatal(err)
	}
	close(release)
	settle(t, a)

	n, evs := userCounts(t, d, chat.ID)
	if n["one"] != 1 || n["two"] != 1 {
		t.Errorf("user events %v, want one and two once each", n)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type == api.EventUnqueued {
			t.Errorf("an unqueued event (%q) for a prompt that could not start: it must end as a run of its own", ev.Message)
		}
	}
	if last := evs[len(evs)-1]; last.Type != api.EventError || last.Message == "" {
		t.Errorf("last stored event %s %q, want the error saying why the queued prompt could not start (all: %v)", last.Type, last.Message, types)
	}
	if q, err := d.Client("alice").Queue(context.Background(), chat.ID); err != nil || len(q) != 0 {
		t.Errorf("queue after: %v, %v", q, err)
	}
	raw, _ := json.Marshal(types)
	t.Logf("events: %s", raw)
}

// Events stored outside a run's stream are each followed by a sync with
// the chat's state, also while a run is active: a queued prompt (queued),
// its removal (unqueued) and a title change.
func TestFrontendEventsOutsideRunAreSynced(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	d.Claude.SetRun(func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, MessageID: "m", Text: "working"})
		<-ctx.Done()
		return nil
	})
	c := d.Client("alice")
	ctx := context.Background()
	chat, err := c.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a := newTab(t, d, chat.ID, "tab A", "one")
	a.waitFor("its run streaming", func() bool { return slices.Contains(a.seen, api.EventAssistantText) })
	after := func(what string, do func() error, want ...string) {
		t.Helper()
		a.mu.Lock()
		from := len(a.seen)
		a.mu.Unlock()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		a.waitFor(what+" seen", func() bool { return len(a.seen) > from })
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // a quiet period: collects every frame the action causes, not just the first
		a.mu.Lock()
		got := slices.Clone(a.seen[from:])
		a.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("after %s the tab got %q, want %q", what, got, want)
		}
	}
	var qid string
	after("a queued prompt", func() error {
		r, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "two", Queue: true})
		qid = r.QueueID
		return err
	}, "queued", "sync:running")
	after("its removal", func() error { return c.Unqueue(ctx, chat.ID, qid) }, "unqueued", "sync:running")
	after("a title change", func() error {
		return rename(d, chat.ID, "renamed")
	}, "sync:running")
	if err := c.Cancel(ctx, chat.ID); err != nil {
		t.Fatal(err)
	}
	settle(t, a)
	after("a title change while idle", func() error {
		return rename(d, chat.ID, "idle")
	}, "sync")
}

// rename is PATCH /v1/chats/{id} {"title"} as alice.
func rename(d *daemontest.Daemon, chatID, title string) error {
	hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", d.Socket)
	}}}
	req, err := http.NewRequest("PATCH", "http://remoted/v1/chats/"+chatID, strings.NewReader(`{"title":`+strconv.Quote(title)+`}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderUser, "alice")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("rename: %s", resp.Status)
	}
	return nil
}

// A prompt frame refused for a lasting reason (here: the loose chat's
// directory is gone) is not answered prompt_rejected, which this frontend
// takes for "a run holds the chat" and re-sends at once, forever: each
// prompt is accepted and ends as a run of its own (its user event, an
// error saying why, the closing sync). The tab sends each prompt once and
// ends idle; POST /prompt keeps answering the refusal.
func TestFrontendPromptRefusedForGoodIsARunOfItsOwn(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{})
	cwd := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	c := d.Client("alice")
	ctx := context.Background()
	chat, err := c.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cwd); err != nil {
		t.Fatal(err)
	}
	a := newTab(t, d, chat.ID, "tab A", "one", "two")
	b := newTab(t, d, chat.ID, "tab B")
	settle(t, a, b)
	if frames, accepted, rejected := a.counts(); frames != 2 || accepted != 2 || rejected != 0 {
		t.Errorf("tab A sent %d prompt frames (%d accepted, %d rejected) for 2 prompts, want 2 accepted: a refused prompt is re-sent", frames, accepted, rejected)
	}
	n, evs := userCounts(t, d, chat.ID)
	if n["one"] != 1 || n["two"] != 1 {
		t.Errorf("user events %v, want one and two once each", n)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type)
		if ev.Type == api.EventError && !strings.Contains(ev.Message, "the prompt could not start: ") {
			t.Errorf("error %q does not say the prompt could not start", ev.Message)
		}
	}
	if want := []string{"user", "error", "user", "error"}; !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	if _, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "three"}); err == nil {
		t.Errorf("POST /prompt in a chat whose directory is gone: accepted, want its 4xx refusal")
	}
	if n, _ := userCounts(t, d, chat.ID); n["three"] != 0 {
		t.Errorf("a prompt refused over HTTP stored %d user events", n["three"])
	}
}

// gatedProvider is a scripted provider whose readiness check (what every
// start asks before taking the chat) blocks while its gate is shut, so a
// queued prompt's start can be held with the chat idle.
type gatedProvider struct {
	*daemontest.Provider
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	waiting chan struct{} // closed when a start waits at the shut gate
}

func (p *gatedProvider) shut() {
	p.mu.Lock()
	p.gate, p.waiting = make(chan struct{}), make(chan struct{})
	p.mu.Unlock()
}

func (p *gatedProvider) open() {
	p.mu.Lock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	p.mu.Unlock()
}

func (p *gatedProvider) Readiness(ctx context.Context) providers.Readiness {
	p.mu.Lock()
	gate, waiting := p.gate, p.waiting
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-waiting:
		default:
			close(waiting)
		}
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	return providers.Readiness{Ready: true, BinaryFound: true, LoggedIn: true}
}

// idleWithQueue returns a daemon and a chat that is idle with the queued
// prompt "two" (its queue id) whose start waits at the provider's shut
// gate; the gate opens when the test ends.
func idleWithQueue(t *testing.T) (*daemontest.Daemon, *gatedProvider, api.Chat, string) {
	t.Helper()
	p := &gatedProvider{Provider: daemontest.Claude()}
	d := daemontest.New(t, daemontest.Options{Providers: []providers.Provider{p}})
	t.Cleanup(p.open)
	release := make(chan struct{})
	p.SetRun(func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		if strings.HasSuffix(req.Prompt, "one") {
			<-release
		}
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	})
	c := d.Client("alice")
	ctx := context.Background()
	chat, err := c.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "one"}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "two", Queue: true})
	if err != nil || r.QueueID == "" {
		t.Fatalf("queue a prompt: %+v, %v", r, err)
	}
	p.shut()
	close(release)
	<-p.waiting // "one" ended; "two" waits to start, the chat idle
	if d.System.Hub.Running(chat.ID) {
		t.Fatal("the chat runs while its queued prompt waits at the gate")
	}
	return d, p, chat, r.QueueID
}

// An event stored outside a run while the chat is idle (here: a queued
// prompt removed, DELETE /v1/chats/{id}/queue/{qid}) is followed by the
// closing sync, and that sync reaches a tab that flushes stored events per
// animation frame so that it ends idle: applied after the event, never
// before it. The tab is hidden (no animation frame until the test runs
// one), so the event and the sync are both read before the flush.
func TestFrontendUnqueueWhileIdleEndsIdle(t *testing.T) {
	d, p, chat, qid := idleWithQueue(t)
	a := newHiddenTab(t, d, chat.ID, "tab A")
	a.waitFor("the sync after replay", func() bool { return a.synced })
	a.frame()
	a.waitFor("idle after the replay", func() bool { return a.heldSync == nil && !a.streaming })

	if err := d.Client("alice").Unqueue(context.Background(), chat.ID, qid); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	from := len(a.seen)
	a.mu.Unlock()
	a.waitFor("the unqueued event read", func() bool {
		return len(a.pending) > 0 && a.pending[len(a.pending)-1].ev.Type == api.EventUnqueued
	})
	a.waitFor("a sync after the unqueued event", func() bool {
		return a.heldSync != nil || len(a.seen) > from
	})
	a.frame()
	a.mu.Lock()
	got, streaming := slices.Clone(a.seen[from:]), a.streaming
	a.mu.Unlock()
	if want := []string{"unqueued", "sync"}; !slices.Equal(got, want) {
		t.Errorf("the tab applied %q, want %q", got, want)
	}
	if streaming {
		t.Errorf("the tab is streaming after a queued prompt was removed from an idle chat (applied %q)", got)
	}
	p.open()
	if q, err := d.Client("alice").Queue(context.Background(), chat.ID); err != nil || len(q) != 0 {
		t.Errorf("queue after: %v, %v", q, err)
	}
}

// TestAttackRefusedPromptBypassesChatBound: a chat at its max_chat_bytes
// refuses prompts; a socket prompt refused so is recorded as a run of its
// own, but its user event keeps at most 1 KiB of the text, so a client
// cannot grow a full chat by 512 KiB a frame through its refusals.
func TestAttackRefusedPromptBypassesChatBound(t *testing.T) {
	const bound = 16 << 10
	d := daemontest.New(t, daemontest.Options{Configure: func(o *daemon.Options) { o.MaxChatBytes = bound }})
	c := d.Client("alice")
	ctx := context.Background()
	chat, err := c.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a := newTab(t, d, chat.ID, "tab A", strings.Repeat("x", bound)) // echoed: the chat is full
	settle(t, a)
	if _, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "more"}); err == nil {
		t.Fatal("a full chat took a prompt over HTTP")
	}
	_, before := userCounts(t, d, chat.ID)
	big := strings.Repeat("y", 400<<10)
	a.mu.Lock()
	a.queue = append(a.queue, big)
	a.sendIfIdleLocked()
	a.mu.Unlock()
	settle(t, a)
	_, evs := userCounts(t, d, chat.ID)
	added := evs[len(before):]
	if len(added) != 2 || added[0].Type != api.EventUser || added[1].Type != api.EventError {
		t.Fatalf("the refused prompt stored %d events, want its user and error events", len(added))
	}
	if n := len(added[0].Text); n > 1<<10 {
		t.Errorf("the refused prompt's user event keeps %d bytes of its text in a full chat, want at most 1 KiB", n)
	}
	if !strings.Contains(added[1].Message, "max_chat_bytes") {
		t.Errorf("error %q does not name the bound", added[1].Message)
	}
}
