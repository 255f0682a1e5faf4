package antigravity

import (
	"context"
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

// TestAttackPromptArgvAntigravity: a local user reads /proc/PID/cmdline of
// the running agy; the prompt (and a secret in it) must not be there. A
// 200 KB prompt, over the kernel's 128 KiB limit for one argument, must
// reach the CLI whole instead of failing with "argument list too long".
func TestAttackPromptArgvAntigravity(t *testing.T) {
	t.Parallel()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	secret := "sk-live-REMOTE-ATTACK-" + hex.EncodeToString(b)
	prompt := "deploy with API key " + secret + " and say done"

	f := newFixture(t, "block", providers.AdapterConfig{})
	done := make(chan error, 1)
	go func() {
		_, err := f.run(t, context.Background(), providers.RunRequest{Prompt: prompt, Cwd: t.TempDir()})
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
			t.Fatal("the fake agy did not start within 30 s")
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	argv := runnertest.Cmdline(pid)
	if !slices.Contains(argv, "--print-timeout") {
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
	big := prompt + "\n" + strings.Repeat("context line of a long transcript\n", 200<<10/34)
	f = newFixture(t, "ok", providers.AdapterConfig{})
	r, err := f.run(t, context.Background(), providers.RunRequest{Prompt: big, Cwd: t.TempDir()})
	if err != nil {
		t.Fatalf("200 KB prompt: Run = %v", err)
	}
	if n := len(r.seq); n == 0 || r.seq[n-1] != "run.completed" {
		t.Errorf("200 KB prompt: events %q, want a completed run", r.seq)
	}
	if b, _ := os.ReadFile(f.record + ".prompt"); string(b) != big {
		t.Errorf("200 KB prompt: the CLI got %d bytes, want the %d sent", len(b), len(big))
	}
}
