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
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(logPath)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "LXD unreachable") {
				if !strings.HasPrefix(line, "<4>[WARN]") {
					t.Fatalf("the warning reached journald as %q, want it to start with <4>[WARN]", line)
				}
				if s := string(data); !strings.Contains(s, "<6>[INFO]") || strings.Contains(s, "\n[") {
					t.Fatalf("every line needs its priority:\n%s", s)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no LXD unreachable warning in 30 s:\n%s", data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
