package codexharness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/runner"
)

// lateTurnID is the fake for a cancel that arrives after turn/start was
// sent but before its answer: a delta first (the test cancels on it), the
// turn id a moment later, then it waits for turn/interrupt.
func lateTurnID(p *fakePeer) int {
	for {
		m, ok := p.next()
		if !ok {
			return 1
		}
		switch str(m["method"]) {
		case "initialize":
			p.send(`{"id":%s,"result":{"userAgent":"fake","platformOs":"linux"}}`, m["id"])
		case "thread/start":
			p.send(`{"id":%s,"result":{"thread":{"id":"thr-1"},"model":"gpt-fake"}}`, m["id"])
		case "turn/start":
			p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"early"}}`, tid)
			time.Sleep(300 * time.Millisecond) //nolint:forbidigo // lets the cancel land before the turn id
			p.send(`{"id":%s,"result":{"turn":{"id":"turn-1","status":"inProgress","items":[]}}}`, m["id"])
		case "turn/interrupt":
			p.send(`{"id":%s,"result":{}}`, m["id"])
			p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"interrupted"}}}`)
			for {
				if _, ok := p.next(); !ok {
					return 0
				}
			}
		}
	}
}

// TestRunCancelBeforeTurnID (S22): a cancel between turn/start and its
// answer still sends turn/interrupt once the turn id is known, and the run
// ends as the app-server reports it, without a kill.
func TestRunCancelBeforeTurnID(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventAssistantDelta {
			cancel()
		}
	}}
	if err := runFake(t, ctx, "late-turn-id", providers.RunRequest{}, rec, 20*time.Second); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	got := rec.lines()
	if last := got[len(got)-1]; last != "run.interrupted status=interrupted" {
		t.Fatalf("last event %q, want the app-server's own interrupted end (no kill)", last)
	}
}

// syncLog is a goroutine-safe buffer for an hclog logger.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunInterruptTimeoutKillsAtOnce (S22): when the interrupt times out
// the app-server is killed then, not left to the exit grace's fallback.
func TestRunInterruptTimeoutKillsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{hook: func(ev providers.Event) {
		if ev.Type == providers.EventAssistantDelta {
			cancel()
		}
	}}
	logs := &syncLog{}
	cfg := Config{Provider: providers.Codex, InterruptTimeout: 200 * time.Millisecond, ExitGrace: 2 * time.Second,
		Logger:   hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
		Settings: Settings{Model: "gpt-fake", ApprovalPolicy: "never", Sandbox: "danger-full-access"}}
	if err := Run(ctx, &runner.HostLauncher{}, fakeCommand("hang"), providers.RunRequest{Prompt: "hi"}, cfg, rec.emit); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if strings.Contains(logs.String(), "did not exit after stdin closed") {
		t.Errorf("the app-server was stopped only by the exit grace fallback, not killed on the interrupt timeout:\n%s", logs)
	}
	got := rec.lines()
	if last := got[len(got)-1]; last != "run.interrupted status=interrupted message=the turn did not stop in time and the app-server was killed" {
		t.Fatalf("last event %q", last)
	}
}

// TestRunClosesStdinAfterTurn (S19): once turn/completed arrives the
// app-server's stdin is closed, which is how it learns to exit.
func TestRunClosesStdinAfterTurn(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "eof")
	cmd := fakeCommand("eof-marker")
	cmd.Env = append(cmd.Env, "EOF_MARKER="+marker)
	cfg := Config{Provider: providers.Codex, ExitGrace: 10 * time.Second,
		Settings: Settings{Model: "gpt-fake", ApprovalPolicy: "never", Sandbox: "danger-full-access"}}
	rec := &recorder{}
	if err := Run(context.Background(), &runner.HostLauncher{}, cmd, providers.RunRequest{Prompt: "hi"}, cfg, rec.emit); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "stdin closed" {
		t.Fatalf("the app-server never saw its stdin closed (%v): it was stopped instead", err)
	}
}

// TestRunResumeNotFound (S23): a resume refused with only "not found" in
// its message is a lost session, not a protocol error.
func TestRunResumeNotFound(t *testing.T) {
	err := runFake(t, context.Background(), "resume-not-found", providers.RunRequest{ResumeID: "thr-gone"}, &recorder{}, 5*time.Second)
	if !errors.Is(err, providers.ErrSessionNotFound) {
		t.Fatalf("Run = %v, want ErrSessionNotFound", err)
	}
}
