package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"remote/api"
	"remote/daemon/daemontest"
	"remote/internal/testkit"
)

// TestAttackSecretArgv: a secret value given on the command line (where
// ps and /proc/PID/cmdline show it to every local user) is refused before
// anything is sent, with an error that says how to pass it and does not
// repeat it; piped stdin still works.
func TestAttackSecretArgv(t *testing.T) {
	fake := daemontest.New(t, daemontest.Options{})
	if r := runCtl(context.Background(), fake, "", "project", "create", "p"); r.code != 0 {
		t.Fatalf("project create: %+v", r)
	}
	const value = "hunter2-in-argv"
	for _, args := range [][]string{
		{"project", "secret", "set", "p", "TOKEN", value},
		{"project", "secret", "set", "p", "TOKEN", "two", "words"},
	} {
		before := len(fake.Audit())
		r := runCtl(context.Background(), fake, "", args...)
		const want = "remotectl project: set: the secret value is not taken from the command line (every local user can read it in ps, and the shell keeps it in its history): " +
			"type it at the prompt, which does not echo, or pipe it in, e.g. `printenv TOKEN | remotectl project secret set NAME KEY`\n" +
			"usage: remotectl project secret set NAME KEY < value\n"
		if r.code != exitUsage || r.stderr != want {
			t.Errorf("%q: exit %d, stderr %q; want exit 2, %q", args, r.code, r.stderr, want)
		}
		if strings.Contains(r.stderr+r.stdout, value) {
			t.Errorf("the refusal repeats the value: %q", r.stderr)
		}
		if reqs := fake.Audit(); len(reqs) != before {
			t.Errorf("%q sent %v", args, reqs[before:])
		}
	}
	if r := runCtl(context.Background(), fake, "from-stdin\n", "project", "secret", "set", "p", "TOKEN"); r.code != 0 {
		t.Fatalf("secret set from stdin: %+v", r)
	}
	if r := runCtl(context.Background(), fake, "from-stdin\n", "project", "secret", "set", "p", "TOKEN", "-"); r.code != 0 {
		t.Fatalf("secret set with -: %+v", r)
	}
}

// secretCatcher is a daemon stand-in that records the values PUT to it.
func secretCatcher(t *testing.T) (sock string, values func() []string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "rctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.PutSecretRequest
		if r.Method != http.MethodPut || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req.Value)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// openPTY returns a pseudo-terminal's controller and terminal sides.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return ptmx, tty
}

// TestSecretPromptDoesNotEcho: on a terminal, secret set prompts on stderr
// with echo off, sends what was typed, and restores the terminal.
func TestSecretPromptDoesNotEcho(t *testing.T) {
	ptmx, tty := openPTY(t)
	sock, values := secretCatcher(t)
	var errb syncBuffer
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"-socket", sock, "project", "secret", "set", "p", "TOKEN"}, tty, &out, &errb)
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(errb.String(), "value of TOKEN (not echoed): ") },
		"the prompt for the value on stderr")
	if _, err := ptmx.Write([]byte("typed-secret\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("secret set: exit %d, stderr %q", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("secret set did not finish")
	}
	if got := values(); len(got) != 1 || got[0] != "typed-secret" {
		t.Errorf("daemon got %q, want [typed-secret]", got)
	}
	// What the terminal showed: only the echoed newline.
	_ = ptmx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 256)
	n, _ := ptmx.Read(buf)
	if shown := string(buf[:n]); strings.Contains(shown, "typed") {
		t.Errorf("the terminal echoed the secret: %q", shown)
	}
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Errorf("echo not restored: %v, lflag %#x", err, tio.Lflag)
	}
}
