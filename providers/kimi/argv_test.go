package kimi

import (
	"os"
	"strings"
	"testing"

	"remote/providers"
	"remote/providers/runner/runnertest"
)

// TestAttackPromptArgvKimi: a local user reads /proc/PID/cmdline of the
// running Kimi CLI; the prompt (and a secret in it) must not be there. A
// 200 KB prompt, over the kernel's 128 KiB limit for one argument, must
// reach the CLI whole instead of failing with "argument list too long".
func TestAttackPromptArgvKimi(t *testing.T) {
	t.Parallel()
	prompt, secret := runnertest.SecretPrompt(t)
	f := newFixture(t, "block", providers.AdapterConfig{})
	done := make(chan error, 1)
	go func() {
		_, err := f.run(t, providers.RunRequest{ConversationID: "c1", Prompt: prompt, Cwd: t.TempDir()})
		done <- err
	}()

	runnertest.CheckHeldCLIArgv(t, f.record, done, "--print", secret)
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
