package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/internal/testkit"
	"remote/providers"
)

// gated is a fake provider whose run emits one delta per value received on
// step and completes when step is closed.
func gated(step chan string) *fakeProvider {
	return &fakeProvider{id: providers.Claude, caps: providers.Capabilities{Label: "Fake", Resume: true, Skills: providers.SkillsSlashCommand},
		run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
			emit(providers.Event{Type: providers.EventRunStarted})
			emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "sess-1", Model: "fake-model"})
			for {
				select {
				case <-ctx.Done():
					return nil
				case s, ok := <-step:
					if !ok {
						emit(providers.Event{Type: providers.EventRunCompleted, Usage: json.RawMessage(`{"output_tokens":3}`)})
						return nil
					}
					emit(providers.Event{Type: providers.EventAssistantDelta, Text: s, MessageID: "m1"})
				}
			}
		}}
}

// readUntilIdle reads chat socket events until the closing sync of a run
// that was seen running, returning everything read.
func readUntilIdle(t *testing.T, c *websocket.Conn) []api.Event {
	t.Helper()
	return readUntilIdleFrom(t, c, false)
}

func readUntilIdleFrom(t *testing.T, c *websocket.Conn, sawRunning bool) []api.Event {
	t.Helper()
	var out []api.Event
	for {
		ev := readEvent(t, c)
		out = append(out, ev)
		if ev.Type == api.EventSync {
			if ev.Running {
				sawRunning = true
			} else if sawRunning {
				return out
			}
		}
	}
}

func persisted(evs []api.Event) []api.Event {
	var out []api.Event
	for _, ev := range evs {
		if ev.Seq > 0 {
			out = append(out, ev)
		}
	}
	return out
}

func TestChatSocketTwoSubscribers(t *testing.T) {
	step := make(chan string)
	ts := newTestServer(t, []providers.Provider{gated(step)})
	chat := ts.createChat("alice", "claude")

	a, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if ev := readEvent(t, a); ev.Type != api.EventSync || ev.Running {
		t.Fatalf("first frame %+v, want sync running=false", ev)
	}
	if err := a.WriteJSON(api.ClientMessage{Type: "prompt", Text: "hello", ClientID: "c1"}); err != nil {
		t.Fatal(err)
	}
	var seenA []api.Event
	// Read until the first delta, so B joins mid-stream.
	step <- "one "
	for {
		ev := readEvent(t, a)
		seenA = append(seenA, ev)
		if ev.Type == api.EventAssistantText {
			break
		}
	}
	step <- "two "
	for ev := readEvent(t, a); ; ev = readEvent(t, a) {
		seenA = append(seenA, ev)
		if ev.Type == api.EventAssistantText {
			break
		}
	}
	since := persisted(seenA)[1].Seq // B has seen up to the session event
	b, _, err := ts.dialWS(fmt.Sprintf("/ws/chat/%s?since=%d", chat.ID, since), "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var seenB []api.Event
	for { // B's replay up to its sync, which must say running
		ev := readEvent(t, b)
		seenB = append(seenB, ev)
		if ev.Type == api.EventSync {
			if !ev.Running {
				t.Fatal("B's sync after replay says not running")
			}
			break
		}
	}
	step <- "three"
	close(step)
	seenA = append(seenA, readUntilIdleFrom(t, a, true)...)
	seenB = append(seenB, readUntilIdleFrom(t, b, true)...)

	stored := ts.events(chat.ID)
	checkGapless(t, stored, 1)
	wantTypes := []string{"user", "session", "assistant_text", "assistant_text", "assistant_text", "complete"}
	if !slices.Equal(types(stored), wantTypes) {
		t.Fatalf("stored %v, want %v", types(stored), wantTypes)
	}
	if got := persisted(seenA); !slices.EqualFunc(got, stored, func(x, y api.Event) bool { return x.Seq == y.Seq && x.Text == y.Text }) {
		t.Errorf("A saw %v, want every stored event once", types(got))
	}
	if got := persisted(seenB); !slices.EqualFunc(got, stored[since:], func(x, y api.Event) bool { return x.Seq == y.Seq && x.Text == y.Text }) {
		t.Errorf("B (since=%d) saw seqs %v, want %d..%d once", since, got, since+1, len(stored))
	}
	acks := func(evs []api.Event) (n int) {
		for _, ev := range evs {
			if ev.Subtype == api.SubtypePromptAccepted {
				n++
				if string(ev.Data) != `{"clientId":"c1"}` {
					t.Errorf("ack data %s", ev.Data)
				}
			}
		}
		return n
	}
	if acks(seenA) != 1 || acks(seenB) != 0 {
		t.Errorf("acks: A %d, B %d; want 1 and 0", acks(seenA), acks(seenB))
	}
	for _, ev := range stored {
		if ev.T == 0 {
			t.Errorf("event %d has no t", ev.Seq)
		}
	}
	c, _ := ts.st.Chat(chat.ID)
	if c.Sessions["claude"] != "sess-1" || c.ClaudeSessionID != "sess-1" || c.Model != "fake-model" || c.Running || c.Title != "hello" {
		t.Errorf("chat after run: %+v", c)
	}
}

func TestRacingPrompts(t *testing.T) {
	release := make(chan struct{})
	p := &fakeProvider{id: providers.Claude, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		<-release
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	const n = 8
	var wg sync.WaitGroup
	statuses := make([]int, n)
	codes := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: fmt.Sprint("p", i)})
			statuses[i] = st
			if st != http.StatusAccepted {
				codes[i] = errorCode(t, body)
			}
		}()
	}
	wg.Wait()
	accepted := 0
	for i, st := range statuses {
		switch {
		case st == http.StatusAccepted:
			accepted++
		case st == http.StatusConflict && codes[i] == api.CodePromptAlreadyRunning:
		default:
			t.Errorf("prompt %d: %d %s", i, st, codes[i])
		}
	}
	if accepted != 1 {
		t.Fatalf("%d prompts accepted, want exactly 1", accepted)
	}
	close(release)
	ts.waitIdle(chat.ID)
	if got := types(ts.events(chat.ID)); !slices.Equal(got, []string{"user", "complete"}) {
		t.Errorf("stored %v, want one user event and one complete", got)
	}
}

func TestSessionRecovery(t *testing.T) {
	p := &fakeProvider{id: providers.Claude, caps: providers.Capabilities{Resume: true, Fork: true}}
	calls := 0
	p.run = func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		calls++
		switch {
		case calls == 1:
			emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "s1"})
			emit(providers.Event{Type: providers.EventAssistantDelta, Text: "first answer"})
		case req.ResumeID != "":
			return fmt.Errorf("resume %s: %w", req.ResumeID, providers.ErrSessionNotFound)
		default:
			emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "s2"})
			emit(providers.Event{Type: providers.EventAssistantDelta, Text: "second answer"})
		}
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	for _, text := range []string{"first question", "second question"} {
		if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: text}); st != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", st, body)
		}
		ts.waitIdle(chat.ID)
	}
	reqs := p.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d provider runs, want 3 (first, resume, one retry)", len(reqs))
	}
	if reqs[0].ResumeID != "" || reqs[0].Prompt != "first question" {
		t.Errorf("first run: %+v", reqs[0])
	}
	if reqs[1].ResumeID != "s1" || reqs[1].Prompt != "second question" {
		t.Errorf("resumed run: resume %q prompt %q", reqs[1].ResumeID, reqs[1].Prompt)
	}
	if reqs[2].ResumeID != "" || reqs[2].Fork || !strings.Contains(reqs[2].Prompt, "Assistant:\nfirst answer") || strings.Contains(reqs[2].Prompt, "User:\nsecond question") {
		t.Errorf("retry: resume %q, prompt %q; want no resume and the earlier transcript", reqs[2].ResumeID, reqs[2].Prompt)
	}
	evs := ts.events(chat.ID)
	want := []string{"user", "session", "assistant_text", "complete", "user", "system/session_recovered", "session", "assistant_text", "complete"}
	if !slices.Equal(types(evs), want) {
		t.Fatalf("stored %v, want %v", types(evs), want)
	}
	checkGapless(t, evs, 1)
	c, _ := ts.st.Chat(chat.ID)
	if c.Sessions["claude"] != "s2" || c.ForkPending {
		t.Errorf("chat sessions %v forkPending %v", c.Sessions, c.ForkPending)
	}
}

func TestRunOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		run    func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error
		cancel bool
		want   []string
		msg    string
	}{
		{"provider error persisted (S30)", func(ctx context.Context, _ providers.RunRequest, _ func(providers.Event)) error {
			return errors.New("exit status 3: boom")
		}, false, []string{"user", "error"}, "claude exit: exit status 3: boom"},
		{"run failed not duplicated (S16)", func(ctx context.Context, _ providers.RunRequest, emit func(providers.Event)) error {
			emit(providers.Event{Type: providers.EventRunFailed, Message: "model refused"})
			return fmt.Errorf("claude: %w", providers.ErrRunFailed)
		}, false, []string{"user", "error"}, "model refused"},
		{"cancel is not an error (S29)", func(ctx context.Context, _ providers.RunRequest, emit func(providers.Event)) error {
			emit(providers.Event{Type: providers.EventAssistantDelta, Text: "partial"})
			<-ctx.Done()
			return ctx.Err()
		}, true, []string{"user", "assistant_text", "complete"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude, run: tt.run}})
			chat := ts.createChat("alice", "claude")
			if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "go"}); st != http.StatusAccepted {
				t.Fatalf("prompt: %d %s", st, body)
			}
			if tt.cancel {
				testkit.Eventually(t, time.Minute, func() bool { return len(ts.events(chat.ID)) >= 2 }, "two events")
				if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/cancel", "alice", nil); st != http.StatusAccepted {
					t.Fatalf("cancel: %d %s", st, body)
				}
			}
			ts.waitIdle(chat.ID)
			evs := ts.events(chat.ID)
			if !slices.Equal(types(evs), tt.want) {
				t.Fatalf("stored %v, want %v", types(evs), tt.want)
			}
			if tt.msg != "" && evs[len(evs)-1].Message != tt.msg {
				t.Errorf("message %q, want %q", evs[len(evs)-1].Message, tt.msg)
			}
			if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/cancel", "alice", nil); st != http.StatusNotFound || errorCode(t, body) != api.CodeNotFound {
				t.Errorf("cancel when idle: %d %s", st, body)
			}
		})
	}
}

func TestInteractionRouted(t *testing.T) {
	got := make(chan providers.InteractionResponse, 1)
	p := &fakeProvider{id: providers.Codex, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventInteractionRequest, InteractionID: `"req-1"`, ToolName: "approval", Input: json.RawMessage(`{"cmd":"ls"}`)})
		select {
		case r := <-req.InteractionResponses:
			got <- r
			emit(providers.Event{Type: providers.EventInteractionResolved, InteractionID: r.ID, Status: "answered"})
		case <-ctx.Done():
			return nil
		}
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "codex")
	ws, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	readEvent(t, ws) // sync
	ws.WriteJSON(api.ClientMessage{Type: "prompt", Text: "do it"})
	for ev := readEvent(t, ws); ev.Type != api.EventInteractionRequest; ev = readEvent(t, ws) { //nolint:revive // empty-block: the work is in the post statement
	}
	ws.WriteJSON(api.ClientMessage{Type: "interaction_response", InteractionID: `"req-1"`, Result: json.RawMessage(`{"decision":"accept"}`)})
	r := <-got
	if r.ID != `"req-1"` || string(r.Result) != `{"decision":"accept"}` {
		t.Errorf("provider got %+v", r)
	}
	ts.waitIdle(chat.ID)
	want := []string{"user", "interaction_request", "interaction_resolved", "complete"}
	if got := types(ts.events(chat.ID)); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/interactions", "alice", api.InteractionRequest{InteractionID: "1", Result: json.RawMessage(`{}`)}); st != http.StatusNotFound {
		t.Errorf("interaction with no run: %d %s", st, body)
	}
}

func TestShutdownAndRestart(t *testing.T) {
	started := make(chan struct{})
	p := &fakeProvider{id: providers.Claude, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, Text: "working"})
		close(started)
		<-ctx.Done()
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	chat := ts.createChat("alice", "claude")
	ws, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	readEvent(t, ws) // sync
	ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "go"})
	<-started
	ts.stop()
	// The follower saw the terminal event, the closing sync, then a
	// going-away close.
	var last []string
	for {
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ev api.Event
		if err := ws.ReadJSON(&ev); err != nil {
			if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Errorf("chat socket ended with %v, want close 1001", err)
			}
			break
		}
		last = append(last, ev.Type)
	}
	if n := len(last); n < 2 || last[n-2] != "error" || last[n-1] != "sync" {
		t.Errorf("follower saw %v, want ... error, sync", last)
	}

	st := openStore(t, ts.dir)
	var evs []api.Event
	st.Events(chat.ID, 0, 0, func(ev api.Event) error { evs = append(evs, ev); return nil })
	c, _ := st.Chat(chat.ID)
	if want := []string{"user", "assistant_text", "error"}; !slices.Equal(types(evs), want) || evs[2].Message != "the run was interrupted because the daemon shut down" || c.Running {
		t.Fatalf("after shutdown: %v %q running=%v", types(evs), evs[len(evs)-1].Message, c.Running)
	}

	// A run still marked running (a crash) gets daemon_restarted + error.
	if _, err := st.UpdateChat(chat.ID, func(c *api.Chat) error { c.Running = true; return nil }); err != nil {
		t.Fatal(err)
	}
	svc := prompt.NewService(prompt.ServiceOptions{Store: st, Hub: runhub.NewHub(st, nil, nil, 0), Registry: prompt.NewRegistry()})
	if err := svc.RecoverInterrupted(); err != nil {
		t.Fatal(err)
	}
	evs = evs[:0]
	st.Events(chat.ID, 3, 0, func(ev api.Event) error { evs = append(evs, ev); return nil })
	c, _ = st.Chat(chat.ID)
	if want := []string{"system/daemon_restarted", "error"}; !slices.Equal(types(evs), want) || evs[1].Message != "the run was interrupted by a daemon restart" || c.Running {
		t.Fatalf("after restart: %v running=%v", types(evs), c.Running)
	}
	st.Close()
}

func TestForkAndOwnership(t *testing.T) {
	native := gated(nil)
	native.caps.Fork = true
	native.run = func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "s-" + req.RunID})
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}
	fresh := &fakeProvider{id: providers.Kimi, caps: providers.Capabilities{Resume: true}, run: native.run}
	ts := newTestServer(t, []providers.Provider{native, fresh})
	for _, tt := range []struct {
		provider string
		keep     bool
	}{{"claude", true}, {"kimi", false}} {
		t.Run(tt.provider, func(t *testing.T) {
			chat := ts.createChat("alice", tt.provider)
			ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
			ts.waitIdle(chat.ID)
			src, _ := ts.st.Chat(chat.ID)
			st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", nil)
			if st != http.StatusCreated {
				t.Fatalf("fork: %d %s", st, body)
			}
			var fork api.Chat
			json.Unmarshal(body, &fork)
			if tt.keep && (fork.Sessions[tt.provider] != src.Sessions[tt.provider] || !fork.ForkPending) {
				t.Errorf("native fork: %+v", fork)
			}
			if !tt.keep && (len(fork.Sessions) != 0 || fork.ForkPending || fork.KimiSessionID != "") {
				t.Errorf("fresh fork kept a session: %+v", fork)
			}
			if got, want := len(ts.events(fork.ID)), len(ts.events(chat.ID)); got != want {
				t.Errorf("fork has %d events, want %d", got, want)
			}
			ts.do("POST", "/v1/chats/"+fork.ID+"/prompt", "alice", api.PromptRequest{Text: "again"})
			ts.waitIdle(fork.ID)
			var last providers.RunRequest
			if tt.provider == "claude" {
				reqs := native.requests()
				last = reqs[len(reqs)-1]
			} else {
				reqs := fresh.requests()
				last = reqs[len(reqs)-1]
			}
			if tt.keep && (!last.Fork || last.ResumeID != src.Sessions["claude"]) {
				t.Errorf("fork run: fork=%v resume=%q", last.Fork, last.ResumeID)
			}
			if !tt.keep && (last.Fork || last.ResumeID != "" || !strings.Contains(last.Prompt, "User:\nhi")) {
				t.Errorf("fresh fork run: fork=%v resume=%q prompt=%q", last.Fork, last.ResumeID, last.Prompt)
			}
			after, _ := ts.st.Chat(fork.ID)
			if after.ForkPending {
				t.Error("session.updated did not clear ForkPending")
			}
			// Another user sees none of it.
			for _, path := range []string{"/v1/chats/" + chat.ID, "/v1/chats/" + chat.ID + "/events"} {
				if st, body := ts.do("GET", path, "mallory", nil); st != http.StatusNotFound || errorCode(t, body) != api.CodeNotFound {
					t.Errorf("mallory GET %s: %d %s", path, st, body)
				}
			}
			if _, resp, err := ts.dialWS("/ws/chat/"+chat.ID, "mallory"); err == nil || resp.StatusCode != http.StatusNotFound {
				t.Errorf("mallory chat socket: %v", err)
			}
			_, body = ts.do("GET", "/v1/chats", "mallory", nil)
			if strings.TrimSpace(string(body)) != "[]" {
				t.Errorf("mallory lists %s", body)
			}
		})
	}
}

func TestEventStreams(t *testing.T) {
	step := make(chan string)
	ts := newTestServer(t, []providers.Provider{gated(step)})
	chat := ts.createChat("alice", "claude")
	ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
	step <- "a"
	close(step)
	ts.waitIdle(chat.ID)
	stored := ts.events(chat.ID)

	st, body := ts.do("GET", "/v1/chats/"+chat.ID+"/events?since=1", "alice", nil)
	var arr []api.Event
	if err := json.Unmarshal(body, &arr); st != 200 || err != nil || len(arr) != len(stored)-1 || arr[0].Seq != 2 {
		t.Fatalf("replay: %d %s", st, body)
	}

	open := func(path string, hdr map[string]string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://remoted"+path, nil)
		req.Header.Set(api.HeaderUser, "alice")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	t.Run("ndjson", func(t *testing.T) {
		resp, cancel := open("/v1/chats/"+chat.ID+"/events?follow=true&since=2", nil)
		defer cancel()
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var got []api.Event
		for sc.Scan() {
			var ev api.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			got = append(got, ev)
			if ev.Type == api.EventSync {
				break
			}
		}
		if len(got) != len(stored)-1 || got[0].Seq != 3 || got[len(got)-1].Type != "sync" {
			t.Errorf("ndjson: %v", types(got))
		}
	})
	t.Run("sse with Last-Event-ID", func(t *testing.T) {
		resp, cancel := open("/v1/chats/"+chat.ID+"/events?since=0", map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "3"})
		defer cancel()
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		sc := bufio.NewScanner(resp.Body)
		var ids []string
		for sc.Scan() {
			line := sc.Text()
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids = append(ids, id)
			}
			if strings.Contains(line, `"type":"sync"`) {
				break
			}
		}
		want := []string{}
		for _, ev := range stored[3:] {
			want = append(want, fmt.Sprint(ev.Seq))
		}
		if !slices.Equal(ids, want) {
			t.Errorf("SSE ids %v, want %v", ids, want)
		}
	})
}

func TestMetricsAndInfo(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude, caps: providers.Capabilities{Label: "Claude Fake"}}})
	chat := ts.createChat("alice", "claude")
	ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
	ts.waitIdle(chat.ID)
	st, body := ts.do("GET", "/metrics", "", nil)
	for _, series := range []string{"remoted_runs_total 1", "remoted_events_total 3", "remoted_subscribers 0", "remoted_subscribers_dropped_total 0", "remoted_lxd_errors_total 0"} {
		if st != 200 || !strings.Contains(string(body), series) {
			t.Errorf("metrics lack %q", series)
		}
	}
	st, body = ts.do("GET", "/v1/info", "", nil)
	var info api.Info
	if err := json.Unmarshal(body, &info); st != 200 || err != nil || info.Version != "test" || len(info.Providers) != 1 || info.Providers[0].Label != "Claude Fake" || info.LXD.Reachable {
		t.Errorf("info: %d %s", st, body)
	}
}

// TestChatSocketKeepalive: the server pings every PingEvery; a peer that
// answers no ping for PongWait is dropped, one that answers stays (docs/api.md's
// 25 s / 60 s, shortened here).
func TestChatSocketKeepalive(t *testing.T) {
	p := &fakeProvider{id: providers.Claude, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) {
		o.PingEvery, o.PongWait = 100*time.Millisecond, time.Second
	})
	chat := ts.createChat("alice", "claude")
	follow := func(answer bool) <-chan error {
		ws, _, err := ts.dialWS("/ws/chat/"+chat.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		if !answer {
			ws.SetPingHandler(func(string) error { return nil })
		}
		ended := make(chan error, 1)
		go func() {
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					ended <- err
					return
				}
			}
		}()
		return ended
	}
	answering, silent := follow(true), follow(false)
	select {
	case err := <-silent:
		t.Logf("silent peer dropped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a peer that answers no ping was not dropped")
	}
	// Several PongWaits later, the answering peer is still there.
	select {
	case err := <-answering:
		t.Fatalf("answering peer dropped: %v", err)
	case <-time.After(5 * time.Second):
	}
}
