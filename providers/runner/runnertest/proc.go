package runnertest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cmdline returns the argv of process pid as /proc/PID/cmdline shows it to
// every local user, or nil when the process is gone.
func Cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	var args []string
	for _, a := range bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
		args = append(args, string(a))
	}
	return args
}

// PidsWithArgText returns the processes whose /proc/PID/cmdline contains
// text: what any local user running `ps -ef` or reading /proc would see.
func PidsWithArgText(text string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(text)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// SecretPrompt returns a prompt carrying a fresh secret-looking token, and
// the token, for tests that look for the prompt where others can read it.
func SecretPrompt(t testing.TB) (prompt, secret string) {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	secret = "sk-live-REMOTE-ATTACK-" + hex.EncodeToString(b)
	return "deploy with API key " + secret + " and say done", secret
}

// CheckHeldCLIArgv drives a fake CLI that writes its pid to record+".pid"
// and blocks until record+".release" exists, while done receives its
// run's result: it waits for the pid, checks that /proc/PID/cmdline holds
// flag (so it is the CLI) and that no process's argv holds secret, then
// releases the CLI and waits for the run to succeed.
func CheckHeldCLIArgv(t testing.TB, record string, done <-chan error, flag, secret string) {
	t.Helper()
	pid := 0
	for deadline := time.Now().Add(30 * time.Second); pid == 0; {
		select {
		case err := <-done:
			t.Fatalf("run ended before the CLI held: %v", err)
		default:
		}
		if b, err := os.ReadFile(record + ".pid"); err == nil {
			pid, _ = strconv.Atoi(string(b))
		} else if time.Now().After(deadline) {
			t.Fatal("the fake CLI did not start within 30 s")
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	argv := Cmdline(pid)
	if !slices.Contains(argv, flag) {
		t.Fatalf("/proc/%d/cmdline = %q: not the running CLI", pid, argv)
	}
	if strings.Contains(strings.Join(argv, "\x00"), secret) {
		t.Errorf("the prompt is in the running CLI's argv (/proc/%d/cmdline), readable by every local user", pid)
	}
	if pids := PidsWithArgText(secret); len(pids) > 0 {
		t.Errorf("the prompt is in the argv of processes %v", pids)
	}
	if err := os.WriteFile(record+".release", nil, 0o600); err != nil {
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
}
