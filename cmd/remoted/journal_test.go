package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
)

// TestJournalPriorities starts remoted as systemd does under journald
// ($JOURNAL_STREAM naming its stderr) with an LXD socket that answers
// nothing: its "LXD unreachable" WARN line carries priority 4 ("<4>"), so
// `journalctl -p warning` shows it (before, every line reached journald
// at its default, 6).
func TestJournalPriorities(t *testing.T) {
	dir, err := os.MkdirTemp("", "rdjournal")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "remoted.sock")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n[lxd]\nsocket = %q\n[agent]\nallowed_roots = [%q]\n",
		sock, filepath.Join(dir, "state"), filepath.Join(dir, "lxd.sock"), dir)
	d := newDaemon(t, buildRemoted(t), cfg, sock)
	logPath := filepath.Join(dir, "stderr")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(d.bin, "-config", d.config)
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var data []byte
	testkit.Eventually(t, 30*time.Second, func() error {
		data, _ = os.ReadFile(logPath)
		if !strings.Contains(string(data), "LXD unreachable") {
			return fmt.Errorf("log so far:\n%s", data)
		}
		return nil
	}, "an LXD unreachable warning")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "LXD unreachable") && !strings.HasPrefix(line, "<4>[WARN]") {
			t.Fatalf("the warning reached journald as %q, want it to start with <4>[WARN]", line)
		}
	}
	if s := string(data); !strings.Contains(s, "<6>[INFO]") || strings.Contains(s, "\n[") {
		t.Fatalf("every line needs its priority:\n%s", s)
	}
}

// TestFaultFatalErrorPriority: under journald, the line saying why remoted
// stops (here a missing config file) carries priority 3, so `journalctl -p
// err -u remoted` shows why the service failed. Found under a real systemd
// (scripts/lxd-systemd): the missing secrets key's message reached the
// journal at priority 6 and `journalctl -p err` showed only systemd's
// "Failed to start".
func TestFaultFatalErrorPriority(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "stderr")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent.toml")
	cmd := exec.Command(buildRemoted(t), "-config", missing)
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
	if err := cmd.Run(); err == nil {
		t.Fatal("remoted started without its config file")
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	last := strings.TrimSpace(string(data))
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	if !strings.HasPrefix(last, "<3>remoted: ") || !strings.Contains(last, missing) {
		t.Fatalf("the fatal line reached journald as %q; want it to start with <3>remoted: and name %s", last, missing)
	}
	// Outside journald the line stays as it was.
	out, err := exec.Command(buildRemoted(t), "-config", missing).CombinedOutput()
	if err == nil || !strings.HasPrefix(string(out), "remoted: ") {
		t.Fatalf("outside journald: %v %q, want a line starting with remoted: ", err, out)
	}
}
