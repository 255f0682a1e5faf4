package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
)

// e2e is a real remoted (built from this tree) with the real Claude Code CLI
// against the fake model server, driven by the real remotectl binary.
type e2e struct {
	t       *testing.T
	dir     string
	socket  string
	ctl     string
	daemon  *exec.Cmd
	daemonE *bytes.Buffer
	model   *fakeanthropic.Server
}

// TestMain removes the binaries built for this package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinaries()
	os.Exit(code)
}

func startE2E(t *testing.T) *e2e { return startE2EWith(t, "") }

// startE2EWith is startE2E with extra TOML appended to remoted's config.
// New projects start from the busybox test image.
func startE2EWith(t *testing.T, extra string) *e2e {
	return startE2EImage(t, testkit.TestImage, extra)
}

// startE2EImage is startE2EWith with image as [lxd] image ("": the
// default, the development image).
func startE2EImage(t *testing.T, image, extra string) *e2e {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs remoted")
	}
	claude := testkit.ClaudeBinary(t)
	dir := t.TempDir()
	bins := testkit.Binaries(t, "remoted", "remotectl")
	remoted, ctl := bins[0], bins[1]
	model := fakeanthropic.New(t)
	model.Fallback = fakeanthropic.Text("Hello from the fake model")
	work := filepath.Join(dir, "work")
	home := filepath.Join(dir, "home")
	for _, d := range []string{work, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e := &e2e{t: t, dir: dir, socket: filepath.Join(dir, "remoted.sock"), ctl: ctl, model: model, daemonE: &bytes.Buffer{}}
	cfg := fmt.Sprintf(`version = 1
[daemon]
socket = %q
state_dir = %q
[agent]
allowed_roots = [%q]
[providers.claude]
binary = %q
env = { ANTHROPIC_BASE_URL = %q, ANTHROPIC_API_KEY = "sk-ant-test-dummy", HOME = %q }
project_env = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"]
`, e.socket, filepath.Join(dir, "state"), dir, claude, model.URL, home) + extra
	if image != "" {
		cfg += fmt.Sprintf("[lxd]\nimage = %q\n", image)
	}
	cfgPath := filepath.Join(dir, "remoted.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.daemon = exec.Command(remoted, "-config", cfgPath)
	e.daemon.Stdout = io.Discard
	e.daemon.Stderr = &lockedWriter{w: e.daemonE}
	if err := e.daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.daemon.Process.Signal(syscall.SIGTERM)
		e.daemon.Wait()
		if t.Failed() {
			t.Logf("remoted log:\n%s", e.daemonE)
		}
	})
	// Wait for the socket to answer.
	if testkit.Poll(time.Minute, func() bool { return e.run("", "info").code == 0 }) != nil {
		t.Fatalf("remoted did not come up; log:\n%s", e.daemonE)
	}
	e.waitLXD()
	return e
}

// waitLXD waits, on a machine with LXD, until remoted reports LXD
// reachable: a busy LXD (other packages' tests create containers) can
// take longer than remoted's first dial allows, and the daemon then
// serves degraded until its next attempt. Tests of projects need the link.
func (e *e2e) waitLXD() {
	if _, err := os.Stat("/var/lib/lxd/unix.socket"); err != nil {
		return
	}
	testkit.Eventually(e.t, 2*time.Minute, func() error {
		r := e.run("", "info", "--json")
		var info api.Info
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &info) == nil && info.LXD.Reachable {
			return nil
		}
		return fmt.Errorf("info: %s %s", r.stdout, r.stderr)
	}, "remoted reaches LXD")
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *e2e) command(args ...string) *exec.Cmd {
	return exec.Command(e.ctl, append([]string{"-socket", e.socket}, args...)...)
}

func (e *e2e) run(stdin string, args ...string) result {
	cmd := e.command(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func (e *e2e) must(args ...string) string {
	e.t.Helper()
	r := e.run("", args...)
	if r.code != 0 {
		e.t.Fatalf("remotectl %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

func TestEndToEnd(t *testing.T) {
	e := startE2E(t)
	if out := e.must("info"); !strings.Contains(out, "version:") {
		t.Fatalf("info: %s", out)
	}
	var ps []api.ProviderInfo
	if err := json.Unmarshal([]byte(e.must("providers", "--json")), &ps); err != nil || len(ps) == 0 {
		t.Fatalf("providers --json: %v %+v", err, ps)
	}
	id := strings.TrimSpace(e.must("chat", "create", "-provider", "claude", "-cwd", filepath.Join(e.dir, "work"), "-title", "e2e"))

	r := e.run("", "prompt", id, "say hello")
	if r.code != 0 || !strings.Contains(r.stdout, "Hello from the fake model") {
		t.Fatalf("prompt: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var c api.Chat
	if err := json.Unmarshal([]byte(e.must("chat", "show", id, "--json")), &c); err != nil || c.Sessions["claude"] == "" || c.Running {
		t.Fatalf("chat after prompt: %+v, %v", c, err)
	}
	// A second prompt resumes and streams again.
	if r := e.run("", "prompt", id, "again"); r.code != 0 || !strings.Contains(r.stdout, "Hello from the fake model") {
		t.Fatalf("second prompt: %+v", r)
	}
	var evs []api.Event
	if err := json.Unmarshal([]byte(e.must("events", id, "--json")), &evs); err != nil {
		t.Fatal(err)
	}
	users, completes := 0, 0
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("events not gapless at %d: %+v", i, ev)
		}
		switch ev.Type {
		case api.EventUser:
			users++
		case api.EventComplete:
			completes++
		}
	}
	if users != 2 || completes != 2 {
		t.Fatalf("%d user and %d complete events, want 2 and 2", users, completes)
	}
	fork := strings.TrimSpace(e.must("chat", "fork", id))
	if !strings.Contains(e.must("chat", "list"), fork) {
		t.Fatal("fork not listed")
	}
	e.must("chat", "rm", fork)

	// Errors carry the server's code and message.
	r = e.run("", "chat", "show", "0123456789ab")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "remotectl: not_found: ") {
		t.Fatalf("missing chat: %+v", r)
	}
	r = e.run("", "prompt", "0123456789ab", "x")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "remotectl: not_found: ") {
		t.Fatalf("prompt to a missing chat: %+v", r)
	}
}

func TestEndToEndInterrupt(t *testing.T) {
	e := startE2E(t)
	e.model.Push(fakeanthropic.Slow(300*time.Millisecond, fakeanthropic.Reply{Blocks: []fakeanthropic.Block{
		fakeanthropic.TextBlock("first piece "), fakeanthropic.TextBlock("never seen"), fakeanthropic.TextBlock("nor this"),
		fakeanthropic.TextBlock("nor that"), fakeanthropic.TextBlock("nor those"), fakeanthropic.TextBlock("end"),
	}}))
	id := strings.TrimSpace(e.must("chat", "create", "-provider", "claude", "-cwd", filepath.Join(e.dir, "work")))
	cmd := e.command("prompt", id, "slow please")
	stdout, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	buf := make([]byte, 64)
	var got string
	for !strings.Contains(got, "first") {
		n, err := br.Read(buf)
		if err != nil {
			t.Fatalf("prompt ended before streaming: %v; stderr %s", err, errb.String())
		}
		got += string(buf[:n])
	}
	cmd.Process.Signal(os.Interrupt)
	io.Copy(io.Discard, br)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(errb.String(), "interrupted: run cancelled") {
		t.Fatalf("after Ctrl-C: %v, stderr %q", err, errb.String())
	}
	// The run was cancelled: the chat goes idle with a terminal event.
	testkit.Eventually(t, time.Minute, func() error {
		var c api.Chat
		if err := json.Unmarshal([]byte(e.must("chat", "show", id, "--json")), &c); err != nil {
			return err
		}
		if c.Running {
			return errors.New("still running")
		}
		return nil
	}, "the chat idle after cancel")
}
