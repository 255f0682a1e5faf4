package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/runner"
)

// Misbehaving CLIs, through the real Claude adapter, the shared runner, the
// host launcher and the whole prompt service (a TestFault… run: docs/testing.md). The
// fake CLI is a shell script speaking Claude's stream-json.

// Claude stream-json lines of a short turn.
const (
	claudeInit   = `{"type":"system","subtype":"init","session_id":"s-1","model":"claude-fake"}`
	claudeDelta  = `{"type":"stream_event","session_id":"s-1","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"all done"}}}`
	claudeResult = `{"type":"result","subtype":"success","is_error":false,"result":"all done","session_id":"s-1","usage":{"input_tokens":1,"output_tokens":2}}`
)

// fakeClaudeCLI writes an executable script that reads its prompt, records
// its pid in the file it returns, and runs body.
func fakeClaudeCLI(t *testing.T, body string) (bin, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	bin, pidFile = filepath.Join(dir, "claude"), filepath.Join(dir, "pid")
	// It answers the readiness probes (--version, auth status) as the
	// pinned CLI does, logged in with an API key.
	probes := "case \"$1\" in --version) echo '" + providers.TestedClaudeVersion + " (Claude Code)'; exit 0;; " +
		"auth) echo '{\"loggedIn\":true,\"authMethod\":\"api_key\"}'; exit 0;; esac\n"
	script := "#!/bin/sh\n" + probes + "echo $$ > " + pidFile + "\ncat > /dev/null\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, pidFile
}

// emitLines is shell that prints each line with a newline.
func emitLines(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("printf '%s\\n' '" + l + "'\n")
	}
	return b.String()
}

// runFaultServer serves the Claude adapter over bin with a short exit
// grace, and the idle timeout given (0 = off).
func runFaultServer(t *testing.T, bin string, idle time.Duration) *testServer {
	t.Helper()
	p := claude.New(providers.AdapterConfig{Binary: bin, Host: &runner.HostLauncher{}, ExitGrace: 300 * time.Millisecond})
	return newTestServer(t, []providers.Provider{p}, func(o *Options) { o.IdleTimeout = idle })
}

// promptAndWait sends a prompt and waits (up to 20 s, far beyond every
// grace and timeout the tests use) until the chat is no longer running.
func promptAndWait(t *testing.T, ts *testServer, chatID, text string) {
	t.Helper()
	if st, body := ts.do("POST", "/v1/chats/"+chatID+"/prompt", "alice", api.PromptRequest{Text: text}); st != http.StatusAccepted {
		t.Fatalf("prompt %q: %d %s", text, st, body)
	}
	if testkit.Poll(20*time.Second, func() bool { return !ts.srv.hub.Running(chatID) }) != nil {
		st, body := ts.do("POST", "/v1/chats/"+chatID+"/prompt", "alice", api.PromptRequest{Text: "anyone there?"})
		t.Fatalf("chat still running 20 s after the prompt (a new prompt gets %d %s)", st, body)
	}
}

// lastRun returns the types (with subtypes) of the chat's events after its
// last user event, and that run's error messages.
func lastRun(t *testing.T, ts *testServer, chatID string) (kinds []string, errs []string) {
	t.Helper()
	evs := ts.events(chatID)
	start := 0
	for i, ev := range evs {
		if ev.Type == api.EventUser {
			start = i + 1
		}
	}
	for _, ev := range evs[start:] {
		kinds = append(kinds, ev.Type)
		if ev.Type == api.EventError {
			errs = append(errs, ev.Message)
		}
	}
	return kinds, errs
}

// checkNotRunning asserts the stored chat is not marked running.
func checkNotRunning(t *testing.T, ts *testServer, chatID string) {
	t.Helper()
	st, body := ts.do("GET", "/v1/chats/"+chatID, "alice", nil)
	var c api.Chat
	if st != http.StatusOK || json.Unmarshal(body, &c) != nil {
		t.Fatalf("get chat: %d %s", st, body)
	}
	if c.Running {
		t.Fatalf("chat %s still marked running", chatID)
	}
}

// checkGone asserts the process whose pid the fake CLI recorded is gone.
func checkGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the fake CLI never ran: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if testkit.Poll(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the CLI (pid %d) is still running", pid)
	}
}

// A CLI that prints its result and never exits is stopped after the exit
// grace; the run ends with its complete, no error, and the chat takes the
// next prompt.
func TestFaultNeverExitingCLI(t *testing.T) {
	bin, pidFile := fakeClaudeCLI(t, emitLines(claudeInit, claudeDelta, claudeResult)+"exec sleep 3600")
	ts := runFaultServer(t, bin, 0)
	chat := ts.createChat("alice", "claude")

	promptAndWait(t, ts, chat.ID, "finish and hang")
	kinds, errs := lastRun(t, ts, chat.ID)
	if len(errs) != 0 || len(kinds) == 0 || kinds[len(kinds)-1] != api.EventComplete {
		t.Fatalf("run events %v (errors %q), want them to end with complete and no error", kinds, errs)
	}
	checkNotRunning(t, ts, chat.ID)
	checkGone(t, pidFile)

	// The next prompt is accepted and runs.
	promptAndWait(t, ts, chat.ID, "again")
	if kinds, errs := lastRun(t, ts, chat.ID); len(errs) != 0 || kinds[len(kinds)-1] != api.EventComplete {
		t.Fatalf("second run events %v (errors %q)", kinds, errs)
	}
	checkGone(t, pidFile)
}

// A CLI that says nothing for [agent] idle_timeout is stopped and the run
// ends with an error naming the timeout.
func TestFaultSilentCLI(t *testing.T) {
	bin, pidFile := fakeClaudeCLI(t, emitLines(claudeInit)+"exec sleep 3600")
	ts := runFaultServer(t, bin, 500*time.Millisecond)
	chat := ts.createChat("alice", "claude")

	start := time.Now()
	promptAndWait(t, ts, chat.ID, "say nothing")
	kinds, errs := lastRun(t, ts, chat.ID)
	if want := "claude: no output for 500ms; stopped"; len(errs) != 1 || errs[0] != want || kinds[len(kinds)-1] != api.EventError {
		t.Fatalf("run events %v, errors %q; want a last error %q", kinds, errs, want)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("stopped after %v, before the idle timeout", d)
	}
	checkNotRunning(t, ts, chat.ID)
	checkGone(t, pidFile)

	// A CLI that keeps talking outlives the timeout: 3 s of output, a
	// line every 0.2 s, under a 2 s timeout (margins a loaded machine keeps).
	bin2, _ := fakeClaudeCLI(t, emitLines(claudeInit)+"for i in $(seq 15); do sleep 0.2; "+emitLines(claudeDelta)+"done\n"+emitLines(claudeResult))
	ts2 := runFaultServer(t, bin2, 2*time.Second)
	chat2 := ts2.createChat("alice", "claude")
	promptAndWait(t, ts2, chat2.ID, "talk slowly")
	if kinds, errs := lastRun(t, ts2, chat2.ID); len(errs) != 0 || kinds[len(kinds)-1] != api.EventComplete {
		t.Fatalf("talking CLI: events %v, errors %q", kinds, errs)
	}
}

// Waiting for the user's answer to an interaction is not silence.
func TestIdleTimeoutSparesPendingInteraction(t *testing.T) {
	answered := make(chan struct{})
	p := &fakeProvider{id: providers.Codex, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventInteractionRequest, InteractionID: `"req-1"`, ToolName: "approval", Input: json.RawMessage(`{}`)})
		select {
		case r := <-req.InteractionResponses:
			emit(providers.Event{Type: providers.EventInteractionResolved, InteractionID: r.ID, Status: "answered"})
			close(answered)
		case <-ctx.Done():
			return nil
		}
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) { o.IdleTimeout = 200 * time.Millisecond })
	chat := ts.createChat("alice", "codex")
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "ask me"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	time.Sleep(time.Second) //nolint:forbidigo // the subject: five idle timeouts pass while the card waits
	if !ts.srv.hub.Running(chat.ID) {
		t.Fatalf("run stopped while an interaction was pending: %v", types(ts.events(chat.ID)))
	}
	if err := ts.srv.svc.Respond(chat.ID, providers.InteractionResponse{ID: `"req-1"`, Result: json.RawMessage(`{"decision":"accept"}`)}); err != nil {
		t.Fatal(err)
	}
	<-answered
	ts.waitIdle(chat.ID)
	if kinds, errs := lastRun(t, ts, chat.ID); len(errs) != 0 || kinds[len(kinds)-1] != api.EventComplete {
		t.Fatalf("events %v, errors %q", kinds, errs)
	}
}

// A CLI that exits 0 in the middle of a line, or without a terminal event
// at all, leaves an error saying the turn was not finished; a complete
// last line without its newline still counts.
func TestFaultExitZeroMidLine(t *testing.T) {
	half := claudeResult[:40]
	for _, tt := range []struct {
		name, body string
		wantErr    string // "" = the run ends with complete
	}{
		{"cut mid-line", emitLines(claudeInit, claudeDelta) + "printf '%s' '" + half + "'\nexit 0",
			"claude exited without finishing the turn: its output ended in the middle of a line (40 bytes that do not parse)"},
		{"no terminal event", emitLines(claudeInit, claudeDelta) + "exit 0",
			"claude exited without finishing the turn"},
		{"complete last line without newline", emitLines(claudeInit, claudeDelta) + "printf '%s' '" + claudeResult + "'\nexit 0", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin, _ := fakeClaudeCLI(t, tt.body)
			ts := runFaultServer(t, bin, 0)
			chat := ts.createChat("alice", "claude")
			promptAndWait(t, ts, chat.ID, "go")
			kinds, errs := lastRun(t, ts, chat.ID)
			last := kinds[len(kinds)-1]
			if tt.wantErr == "" {
				if len(errs) != 0 || last != api.EventComplete {
					t.Fatalf("events %v, errors %q; want complete", kinds, errs)
				}
				return
			}
			if len(errs) != 1 || errs[0] != tt.wantErr || last != api.EventError {
				t.Fatalf("events %v, errors %q; want a last error %q", kinds, errs, tt.wantErr)
			}
			checkNotRunning(t, ts, chat.ID)
		})
	}
}

// The unfinished-turn check belongs to the daemon: any provider returning
// nil without a terminal event gets it, one returning ErrUnfinishedTurn
// gets its detail.
func TestUnfinishedTurnAnyProvider(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"nil without terminal", nil, "kimi exited without finishing the turn"},
		{"ErrUnfinishedTurn with detail", fmt.Errorf("%w: its output was cut", providers.ErrUnfinishedTurn),
			"kimi exited without finishing the turn: its output was cut"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProvider{id: providers.Kimi, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
				emit(providers.Event{Type: providers.EventAssistantDelta, Text: "half"})
				return tt.err
			}}
			ts := newTestServer(t, []providers.Provider{p})
			chat := ts.createChat("alice", "kimi")
			promptAndWait(t, ts, chat.ID, "go")
			if _, errs := lastRun(t, ts, chat.ID); len(errs) != 1 || errs[0] != tt.want {
				t.Fatalf("errors %q, want %q", errs, tt.want)
			}
		})
	}
}
