package antigravity

import (
	"context"
	"os"
	"strings"
	"testing"

	"remote/providers"
	"remote/providers/runner/runnertest"
)

// TestAttackPromptArgvAntigravity: a local user reads /proc/PID/cmdline of
// the running agy; the prompt (and a secret in it) must not be there. A
// 200 KB prompt, over the kernel's 128 KiB limit for one argument, must
// reach the CLI whole instead of failing with "argument list too long".
func TestAttackPromptArgvAntigravity(t *testing.T) {
	t.Parallel()
	prompt, secret := runnertest.SecretPrompt(t)

	f := newFixture(t, "block", providers.AdapterConfig{})
	done := make(chan error, 1)
	go func() {
		_, err := f.run(t, context.Background(), providers.RunRequest{Prompt: prompt, Cwd: t.TempDir()})
		done <- err
	}()
	runnertest.CheckHeldCLIArgv(t, f.record, done, "--print-timeout", secret)
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
