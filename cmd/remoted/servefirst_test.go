package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/api"
	"remote/providers/shim"
)

// TestServesWhileReattachWaits: remoted answers as soon as it can, while
// the shims of a restart wait on it (docs/benchmarks.md, "Re-attach"). Two shims hang: the real
// shim of a run that outlived the daemon is stopped (SIGSTOP: its socket
// accepts, nothing answers), and the run directory of a run whose end was
// stored holds a socket that reads the daemon's hello and never answers
// (an orphan to release). GET /v1/info answers while the orphan's
// connection is still waiting; meanwhile the run is listed and a prompt to
// its chat is refused with 409 prompt_already_running. Once both are let
// go, the run completes with every part exactly once.
func TestServesWhileReattachWaits(t *testing.T) {
	const parts = 30
	d, dir := surviveDaemon(t, surviveReply(parts, 150*time.Millisecond))
	chat := d.createChat(dir)
	d.prompt(chat.ID, "count slowly")
	before := d.waitEvents(chat.ID, 60*time.Second, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 2 })
	if ended(before) {
		t.Fatalf("the run ended before the kill: %s", summarize(before))
	}
	d.kill9()

	runsDir := filepath.Join(dir, "state", "runs")
	pid := shimPID(t, runsDir)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(cont)
	hello, gaveUp, release := hangingShim(t, filepath.Join(runsDir, "orphan-run"))
	t.Cleanup(release)

	d.start()
	select {
	case <-gaveUp:
		t.Fatalf("remoted answered only after giving up on the orphan's hung shim:\n%s", d.logs)
	default:
	}
	st, body := d.do("GET", "/v1/runs", nil)
	if st != 200 || !strings.Contains(string(body), `"chatId":"`+chat.ID+`"`) {
		t.Errorf("GET /v1/runs while the run's shim does not answer: %d %s", st, body)
	}
	st, body = d.do("POST", "/v1/chats/"+chat.ID+"/prompt", api.PromptRequest{Text: "a second prompt"})
	if st != 409 || !strings.Contains(string(body), `"prompt_already_running"`) {
		t.Errorf("a prompt while the run is being re-attached: %d %s, want 409 prompt_already_running", st, body)
	}

	cont()
	<-hello // the orphan was asked, beside serving
	release()
	evs := d.waitEvents(chat.ID, 60*time.Second, ended)
	checkExactlyOnce(t, evs, surviveText(parts))
	d.waitRunsEmpty()
}

// shimPID returns the pid of the one remote-shim serving a run directory
// under runsDir.
func shimPID(t *testing.T, runsDir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 3 && strings.HasSuffix(args[0], "remote-shim") && args[1] == "serve" &&
			strings.HasPrefix(args[3], runsDir+"/") {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("remote-shims serving %s: %v, want one", runsDir, pids)
	}
	return pids[0]
}

// hangingShim listens on dir's shim socket: it reads a client's hello
// (hello is closed) and answers nothing until release. gaveUp is closed
// when the client closes its connection first.
func hangingShim(t *testing.T, dir string) (hello, gaveUp <-chan struct{}, release func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, shim.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	helloC, gaveUpC, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
		close(helloC)
		go func() {
			if _, err := r.ReadByte(); err != nil {
				close(gaveUpC)
			}
		}()
		<-done
	}()
	var closed bool
	return helloC, gaveUpC, func() {
		if !closed {
			closed = true
			close(done)
			ln.Close()
		}
	}
}
