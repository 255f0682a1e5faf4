package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"remote/api"
	"remote/daemon/store"
	"remote/daemon/store/keyfile"
	"remote/internal/testkit"
)

// TestFaultDiskFullStartRemoted starts the real remoted twice on a full
// 2 MiB tmpfs state dir holding 100 interrupted chats (a crash loop under
// Restart=on-failure): both starts serve instead of exiting, and no chat
// gets a second daemon_restarted however often recovery is attempted.
func TestFaultDiskFullStartRemoted(t *testing.T) {
	state := testkit.Tmpfs(t, 2<<20)
	dir := t.TempDir()
	key, err := keyfile.LoadOrCreate(filepath.Join(state, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(state, "remoted.db"), store.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 100 {
		id := fmt.Sprintf("c%04d", i)
		ids = append(ids, id)
		if err := st.CreateChat(api.Chat{ID: id, Owner: "alice", Provider: "claude", Cwd: dir, Running: true, Title: strings.Repeat("t", 150)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(id, api.Event{Type: api.EventUser, Text: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.FillDisk(t, filepath.Join(state, "filler"))

	sock := filepath.Join(dir, "remoted.sock")
	d := newDaemon(t, buildRemoted(t), fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q
min_free = "64KiB"

[lxd]
socket = "/nonexistent/lxd/unix.socket"

[agent]
allowed_roots = [%q]
`, sock, state, dir), sock)
	for attempt := 1; attempt <= 2; attempt++ {
		d.start() // fails the test unless /v1/info answers
		if st, body := d.do("GET", "/v1/chats", nil); st != 200 {
			t.Fatalf("start %d: list chats: %d %s", attempt, st, body)
		}
		if !strings.Contains(d.logs.String(), "serving with interrupted chats not yet repaired") {
			t.Errorf("start %d: no unrepaired chats logged on the full disk:\n%s", attempt, d.logs)
		}
		for _, id := range ids {
			n := 0
			for _, ev := range d.events(id) {
				if ev.Subtype == api.SubtypeDaemonRestarted {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("start %d: chat %s has %d daemon_restarted events", attempt, id, n)
			}
		}
		d.cmd.Process.Signal(syscall.SIGTERM)
		if err := d.cmd.Wait(); err != nil {
			t.Fatalf("start %d: remoted after SIGTERM: %v\n%s", attempt, err, d.logs)
		}
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("socket left behind")
	}
}
