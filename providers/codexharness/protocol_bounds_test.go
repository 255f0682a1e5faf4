package codexharness

// The app-server protocol's edges and bounds: the parser's notifications,
// usage, deltas and item tracking (at most 1024 items and answers), the
// run's retry, interrupt and exit defaults, its request ids and pending
// requests (at most 256), and the capture and line bounds, each with
// literal values against a scenario app-server (edgeFake).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/providers"
	"remote/providers/runner"
)

func note(method, params string) Message {
	m := Message{Kind: KindNotification, Method: method}
	if params != "" {
		m.Params = json.RawMessage(params)
	}
	return m
}

func types(evs []providers.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Type)+"/"+e.Status)
	}
	return strings.Join(s, ",")
}

// Notifications naming no thread, item or turn are shown as native events
// — even ones named like turn events — while a thread's status change, a
// retrying error and an empty delta are handled as what they are.
func TestParserThreadlessAndStatusNotifications(t *testing.T) {
	tests := []struct {
		name, method, params, want string
	}{
		{"thread status change", "thread/status/changed", `{"threadId":"T","status":{"type":"active"}}`, "turn.status/active"},
		{"turn/started naming nothing", "turn/started", `{}`, "provider.native/"},
		{"turn/completed naming nothing", "turn/completed", `{}`, "provider.native/"},
		{"thread-less retrying error", "error", `{"error":{"message":"Reconnecting... 2/5"},"willRetry":true}`, "turn.status/retrying"},
		{"delta without params", "item/agentMessage/delta", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(providers.Codex)
			if got := types(p.Parse(note(tt.method, tt.params))); got != tt.want {
				t.Fatalf("Parse(%s %s) = %q, want %q", tt.method, tt.params, got, tt.want)
			}
		})
	}
	p := NewParser(providers.Codex)
	evs := p.Parse(note("thread/status/changed", `{"threadId":"T","status":{"type":"active"}}`))
	if len(evs) != 1 || string(evs[0].Data) != `{"type":"active"}` {
		t.Fatalf("status data %+v", evs)
	}
}

// Token usage of the turn that started is reported; the total is the
// reported one, or input + output when Codex reports none.
func TestParserUsageOfStartedTurn(t *testing.T) {
	p := NewParser(providers.Codex)
	p.Parse(note("turn/started", `{"threadId":"T","turn":{"id":"U","status":"inProgress"}}`))
	p.Parse(note("turn/started", `{"threadId":"T","turn":{"id":"V","status":"inProgress"}}`))
	evs := p.Parse(note("thread/tokenUsage/updated", `{"threadId":"T","turnId":"U","tokenUsage":{"last":{"inputTokens":10,"outputTokens":5}}}`))
	if len(evs) != 1 || evs[0].Type != providers.EventUsageUpdated {
		t.Fatalf("usage of turn U = %s, want usage.updated", types(evs))
	}
	var u Usage
	if err := json.Unmarshal(evs[0].Usage, &u); err != nil || u.TotalTokens != 15 || u.InputTokens != 10 || u.OutputTokens != 5 {
		t.Fatalf("usage %s, want total 15", evs[0].Usage)
	}
	evs = p.Parse(note("thread/tokenUsage/updated", `{"threadId":"T","turnId":"U","tokenUsage":{"last":{"inputTokens":10,"outputTokens":5,"totalTokens":40}}}`))
	if len(evs) != 1 || json.Unmarshal(evs[0].Usage, &u) != nil || u.TotalTokens != 40 {
		t.Fatalf("usage with total 40 = %s", types(evs))
	}
	// A usage notification naming no turn is the current turn's.
	evs = p.Parse(note("thread/tokenUsage/updated", `{"threadId":"T","tokenUsage":{"last":{"inputTokens":1,"outputTokens":2}}}`))
	if len(evs) != 1 || evs[0].Type != providers.EventUsageUpdated || json.Unmarshal(evs[0].Usage, &u) != nil || u.TotalTokens != 3 {
		t.Fatalf("usage without turnId = %s, want usage.updated with total 3", types(evs))
	}
	// Another turn's usage is not this run's.
	if evs = p.Parse(note("thread/tokenUsage/updated", `{"threadId":"T","turnId":"V","tokenUsage":{"last":{"inputTokens":1}}}`)); types(evs) != "provider.native/" {
		t.Fatalf("usage of turn V = %s, want provider.native", types(evs))
	}
}

// A reasoning delta without a summary index is the index 0 part.
func TestParserReasoningDeltaWithoutIndex(t *testing.T) {
	p := NewParser(providers.Codex)
	evs := p.Parse(note("item/reasoning/summaryTextDelta", `{"threadId":"T","turnId":"U","itemId":"R","delta":"thinking"}`))
	if len(evs) != 1 || evs[0].Type != providers.EventReasoningDelta || evs[0].Text != "thinking" {
		t.Fatalf("Parse = %+v", evs)
	}
}

// The native envelope names the item of an item notification.
func TestParserEnvelopeNamesItem(t *testing.T) {
	p := NewParser(providers.Codex)
	evs := p.Parse(note("item/started", `{"threadId":"T","turnId":"U","item":{"id":"I1","type":"someFutureItem"}}`))
	if len(evs) != 1 || evs[0].Native == nil || evs[0].Native.ItemID != "I1" {
		t.Fatalf("Parse = %+v", evs)
	}
	evs = p.Parse(note("item/started", `{"threadId":"T","turnId":"U","itemId":"I2","item":{"id":"I1","type":"someFutureItem"}}`))
	if len(evs) != 1 || evs[0].Native == nil || evs[0].Native.ItemID != "I2" {
		t.Fatalf("Parse with itemId = %+v", evs)
	}
}

// A native payload of exactly 64 KiB is kept; one byte more is replaced.
func TestBoundKeeps64KiB(t *testing.T) {
	raw := json.RawMessage(`"` + strings.Repeat("a", 64<<10-2) + `"`)
	if got := bound(raw); len(got) != 65536 {
		t.Fatalf("bound(64 KiB) = %d bytes", len(got))
	}
	raw = json.RawMessage(`"` + strings.Repeat("a", 64<<10-1) + `"`)
	if got := string(bound(raw)); got != `{"bytes":65537,"truncated":true}` {
		t.Fatalf("bound(64 KiB + 1) = %s", got)
	}
}

// Output truncation keeps a string of exactly max bytes and never cuts a
// UTF-8 character or panics on continuation bytes.
func TestTruncateEdges(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 3, "abc"},
		{"aéb", 2, "a\n[output truncated: 1 of 4 bytes shown]"},
		{"\x80\x80\x80abcd", 2, "\n[output truncated: 0 of 7 bytes shown]"},
		{"abcdef", 4, "abcd\n[output truncated: 4 of 6 bytes shown]"},
	}
	for _, tt := range tests {
		if got := truncate(tt.s, tt.max); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

// An interaction's input is its params object; other JSON is wrapped as
// {"value": ...}, and nothing or null is {}.
func TestObjectOrAndOrNull(t *testing.T) {
	for raw, want := range map[string]string{`{"a":1}`: `{"a":1}`, `[1]`: `{"value":[1]}`, `null`: `{}`, ``: `{}`} {
		if got := string(objectOr(json.RawMessage(raw))); got != want {
			t.Errorf("objectOr(%s) = %s, want %s", raw, got, want)
		}
	}
	if got := string(orNull(nil)); got != "null" {
		t.Errorf("orNull(nil) = %s", got)
	}
	if got := string(orNull(json.RawMessage(`1`))); got != "1" {
		t.Errorf("orNull(1) = %s", got)
	}
}

// A request with id 0 carries it; a negative id makes a notification.
func TestEncodeRequestIDZero(t *testing.T) {
	b, err := encodeRequest(0, "initialize", map[string]int{})
	if err != nil || string(b) != `{"method":"initialize","id":0,"params":{}}`+"\n" {
		t.Fatalf("encodeRequest(0) = %s, %v", b, err)
	}
	b, _ = encodeRequest(-1, "initialized", map[string]int{})
	if string(b) != `{"method":"initialized","params":{}}`+"\n" {
		t.Fatalf("encodeRequest(-1) = %s", b)
	}
}

// edgeFakeEnv selects a scenario of edgeFake, an app-server for the
// tests below (init runs before TestMain, so fake_test.go stays as is).
const edgeFakeEnv = "CODEXHARNESS_EDGE_FAKE"

func init() {
	if sc := os.Getenv(edgeFakeEnv); sc != "" {
		os.Exit(edgeFake(sc))
	}
}

// lockedPeer serializes writes of a fake that sends from two goroutines.
type lockedPeer struct {
	*fakePeer
	mu sync.Mutex
}

func (p *lockedPeer) send(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fakePeer.send(format, args...)
}

func edgeFake(scenario string) int {
	fp := &fakePeer{in: bufio.NewScanner(os.Stdin), out: bufio.NewWriter(os.Stdout)}
	fp.in.Buffer(make([]byte, 1<<16), 1<<24)
	p := &lockedPeer{fakePeer: fp}
	if scenario == "die-in-handshake" {
		p.next() // initialize
		return 3
	}
	// The handshake, checking what the client sends.
	ids := map[string]bool{} // request ids the client used
	for turn := false; !turn; {
		m, ok := p.next()
		if !ok {
			return 1
		}
		if id, ok := m["id"]; ok {
			ids[string(id)] = true
		}
		switch str(m["method"]) {
		case "initialize":
			p.send(`{"id":%s,"result":{"userAgent":"fake","platformOs":"linux"}}`, m["id"])
		case "initialized":
			if _, hasID := m["id"]; hasID {
				fmt.Fprintln(os.Stderr, "initialized sent as a request")
				return 5
			}
		case "thread/start":
			p.send(`{"id":%s,"result":{"thread":{"id":"thr-1"},"model":"gpt-fake"}}`, m["id"])
			p.send(`{"method":"test/threadParams","params":{"threadId":"thr-1","got":%s}}`, m["params"])
		case "turn/start":
			p.send(`{"id":%s,"result":{"turn":{"id":"turn-1","status":"inProgress","items":[]}}}`, m["id"])
			p.send(`{"method":"test/turnParams","params":{"threadId":"thr-1","got":%s}}`, m["params"])
			turn = true
		}
	}
	done := func(status string) {
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":%q,"items":[]}}}`, status)
	}
	// answerInterrupt answers a turn/interrupt after delay with the
	// interrupted turn; it returns when stdin closes.
	interrupted := make(chan struct{})
	answerInterrupt := func(delay time.Duration) {
		for {
			m, ok := p.next()
			if !ok {
				return
			}
			if str(m["method"]) == "turn/interrupt" {
				if ids[string(m["id"])] {
					fmt.Fprintln(os.Stderr, "turn/interrupt reuses request id", string(m["id"]))
					continue // a reused id is never answered
				}
				time.Sleep(delay) //nolint:forbidigo // the fake CLI answers the interrupt late: the subject
				p.send(`{"id":%s,"result":{}}`, m["id"])
				done("interrupted")
				close(interrupted)
			}
		}
	}
	switch scenario {
	case "answer": // one answer line
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"hi"}}`, tid)
		done("completed")
	case "retry-forever": // retry notices for 4 s, then the turn completes
		go answerInterrupt(0)
		for i := 1; i <= 80; i++ {
			p.send(`{"method":"error","params":{"error":{"message":"Reconnecting... %d/5"},"willRetry":true,%s}}`, i, tid)
			select {
			case <-interrupted:
				return 0
			case <-time.After(50 * time.Millisecond):
			}
		}
		done("completed")
	case "retry-once": // one retry notice, then 300 ms later the answer
		go answerInterrupt(0)
		p.send(`{"method":"error","params":{"error":{"message":"Reconnecting... 1/5"},"willRetry":true,%s}}`, tid)
		time.Sleep(300 * time.Millisecond) //nolint:forbidigo // the fake CLI's retry pause: the subject
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"hi"}}`, tid)
		done("completed")
	case "slow-interrupt": // answers an interrupt after 300 ms
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"partial"}}`, tid)
		answerInterrupt(300 * time.Millisecond)
		return 0
	case "flood": // 257 server requests at once
		go answerInterrupt(0)
		for i := 1; i <= 257; i++ {
			p.send(`{"method":"item/tool/requestUserInput","id":"q-%d","params":{%s,"itemId":"q-%d"}}`, i, tid, i)
		}
		<-interrupted
		return 0
	case "answer-id": // a request with id "ab", answered by the user
		p.send(`{"method":"item/tool/requestUserInput","id":"ab","params":{%s,"itemId":"q-1"}}`, tid)
		for {
			m, ok := p.next()
			if !ok {
				return 0
			}
			if _, isReq := m["method"]; !isReq && string(m["id"]) == `"ab"` {
				p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"answered"}}`, tid)
				done("completed")
			}
			if str(m["method"]) == "turn/interrupt" {
				p.send(`{"id":%s,"result":{}}`, m["id"])
				done("interrupted")
			}
		}
	case "slow-exit": // after the turn, exits 300 ms after stdin closed, leaving a marker
		done("completed")
		for {
			if _, ok := p.next(); !ok {
				break
			}
		}
		time.Sleep(300 * time.Millisecond) //nolint:forbidigo // the fake CLI exits late: the subject
		os.WriteFile(os.Getenv("EOF_MARKER"), []byte("exited on its own"), 0o600)
		return 0
	}
	for {
		if _, ok := p.next(); !ok {
			return 0
		}
	}
}

func edgeCommand(scenario string, env ...string) providers.Command {
	return providers.Command{Path: os.Args[0], Env: append([]string{edgeFakeEnv + "=" + scenario, "GORACE=atexit_sleep_ms=0"}, env...)}
}

func edgeConfig() Config {
	return Config{Provider: providers.Codex, Settings: Settings{ApprovalPolicy: "never", Sandbox: "danger-full-access"}}
}

// Retry notices that go on past the retry limit end the run as failed,
// saying why, never as interrupted.
func TestRunGivesUpRetrying(t *testing.T) {
	cfg := edgeConfig()
	cfg.RetryLimit = 300 * time.Millisecond
	rec := &recorder{}
	err := Run(context.Background(), &runner.HostLauncher{}, edgeCommand("retry-forever"), providers.RunRequest{Prompt: "hi"}, cfg, rec.emit)
	if !errors.Is(err, providers.ErrRunFailed) || !strings.Contains(err.Error(), "codex could not reach its model endpoint: still retrying after 300ms (Reconnecting... ") {
		t.Fatalf("Run = %v, want the give-up as ErrRunFailed", err)
	}
	got := strings.Join(rec.lines(), "\n")
	if !strings.Contains(got, "run.failed") || strings.Contains(got, "run.interrupted") {
		t.Fatalf("events:\n%s\nwant run.failed and no run.interrupted", got)
	}
}

// With RetryLimit unset (2 min), a retry notice followed 300 ms later by
// the answer is no failure.
func TestRunDefaultRetryLimitIsNotZero(t *testing.T) {
	rec := &recorder{}
	err := Run(context.Background(), &runner.HostLauncher{}, edgeCommand("retry-once"), providers.RunRequest{Prompt: "hi"}, edgeConfig(), rec.emit)
	if err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := strings.Join(rec.lines(), "\n"); strings.Contains(got, "run.failed") || !strings.Contains(got, "run.completed") {
		t.Fatalf("events:\n%s", got)
	}
}

// With InterruptTimeout unset (10 s), an app-server that takes 300 ms to
// stop the turn is not killed.
func TestRunDefaultInterruptTimeoutIsNotZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventAssistantDelta {
			cancel()
		}
	}}
	if err := Run(ctx, &runner.HostLauncher{}, edgeCommand("slow-interrupt"), providers.RunRequest{Prompt: "hi"}, edgeConfig(), rec.emit); err != nil {
		t.Fatalf("Run = %v", err)
	}
	got := strings.Join(rec.lines(), "\n")
	if !strings.Contains(got, "run.interrupted") || strings.Contains(got, "killed") {
		t.Fatalf("events:\n%s\nwant run.interrupted without a kill", got)
	}
}

// With ExitGrace unset (10 s), the app-server gets time to exit on its own
// after the turn (it saves its rollout then).
func TestRunDefaultExitGraceIsNotZero(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "exit")
	if err := Run(context.Background(), &runner.HostLauncher{}, edgeCommand("slow-exit", "EOF_MARKER="+marker), providers.RunRequest{Prompt: "hi"}, edgeConfig(), (&recorder{}).emit); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "exited on its own" {
		t.Fatalf("the app-server was killed before it could exit (%v)", err)
	}
}

// An app-server that dies during the handshake: the error says how it
// exited.
func TestRunAppServerDiesInHandshake(t *testing.T) {
	err := Run(context.Background(), &runner.HostLauncher{}, edgeCommand("die-in-handshake"), providers.RunRequest{Prompt: "hi"}, edgeConfig(), (&recorder{}).emit)
	if err == nil || !strings.Contains(err.Error(), "(exit status 3)") {
		t.Fatalf("Run = %v, want the exit status 3 named", err)
	}
}

// thread/start carries the model, service tier and cwd when set, not when
// unset; "initialized" is a notification (the fake exits 5 on an id).
func TestRunThreadStartParams(t *testing.T) {
	for _, tc := range []struct {
		model, tier, cwd string
		want, not        []string
	}{
		{"gpt-5.1", "flex", "/workspace", []string{`"model":"gpt-5.1"`, `"serviceTier":"flex"`, `"cwd":"/workspace"`}, nil},
		{"", "", "", nil, []string{`"model"`, `"serviceTier"`, `"cwd"`}},
	} {
		cfg := edgeConfig()
		cfg.Settings.Model, cfg.Settings.ServiceTier, cfg.Settings.Cwd = tc.model, tc.tier, tc.cwd
		rec := &recorder{}
		if err := Run(context.Background(), &runner.HostLauncher{}, edgeCommand("answer"), providers.RunRequest{Prompt: "hi"}, cfg, rec.emit); err != nil {
			t.Fatalf("Run = %v", err)
		}
		var params string
		for _, ev := range rec.events {
			if ev.Native != nil && ev.Native.Method == "test/threadParams" {
				params = string(ev.Native.Payload)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(params, w) {
				t.Errorf("thread/start params %s lack %s", params, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(params, n) {
				t.Errorf("thread/start params %s hold %s", params, n)
			}
		}
	}
}

// Each event of a supervised run is positioned at the stdout offset of the
// app-server line it came from.
func TestRunPositionsEventsByStdoutOffset(t *testing.T) {
	slot := &providers.RunSlot{Cursor: providers.NewCursor(false, providers.Pos{}, false)}
	ctx := providers.WithRunSlot(context.Background(), slot)
	var lines []int64
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventAssistantDelta {
			p, _ := slot.Cursor.Next()
			lines = append(lines, p.Line)
		}
	}}
	if err := Run(ctx, &runner.HostLauncher{}, edgeCommand("answer"), providers.RunRequest{Prompt: "hi"}, edgeConfig(), rec.emit); err != nil {
		t.Fatalf("Run = %v", err)
	}
	// initialize's answer, thread/start's answer, test/threadParams and
	// turn/start's answer precede the delta line.
	if len(lines) != 1 || lines[0] <= 0 {
		t.Fatalf("delta positioned at %v, want its line's (positive) stdout offset", lines)
	}
}

// The stderr capture keeps the first max bytes across writes.
func TestCaptureKeepsFirstBytes(t *testing.T) {
	c := &capture{max: 4}
	c.Write([]byte("abc"))
	c.Write([]byte("def"))
	if string(c.buf) != "abcd" {
		t.Fatalf("captured %q, want abcd", c.buf)
	}
}

// The effort reaches turn/start when set (as effort and the collaboration
// mode's reasoning_effort), and is null / absent when unset.
func TestRunTurnStartEffort(t *testing.T) {
	for _, tc := range []struct {
		effort    string
		want, not []string
	}{
		{"high", []string{`"effort":"high"`, `"reasoning_effort":"high"`}, nil},
		{"", []string{`"reasoning_effort":null`}, []string{`"effort"`}},
	} {
		cfg := edgeConfig()
		cfg.Settings.Effort = tc.effort
		rec := &recorder{}
		if err := Run(context.Background(), &runner.HostLauncher{}, edgeCommand("answer"), providers.RunRequest{Prompt: "hi"}, cfg, rec.emit); err != nil {
			t.Fatalf("Run = %v", err)
		}
		var params string
		for _, ev := range rec.events {
			if ev.Native != nil && ev.Native.Method == "test/turnParams" {
				params = string(ev.Native.Payload)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(params, w) {
				t.Errorf("effort %q: turn/start params %s lack %s", tc.effort, params, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(params, n) {
				t.Errorf("effort %q: turn/start params %s hold %s", tc.effort, params, n)
			}
		}
	}
}

// More than 256 server requests pending at once is a protocol error.
func TestRunAtMost256PendingRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, &runner.HostLauncher{}, edgeCommand("flood"), providers.RunRequest{Prompt: "hi"}, edgeConfig(), (&recorder{}).emit)
	if err == nil || !strings.Contains(err.Error(), "more than 256 pending server requests") {
		t.Fatalf("Run = %v, want more than 256 pending server requests", err)
	}
}

// A user's answer naming the request id in another JSON spelling
// ("a\u0062" for "ab") reaches the request.
func TestRunAnswerWithEquivalentID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	responses := make(chan providers.InteractionResponse, 1)
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventInteractionRequest {
			responses <- providers.InteractionResponse{ID: `"a\u0062"`, Result: json.RawMessage(`{"answers":{}}`)}
		}
	}}
	err := Run(ctx, &runner.HostLauncher{}, edgeCommand("answer-id"), providers.RunRequest{Prompt: "hi", InteractionResponses: responses}, edgeConfig(), rec.emit)
	if err != nil || !strings.Contains(strings.Join(rec.lines(), "\n"), "answered") {
		t.Fatalf("Run = %v, events:\n%s\nwant the answer delivered", err, strings.Join(rec.lines(), "\n"))
	}
}

// The parser's memory is bounded: it tracks at most 1024 streamed
// messages and 1024 started tools of a turn. The 1024th is still tracked
// (its completion adds nothing already shown); the 1025th is not (its
// completion repeats the text / the tool's start).
func TestParserTracksAtMost1024Items(t *testing.T) {
	p := NewParser(providers.Codex)
	for i := 1; i <= 1025; i++ {
		p.Parse(note("item/agentMessage/delta", fmt.Sprintf(`{%s,"itemId":"m-%d","delta":"x"}`, pt, i)))
	}
	if got := types(p.Parse(note("item/completed", fmt.Sprintf(`{%s,"item":{"id":"m-1024","type":"agentMessage","text":"x"}}`, pt)))); got != "" {
		t.Fatalf("1024th message completed: %q, want nothing new", got)
	}
	if got := types(p.Parse(note("item/completed", fmt.Sprintf(`{%s,"item":{"id":"m-1025","type":"agentMessage","text":"x"}}`, pt)))); got != "assistant.delta/" {
		t.Fatalf("1025th message completed: %q, want its text again", got)
	}
	p = NewParser(providers.Codex)
	for i := 1; i <= 1025; i++ {
		p.Parse(note("item/started", fmt.Sprintf(`{%s,"item":{"id":"c-%d","type":"commandExecution","status":"inProgress","command":"ls","cwd":"/w"}}`, pt, i)))
	}
	done := func(id string) string {
		return types(p.Parse(note("item/completed", fmt.Sprintf(`{%s,"item":{"id":%q,"type":"commandExecution","status":"completed","command":"ls","cwd":"/w","aggregatedOutput":"","exitCode":0}}`, pt, id))))
	}
	if got := done("c-1024"); got != "tool.completed/completed" {
		t.Fatalf("1024th tool completed: %q", got)
	}
	if got := done("c-1025"); got != "tool.started/completed,tool.completed/completed" {
		t.Fatalf("1025th tool completed: %q, want its start again", got)
	}
}

// Moderation holds back the deltas of at most 1024 hidden answers of a
// turn: the 1024th stays hidden, the 1025th is past the bound.
func TestParserWithholdsAtMost1024Answers(t *testing.T) {
	p := NewParser(providers.Codex)
	for i := 1; i <= 1025; i++ {
		p.Parse(note("item/started", fmt.Sprintf(`{%s,"item":{"id":"h-%d","type":"agentMessage","text":"","moderation":{"moderated":true,"display":{"action":"hide"}}}}`, pt, i)))
	}
	delta := func(id string) string {
		return types(p.Parse(note("item/agentMessage/delta", fmt.Sprintf(`{%s,"itemId":%q,"delta":"secret"}`, pt, id))))
	}
	if got := delta("h-1024"); got != "" {
		t.Fatalf("delta of the 1024th hidden answer: %q, want none", got)
	}
	if got := delta("h-1025"); got != "assistant.delta/" {
		t.Fatalf("delta of the 1025th: %q, want it shown (past the bound)", got)
	}
}

// An answer's decision object (Codex's newer shapes) is an approval unless
// it denies; a decision of another JSON kind is just "answered".
func TestDecisionStatusShapes(t *testing.T) {
	for raw, want := range map[string]string{
		`{"decision":{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}}}`: "approved",
		`{"decision":{"denied":{}}}`: "denied",
		`{"decision":[1]}`:           "answered",
		`{"decision":"accept"}`:      "approved",
	} {
		if got := decisionStatus(json.RawMessage(raw), false); got != want {
			t.Errorf("decisionStatus(%s) = %q, want %q", raw, got, want)
		}
	}
}
