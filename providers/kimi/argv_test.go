package kimi

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"remote/providers"
	"remote/providers/runner/runnertest"
)

// secretPrompt returns a prompt holding a distinctive, secret-looking token.
func secretPrompt(t *testing.T) (prompt, secret string) {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	secret = "sk-live-REMOTE-ATTACK-" + hex.EncodeToString(b)
	return "deploy with API key " + secret + " and say done", secret
}

// TestAttackPromptArgvKimi: a local user reads /proc/PID/cmdline of the
// running Kimi CLI; the prompt (and a secret in it) must not be there. A
// 200 KB prompt, over the kernel's 128 KiB limit for one argument, must
// reach the CLI whole instead of failing with "argument list too long".
func TestAttackPromptArgvKimi(t *testing.T) {
	t.Parallel()
	prompt, secret := secretPrompt(t)
	f := newFixture(t, "block", providers.AdapterConfig{})
	done := make(chan error, 1)
	go func() {
		_, err := f.run(t, providers.RunRequest{ConversationID: "c1", Prompt: prompt, Cwd: t.TempDir()})
		done <- err
	}()

	pid := 0
	for deadline := time.Now().Add(30 * time.Second); pid == 0; {
		select {
		case err := <-done:
			t.Fatalf("run ended before the CLI held: %v", err)
		default:
		}
		if b, err := os.ReadFile(f.record + ".pid"); err == nil {
			pid, _ = strconv.Atoi(string(b))
		} else if time.Now().After(deadline) {
			t.Fatal("the fake Kimi CLI did not start within 30 s")
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	argv := runnertest.Cmdline(pid)
	if !slices.Contains(argv, "--print") {
		t.Fatalf("/proc/%d/cmdline = %q: not the running CLI", pid, argv)
	}
	if strings.Contains(strings.Join(argv, "\x00"), secret) {
		t.Errorf("the prompt is in the running CLI's argv (/proc/%d/cmdline), readable by every local user", pid)
	}
	if pids := runnertest.PidsWithArgText(secret); len(pids) > 0 {
		t.Errorf("the prompt is in the argv of processes %v", pids)
	}
	if err := os.WriteFile(f.record+".release", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not finish after release")
	}
	if got, _ := os.ReadFile(f.record + ".prompt"); string(got) != prompt {
		t.Errorf("the CLI got prompt %q, want %q", got, prompt)
	}

	// 200 KB: more than one argv string may hold (MAX_ARG_STRLEN).
	big := prompt + " " + strings.Repeat("context line of a long transcript\n", 200<<10/34)
	big = strings.TrimSpace(big)
	f = newFixture(t, "ok", providers.AdapterConfig{})
	got, err := f.run(t, providers.RunRequest{ConversationID: "c1", Prompt: big, Cwd: t.TempDir()})
	if err != nil {
		t.Fatalf("200 KB prompt: Run = %v", err)
	}
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "run.completed") {
		t.Errorf("200 KB prompt: events %q, want a completed run", got)
	}
	if b, _ := os.ReadFile(f.record + ".prompt"); len(b) != len(big) || string(b) != big {
		t.Errorf("200 KB prompt: the CLI got %d bytes, want %d", len(b), len(big))
	}
}
