package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/client"
	"remote/daemon/daemontest"
	"remote/internal/testkit"
	"remote/providers"
)

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type result struct {
	code           int
	stdout, stderr string
}

// runCtl runs remotectl against the daemon's socket.
func runCtl(ctx context.Context, d *daemontest.Daemon, stdin string, args ...string) result {
	var out, errb syncBuffer
	code := run(ctx, append([]string{"-socket", d.Socket}, args...), strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// newDaemon starts the real daemon (daemontest) with chats stored for the
// user remotectl acts as (the local user).
func newDaemon(t *testing.T, o daemontest.Options, chats ...daemontest.Chat) *daemontest.Daemon {
	t.Helper()
	o.Chats = append(o.Chats, chats...)
	return daemontest.New(t, o)
}

// firstChat is the chat seeded reuses: three stored events and a Claude
// session.
func firstChat() daemontest.Chat {
	return daemontest.Chat{
		Chat: api.Chat{ID: "abcdef012345", Title: "first chat", Owner: client.New("").User(), Provider: "claude", Cwd: os.TempDir(), Sessions: map[string]string{"claude": "sess-1"}},
		Events: []api.Event{
			{Type: api.EventUser, Text: "hello"},
			{Type: api.EventAssistantText, MessageID: "m1", Text: "hi there"},
			{Type: api.EventComplete},
		},
	}
}

func seeded(t *testing.T) *daemontest.Daemon { return newDaemon(t, daemontest.Options{}, firstChat()) }

func TestCommands(t *testing.T) {
	// With LXD, so info shows its real reachability and version.
	fake := newDaemon(t, daemontest.Options{LXD: true}, firstChat())
	srv, err := fake.LXD.Server(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string
		jsonStdout bool
	}{
		{"info", []string{"info"}, 0, []string{"version:", "test", "reachable, server " + srv.ServerVersion, "claude, codex"}, nil, false},
		{"info json", []string{"info", "--json"}, 0, []string{`"version": "test"`}, nil, true},
		{"info global json", []string{"--json", "info"}, 0, []string{`"uptimeSeconds": `, `"reachable": true`}, nil, true},
		{"providers", []string{"providers"}, 0, []string{"MODELS", "FEATURES", "claude", "Claude Code", "fork,planMode,resume"}, nil, false},
		{"providers json", []string{"providers", "-json"}, 0, []string{`"id": "codex"`}, nil, true},
		{"chat list", []string{"chat", "list"}, 0, []string{"abcdef012345", "first chat"}, nil, false},
		{"chat list json", []string{"chat", "list", "--json"}, 0, []string{`"id": "abcdef012345"`}, nil, true},
		{"chat show", []string{"chat", "show", "abcdef012345"}, 0, []string{"sessions:", "claude=sess-1", "provider:"}, nil, false},
		{"chat show json after id", []string{"chat", "show", "abcdef012345", "--json"}, 0, []string{`"sessions": {`}, nil, true},
		{"chat show missing", []string{"chat", "show", "abcd"}, 1, nil, []string{"remotectl: not_found: chat abcd: not found\n"}, false},
		{"chat show bad id", []string{"chat", "show", "NOPE"}, 1, nil, []string{`remotectl: bad_request: id: invalid chat id "NOPE" (want 4-32 lowercase hex characters)`}, false},
		{"chat show no id", []string{"chat", "show"}, 2, nil, []string{"remotectl chat: show: want 1 argument(s) (CHAT), got 0\nusage: remotectl chat show CHAT [--json]\n"}, false},
		{"chat unknown sub", []string{"chat", "frob"}, 2, nil, []string{`unknown subcommand "frob"`}, false},
		{"chat no sub", []string{"chat"}, 2, nil, []string{"one of create, diff, fork, list, pr, push, rm, show"}, false},
		{"chat create bad provider", []string{"chat", "create", "-provider", "nope"}, 1, nil, []string{`remotectl: bad_request: provider: unknown provider "nope"`}, false},
		{"events", []string{"events", "abcdef012345"}, 0, []string{"> hello", "hi there"}, nil, false},
		{"events since json", []string{"events", "abcdef012345", "-since", "2", "--json"}, 0, []string{`"type": "complete"`}, nil, true},
		{"unknown command", []string{"frob"}, 2, nil, []string{`unknown command "frob"`}, false},
		{"unknown flag", []string{"info", "-x"}, 2, nil, []string{"flag provided but not defined: -x"}, false},
		{"chat create help", []string{"chat", "create", "-h"}, 0, []string{"usage: remotectl chat create [-provider ID]", "-provider id", "-approval policy", "untrusted | on-failure | on-request | never", "-effort effort"}, nil, false},
		{"chat create bad approval", []string{"chat", "create", "-provider", "codex", "-approval", "always"}, 2, nil, []string{`remotectl chat: create: -approval: unknown policy "always" (want untrusted, on-failure, on-request, never)`}, false},
		{"chat create approval refused by daemon", []string{"chat", "create", "-provider", "claude", "-approval", "untrusted"}, 1, nil, []string{`remotectl: bad_request: approvalPolicy:`}, false},
		{"tail help", []string{"tail", "--help"}, 0, []string{"usage: remotectl tail CHAT", "-since seq"}, nil, false},
		{"cancel idle", []string{"cancel", "abcdef012345"}, 1, nil, []string{"remotectl: not_found: no prompt is currently running"}, false},
		{"prompt no text", []string{"prompt", "abcdef012345"}, 2, nil, []string{"want CHAT and TEXT"}, false},
		{"chat pr no title", []string{"chat", "pr", "abcdef012345"}, 2, nil, []string{"chat pr: -title is required"}, false},
		{"chat pr loose chat", []string{"chat", "pr", "abcdef012345", "-title", "Fix", "-base", "main"}, 1, nil, []string{"remotectl: conflict: chat abcdef012345 is a loose chat: only a project chat has a repository\n"}, false},
		{"chat pr bad base", []string{"chat", "pr", "abcdef012345", "-title", "Fix", "-base", "-x"}, 1, nil, []string{`remotectl: bad_request: base: "-x" is not a branch name`}, false},
		{"chat push help", []string{"chat", "push", "-h"}, 0, []string{"usage: remotectl chat push CHAT [-m MESSAGE] [-all] [--json] [-- PATH...]", "-all", "__pycache__/"}, nil, false},
		{"chat push all and paths", []string{"chat", "push", "abcdef012345", "-all", "--", "x.py"}, 2, nil, []string{"chat push: -all and paths: give one of them"}, false},
		{"chat push option path", []string{"chat", "push", "abcdef012345", "--", "x.py", "--upload-pack=x"}, 1, nil, []string{`remotectl: bad_request: paths[1] "--upload-pack=x": must not start with '-'`}, false},
		{"chat push outside path", []string{"chat", "push", "abcdef012345", "../etc/passwd"}, 1, nil, []string{`remotectl: bad_request: paths[0] "../etc/passwd": must not contain '..'`}, false},
		{"chat push loose chat", []string{"chat", "push", "abcdef012345", "-all"}, 1, nil, []string{"remotectl: conflict: chat abcdef012345 is a loose chat"}, false},
		{"chat pr help", []string{"chat", "pr", "-h"}, 0, []string{"usage: remotectl chat pr CHAT -title T", "-base branch"}, nil, false},
		{"prompt missing chat", []string{"prompt", "abcd", "hi"}, 1, nil, []string{"remotectl: not_found: chat abcd: not found\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCtl(context.Background(), fake, "", tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if tt.jsonStdout && !json.Valid([]byte(r.stdout)) {
				t.Errorf("stdout is not JSON:\n%s", r.stdout)
			}
		})
	}
}

// TestChatCreateApproval: -approval and -effort reach the daemon in the
// create request and chat show prints them.
func TestChatCreateApproval(t *testing.T) {
	fake := newDaemon(t, daemontest.Options{})
	ctx := context.Background()
	r := runCtl(ctx, fake, "", "chat", "create", "-provider", "codex", "-approval", "untrusted", "-effort", "high", "-cwd", "/tmp", "--json")
	var c api.Chat
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &c) != nil {
		t.Fatalf("create: %+v", r)
	}
	if c.ApprovalPolicy != "untrusted" || c.ReasoningEffort != "high" {
		t.Fatalf("created chat has approval %q effort %q", c.ApprovalPolicy, c.ReasoningEffort)
	}
	r = runCtl(ctx, fake, "", "chat", "show", c.ID)
	for _, want := range []string{"approval:", "untrusted", "effort:", "high"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("chat show lacks %q: %+v", want, r)
		}
	}
}

// TestChatCreateBranch: -branch and -worktree reach the daemon, whose
// refusal of a loose chat's branch (400 naming the field) is printed.
func TestChatCreateBranch(t *testing.T) {
	fake := newDaemon(t, daemontest.Options{})
	ctx := context.Background()
	for flag, want := range map[string]string{"-branch": "branch: only a chat in a project", "-worktree": "worktree: only a chat in a project"} {
		args := []string{"chat", "create", "-provider", "codex", "-cwd", "/tmp", flag}
		if flag == "-branch" {
			args = append(args, "feature/x")
		}
		if r := runCtl(ctx, fake, "", args...); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %+v, want the daemon's %q", flag, r, want)
		}
	}
}

// TestAnswer: `remotectl answer` sends {"decision": D} for the named
// interaction and the run gets it; a bad decision is a usage error, and
// an answer while nothing runs (before the request, after the run has
// resolved it) the daemon's 404.
func TestAnswer(t *testing.T) {
	user := client.New("").User()
	fake := newDaemon(t, daemontest.Options{}, daemontest.Chat{Chat: api.Chat{ID: "abc123abc123", Owner: user, Provider: "codex", Cwd: os.TempDir()}})
	// The run asks for approval "0", waits for the answer, reports it
	// resolved and completes.
	fake.Codex.SetRun(func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventInteractionRequest, InteractionID: "0", ToolName: "item/commandExecution/requestApproval"})
		if _, ok := fake.Codex.AwaitAnswer(ctx, req); !ok {
			return ctx.Err()
		}
		emit(providers.Event{Type: providers.EventInteractionResolved, InteractionID: "0", Status: "approved"})
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	})
	ctx := context.Background()
	answer := func(t *testing.T, args []string, code int, stderr string) {
		t.Helper()
		r := runCtl(ctx, fake, "", args...)
		if r.code != code || !strings.Contains(r.stderr, stderr) {
			t.Fatalf("exit %d stderr %q, want %d and %q", r.code, r.stderr, code, stderr)
		}
	}
	answer(t, []string{"answer", "abc123abc123", "7", "accept"}, 1, "remotectl: not_found: no prompt is currently running\n")
	c := fake.Client(user)
	if _, err := c.Prompt(ctx, "abc123abc123", api.PromptRequest{Text: "run it"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, func() bool {
		evs, _ := c.Events(ctx, "abc123abc123", 0)
		return len(evs) > 0 && evs[len(evs)-1].Type == api.EventInteractionRequest
	}, "the interaction request")
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"bad decision", []string{"answer", "abc123abc123", "0", "yes"}, 2, `unknown decision "yes" (want accept, decline, cancel)`},
		{"missing decision", []string{"answer", "abc123abc123", "0"}, 2, "want 3 argument(s) (CHAT INTERACTION DECISION), got 2"},
		{"accept", []string{"answer", "abc123abc123", "0", "accept"}, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) { answer(t, tt.args, tt.code, tt.stderr) })
	}
	testkit.Eventually(t, time.Minute, func() bool {
		ch, err := c.Chat(ctx, "abc123abc123")
		return err == nil && !ch.Running
	}, "the run to end")
	answer(t, []string{"answer", "abc123abc123", "0", "decline"}, 1, "not_found")

	r := runCtl(ctx, fake, "", "events", "abc123abc123", "--json")
	var evs []api.Event
	if err := json.Unmarshal([]byte(r.stdout), &evs); err != nil {
		t.Fatalf("events: %v %+v", err, r)
	}
	resolved := evs[len(evs)-2]
	if resolved.Type != api.EventInteractionResolved || resolved.Status != "approved" {
		t.Errorf("the events end with %+v", evs[len(evs)-2:])
	}
	got := fake.Codex.Answers()
	var sent bytes.Buffer
	if len(got) == 1 {
		_ = json.Compact(&sent, got[0].Result)
	}
	if len(got) != 1 || got[0].ID != "0" || sent.String() != `{"decision":"accept"}` {
		t.Errorf("the run got %+v", got)
	}
}

func TestChatLifecycle(t *testing.T) {
	fake := newDaemon(t, daemontest.Options{})
	ctx := context.Background()
	r := runCtl(ctx, fake, "", "chat", "create", "-provider", "codex", "-title", "t1", "-cwd", "/tmp")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(id) != 12 {
		t.Fatalf("create: %+v", r)
	}
	r = runCtl(ctx, fake, "", "chat", "fork", id)
	fork := strings.TrimSpace(r.stdout)
	if r.code != 0 || fork == id || len(fork) != 12 {
		t.Fatalf("fork: %+v", r)
	}
	if r = runCtl(ctx, fake, "", "chat", "rm", id, fork); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r = runCtl(ctx, fake, "", "chat", "list", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("list after rm: %+v", r)
	}
}

func TestPromptStreamsUntilComplete(t *testing.T) {
	fake := seeded(t)
	fake.Claude.SetScript(func(req providers.RunRequest) []providers.Event {
		return []providers.Event{
			{Type: providers.EventReasoningDelta, MessageID: "t1", Text: "pondering"},
			{Type: providers.EventToolStarted, ItemID: "tool1", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls -la"}`)},
			{Type: providers.EventToolCompleted, ItemID: "tool1", Output: "a\nb\n"},
			{Type: providers.EventAssistantDelta, MessageID: "m2", Text: "Hello, "},
			{Type: providers.EventAssistantDelta, MessageID: "m2", Text: req.Prompt},
			{Type: providers.EventRunCompleted},
		}
	})
	r := runCtl(context.Background(), fake, "", "prompt", "abcdef012345", "big", "world")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r.stdout != "Hello, big world\n" {
		t.Fatalf("stdout = %q, want only the reply", r.stdout)
	}
	for _, s := range []string{"pondering", "▸ Bash ls -la", "✓ Bash (4 bytes)"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "hi there") {
		t.Error("prompt printed events from before the prompt")
	}
}

func TestPromptFromStdinAndFailure(t *testing.T) {
	fake := seeded(t)
	fake.Claude.SetRun(func(_ context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventRunFailed, Message: "claude exit: " + req.Prompt})
		return providers.ErrRunFailed
	})
	r := runCtl(context.Background(), fake, "boom\n", "prompt", "abcdef012345", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "remotectl: run failed: claude exit: boom") {
		t.Fatalf("%+v", r)
	}
}

func TestPromptInterruptCancelsRun(t *testing.T) {
	fake := seeded(t)
	fake.Claude.SetHold(true)
	fake.Claude.SetScript(func(providers.RunRequest) []providers.Event {
		return []providers.Event{{Type: providers.EventAssistantDelta, MessageID: "m", Text: "working"}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-socket", fake.Socket, "prompt", "abcdef012345", "go"}, strings.NewReader(""), &out, &errb)
	}()
	// Wait for the streamed text, then "press Ctrl-C".
	testkit.Eventually(t, time.Minute, func() bool {
		select {
		case code := <-done:
			t.Fatalf("prompt ended early with %d: %s", code, errb.String())
		default:
		}
		return strings.Contains(out.String(), "working")
	}, "the streamed text")
	cancel()
	code := <-done
	if code != exitInterrupted || !strings.Contains(errb.String(), "interrupted: run cancelled") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if cancels := fake.AuditCount("POST /v1/chats/{id}/cancel"); cancels != 1 {
		t.Fatalf("%d cancel requests, want 1", cancels)
	}
}

func TestTailFollowsLive(t *testing.T) {
	fake := seeded(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-socket", fake.Socket, "tail", "abcdef012345", "--json"}, strings.NewReader(""), &out, &errb)
	}()
	testkit.Eventually(t, time.Minute, func() bool { return strings.Count(out.String(), "\n") >= 4 }, "3 stored events and the sync")
	r := runCtl(context.Background(), fake, "", "prompt", "abcdef012345", "again")
	if r.code != 0 {
		t.Fatalf("prompt: %+v", r)
	}
	testkit.Eventually(t, time.Minute, func() bool {
		return strings.Contains(out.String(), `"text":"again"`) && strings.Contains(out.String(), `"seq":6`)
	}, "the new prompt's events")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("tail exit %d: %s", code, errb.String())
	}
	var seqs []int64
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if ev.Seq > 0 {
			seqs = append(seqs, ev.Seq)
		}
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("tail seqs %v: gap or duplicate", seqs)
		}
	}
}

func TestSocketFromConfig(t *testing.T) {
	fake := seeded(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "remoted.toml")
	if err := os.WriteFile(cfg, []byte("[daemon]\nsocket = \""+fake.Socket+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-config", cfg, "info"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[daemon]\nsockett = 1\n"), 0o600)
	errb.Reset()
	if code := run(context.Background(), []string{"-config", bad, "info"}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "sockett") {
		t.Fatalf("bad config: exit %d: %s", code, errb.String())
	}
	tests := []struct {
		flag, cfg string
		explicit  bool
		want      string
		wantErr   bool
	}{
		{"/x.sock", cfg, true, "/x.sock", false},
		{"", cfg, true, fake.Socket, false},
		{"", filepath.Join(dir, "none.toml"), false, "/run/remote/remoted.sock", false},
		{"", filepath.Join(dir, "none.toml"), true, "", true},
	}
	for _, tt := range tests {
		got, err := socketPath(tt.flag, tt.cfg, tt.explicit)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("socketPath(%q, %q, %v) = %q, %v; want %q", tt.flag, tt.cfg, tt.explicit, got, err, tt.want)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{[]string{"--json", "a"}, []string{"a"}, true},
		{[]string{"a", "--", "-json"}, []string{"a", "-json"}, false},
		{nil, nil, false},
	}
	for _, tt := range tests {
		e := &env{}
		pos, err := parse(e.newFlags("x"), tt.args)
		if err != nil || strings.Join(pos, "|") != strings.Join(tt.pos, "|") || e.JSON != tt.json {
			t.Errorf("parse(%q) = %q json=%v, %v", tt.args, pos, e.JSON, err)
		}
	}
}

// TestAttackRemotectlEscapes: hostile agent output (an OSC 52 clipboard
// write, a title change, text hidden with ESC[8m, C1 CSI colours, a
// carriage return that overwrites a line, escapes in a tool call and an
// error) reaches the terminal as plain text; --raw passes it through.
func TestAttackRemotectlEscapes(t *testing.T) {
	user := client.New("").User()
	fake := newDaemon(t, daemontest.Options{}, daemontest.Chat{Chat: api.Chat{ID: "abcdef012345", Title: "evil\x1b]0;owned\x07 title", Owner: user, Provider: "claude", Cwd: os.TempDir()}, Events: []api.Event{
		{Type: api.EventUser, Text: "\x1b[1mhello"},
		{Type: api.EventAssistantText, MessageID: "m1", Text: "copy\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07 this\n"},
		{Type: api.EventAssistantText, MessageID: "m2", Text: "\x1b]0;pwned title\x1b\\safe \x1b[8mhidden\x1b[0m done\n"},
		{Type: api.EventAssistantText, MessageID: "m3", Text: "\u009b31mred\u009b0m\tand\r fake prompt $ \x07\x00\x7f\u0085end\n"},
		{Type: api.EventThinking, Text: "think\x1bP+q544e\x1b\\ing\x1b(0\n"},
		{Type: api.EventToolUseStart, ID: "t1", Name: "Bash\x1b]2;x\x07", Input: json.RawMessage(`{"command":"ls \u001b[8m; rm -rf ~\u001b[0m"}`)},
		{Type: api.EventError, Message: "bad\x1b[41m thing"},
		{Type: api.EventComplete},
	}})

	got := runCtl(context.Background(), fake, "", "events", "abcdef012345")
	if got.code != 0 {
		t.Fatalf("events: %+v", got)
	}
	const wantOut = "> hello\n" +
		"copy this\n" +
		"safe hidden done\n" +
		"red\tand fake prompt $ end\n"
	const wantErr = "thinking\n" +
		"▸ Bash ls ; rm -rf ~\n" +
		"error: bad thing\n"
	if got.stdout != wantOut {
		t.Errorf("stdout = %q, want %q", got.stdout, wantOut)
	}
	if got.stderr != wantErr {
		t.Errorf("stderr = %q, want %q", got.stderr, wantErr)
	}

	list := runCtl(context.Background(), fake, "", "chat", "list")
	if !strings.Contains(list.stdout, "evil title") || strings.Contains(list.stdout, "\x1b") {
		t.Errorf("chat list title: %q", list.stdout)
	}

	raw := runCtl(context.Background(), fake, "", "events", "abcdef012345", "--raw")
	for _, seq := range []string{"\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07", "\x1b[8mhidden", "\u009b31m"} {
		if !strings.Contains(raw.stdout, seq) {
			t.Errorf("--raw lost %q: %q", seq, raw.stdout)
		}
	}
}

// A carriage return is stripped from agent text even when it is the only
// control character there: a lone CR would let the agent overwrite what
// the terminal already shows (a fake "done" over a warning).
func TestAttackRemotectlLoneCarriageReturn(t *testing.T) {
	user := client.New("").User()
	fake := newDaemon(t, daemontest.Options{}, daemontest.Chat{Chat: api.Chat{ID: "abcdef012345", Title: "t", Owner: user, Provider: "claude", Cwd: os.TempDir()}, Events: []api.Event{
		{Type: api.EventAssistantText, MessageID: "m1", Text: "rm -rf / ran\rall tests passed\n"},
		{Type: api.EventComplete},
	}})
	got := runCtl(context.Background(), fake, "", "events", "abcdef012345")
	if got.code != 0 || got.stdout != "rm -rf / ranall tests passed\n" {
		t.Fatalf("events: %+v; want the CR stripped: %q", got, "rm -rf / ranall tests passed\n")
	}
}
