package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/config"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
)

// syncBuffer is a bytes.Buffer safe for the child's writes and our reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMain removes the binaries built for this package's tests and what
// the tests left for after them (atTestsEnd).
func TestMain(m *testing.M) {
	code := m.Run()
	runAfterTests()
	testkit.RemoveBinaries()
	os.Exit(code)
}

// buildRemoted returns this command's binary, built once per test process.
func buildRemoted(t testing.TB) string {
	t.Helper()
	return testkit.Binaries(t, "remoted")[0]
}

// daemonProc is a running remoted binary.
type daemonProc struct {
	t      testing.TB
	bin    string
	config string
	sock   string
	cmd    *exec.Cmd
	logs   *syncBuffer
	client *http.Client
}

func newDaemon(t testing.TB, bin, configText, sock string) *daemonProc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "remoted.toml")
	if err := os.WriteFile(cfg, []byte(configText), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{t: t, bin: bin, config: cfg, sock: sock}
	d.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", sock)
	}}}
	return d
}

// start starts remoted and returns once it answers GET /v1/info.
func (d *daemonProc) start() { d.startUntil("/v1/info") }

// startUntil starts remoted and returns once it answers GET path with 200.
func (d *daemonProc) startUntil(path string) {
	d.t.Helper()
	d.logs = &syncBuffer{}
	d.cmd = exec.Command(d.bin, "-config", d.config)
	d.cmd.Stderr = d.logs
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
	})
	if err := testkit.Poll(30*time.Second, func() error {
		req, _ := http.NewRequest("GET", "http://remoted"+path, nil)
		req.Header.Set(api.HeaderUser, "alice")
		resp, err := d.client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	}); err != nil {
		d.t.Fatalf("remoted did not answer: %v\n%s", err, d.logs)
	}
}

func (d *daemonProc) do(method, path string, body any) (int, []byte) {
	d.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://remoted"+path, r)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(api.HeaderUser, "alice")
	resp, err := d.client.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (d *daemonProc) events(chatID string) []api.Event {
	d.t.Helper()
	st, body := d.do("GET", "/v1/chats/"+chatID+"/events", nil)
	var evs []api.Event
	if err := json.Unmarshal(body, &evs); st != 200 || err != nil {
		d.t.Fatalf("events: %d %s", st, body)
	}
	return evs
}

func testConfig(t testing.TB, dir, sock string, fake *fakeanthropic.Server) string {
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	return fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q
log_level = "debug"

[lxd]
socket = "/nonexistent/lxd/unix.socket"

[agent]
allowed_roots = [%q]

[providers.claude]
binary = %q
env = { HOME = %q, ANTHROPIC_BASE_URL = %q, ANTHROPIC_API_KEY = "sk-ant-test-dummy", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }
project_env = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]
`, sock, filepath.Join(dir, "state"), dir, testkit.ClaudeBinary(t), home, fake.URL)
}

// TestCrashRecovery kills remoted, running without remote-shim, with
// SIGKILL in the middle of a streamed reply and restarts it: the CLI died
// with it, every event a client saw is still there, seq is gapless, and
// the run ends with daemon_restarted and a terminal error (S5).
func TestCrashRecovery(t *testing.T) {
	testkit.ClaudeBinary(t)
	var blocks []fakeanthropic.Block
	for i := range 30 {
		blocks = append(blocks, fakeanthropic.TextBlock(fmt.Sprintf("part %d. ", i)))
	}
	fake := fakeanthropic.New(t, fakeanthropic.Reply{Blocks: blocks, Delay: 200 * time.Millisecond})
	dir, err := os.MkdirTemp("", "rdcrash")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "remoted.sock")
	// No remote-shim: runs go direct and end with the daemon.
	cfg := strings.Replace(testConfig(t, dir, sock, fake), "[agent]\n", "[agent]\nshim_binary = \"/nonexistent/remote-shim\"\n", 1)
	d := newDaemon(t, buildRemoted(t), cfg, sock)
	d.start()

	st, body := d.do("POST", "/v1/chats", api.CreateChatRequest{Provider: "claude", Cwd: dir})
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 201 || err != nil {
		t.Fatalf("create chat: %d %s", st, body)
	}
	ws, _, err := (&websocket.Dialer{NetDial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", sock) }}).
		Dial("ws://remoted/ws/chat/"+chat.ID, http.Header{api.HeaderUser: {"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(api.ClientMessage{Type: "prompt", Text: "count slowly"})
	var acked []api.Event
	deltas := 0
	for deltas < 3 {
		ws.SetReadDeadline(time.Now().Add(60 * time.Second))
		var ev api.Event
		if err := ws.ReadJSON(&ev); err != nil {
			t.Fatalf("read: %v\n%s", err, d.logs)
		}
		if ev.Seq > 0 {
			acked = append(acked, ev)
		}
		if ev.Type == api.EventAssistantText {
			deltas++
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.cmd.Wait()
	if !strings.Contains(d.logs.String(), "runs go direct and will not survive a restart") {
		t.Errorf("no warning that runs will not survive a restart without remote-shim:\n%s", d.logs)
	}
	// A CLI run directly dies with the daemon (parent-death signal), even
	// after SIGKILL: nothing is left running orphaned.
	waitNoCLI(t, dir, 10*time.Second)

	d.start()
	evs := d.events(chat.ID)
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq gap: event %d has seq %d", i, ev.Seq)
		}
	}
	for _, a := range acked {
		if a.Seq > int64(len(evs)) || evs[a.Seq-1].Type != a.Type || evs[a.Seq-1].Text != a.Text {
			t.Fatalf("acknowledged event %d (%s %q) lost after the crash", a.Seq, a.Type, a.Text)
		}
	}
	n := len(evs)
	if n < 2 || evs[n-2].Type != api.EventSystem || evs[n-2].Subtype != api.SubtypeDaemonRestarted || evs[n-1].Type != api.EventError ||
		!strings.Contains(evs[n-1].Message, "daemon restart") {
		t.Fatalf("run's last events after restart: %+v %+v", evs[n-2], evs[n-1])
	}
	_, body = d.do("GET", "/v1/chats/"+chat.ID, nil)
	if err := json.Unmarshal(body, &chat); err != nil || chat.Running {
		t.Errorf("chat after restart: %s", body)
	}
	_, body = d.do("GET", "/v1/info", nil)
	if !strings.Contains(string(body), `"reachable":false`) {
		t.Errorf("info with LXD unreachable: %s", body)
	}
	// SIGHUP reloads in place; the daemon keeps serving.
	d.cmd.Process.Signal(syscall.SIGHUP)
	if testkit.Poll(10*time.Second, func() bool { return strings.Contains(d.logs.String(), "reloaded") }) != nil {
		t.Fatalf("no reload logged:\n%s", d.logs)
	}
	if st, _ := d.do("GET", "/v1/chats", nil); st != 200 {
		t.Errorf("after reload: %d", st)
	}
	// Graceful stop: SIGTERM ends cleanly and removes the socket.
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("remoted after SIGTERM: %v\n%s", err, d.logs)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("socket left behind after a graceful stop")
	}
}

func TestCheckConfig(t *testing.T) {
	bin := buildRemoted(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(good, []byte("[daemon]\nlog_level = \"debug\"\n"), 0o600)
	os.WriteFile(bad, []byte("[daemon]\nlog_levle = \"debug\"\n"), 0o600) //nolint:misspell // the unknown key under test
	for _, tt := range []struct {
		args []string
		ok   bool
		want string
	}{
		{[]string{"-check-config", "-config", good}, true, "config OK"},
		{[]string{"-check-config", "-config", bad}, false, "log_levle"}, //nolint:misspell // the unknown key under test
		{[]string{"-check-config", "-config", filepath.Join(dir, "missing.toml")}, false, "missing.toml"},
	} {
		out, err := exec.Command(bin, tt.args...).CombinedOutput()
		if (err == nil) != tt.ok || !strings.Contains(string(out), tt.want) {
			t.Errorf("remoted %v: %v %q; want ok=%v containing %q", tt.args, err, out, tt.ok, tt.want)
		}
	}
}

// TestPrintDefaultConfigRoundTrips: remoted -print-default-config prints
// config.DefaultTOML, and that output passes remoted -check-config.
func TestPrintDefaultConfigRoundTrips(t *testing.T) {
	bin := buildRemoted(t)
	out, err := exec.Command(bin, "-print-default-config").Output()
	if err != nil {
		t.Fatalf("remoted -print-default-config: %v", err)
	}
	want, err := config.DefaultTOML()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Errorf("remoted -print-default-config printed\n%s\nwant config.DefaultTOML()\n%s", out, want)
	}
	for _, line := range []string{"version = 1\n", "[daemon]\n", "socket = \"/run/remote/remoted.sock\"\n", "min_free = \"256MiB\"\n", "[providers.claude]\n", "[web]\n"} {
		if !strings.Contains(string(out), line) {
			t.Errorf("remoted -print-default-config lacks %q", line)
		}
	}
	file := filepath.Join(t.TempDir(), "default.toml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	check, err := exec.Command(bin, "-check-config", "-config", file).CombinedOutput()
	if err != nil || string(check) != "config OK ("+file+")\n" {
		t.Errorf("remoted -check-config on the printed defaults: %v %q", err, check)
	}
	// The defaults, never the operator's file: an env key, a webhook
	// header or a password hash in -config must not be printed.
	secret := filepath.Join(t.TempDir(), "secret.toml")
	os.WriteFile(secret, []byte("[providers.claude]\nenv = { ANTHROPIC_API_KEY = \"sk-ant-printed\" }\n[notify]\nheaders = { Authorization = \"Bearer hook-printed\" }\n"), 0o600)
	out2, err := exec.Command(bin, "-config", secret, "-print-default-config").CombinedOutput()
	if err != nil || string(out2) != string(want) || strings.Contains(string(out2), "printed") {
		t.Errorf("remoted -config FILE -print-default-config: %v; printed the file's values or not the defaults:\n%s", err, out2)
	}
}

// BenchmarkIdleRSS starts remoted and reports its resident memory once it
// is serving and idle (goal < 50 MiB).
func BenchmarkIdleRSS(b *testing.B) {
	bin := buildRemoted(b)
	dir, _ := os.MkdirTemp("", "rdrss")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "remoted.sock")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n[agent]\nallowed_roots = [%q]\n", sock, filepath.Join(dir, "state"), dir)
	d := newDaemon(b, bin, cfg, sock)
	d.start()
	time.Sleep(2 * time.Second) //nolint:forbidigo // let start-up garbage be collected
	b.ResetTimer()
	var rss float64
	for range b.N {
		rss = vmRSS(b, d.cmd.Process.Pid)
	}
	b.ReportMetric(rss/1024, "MiB-RSS")
}

func vmRSS(b testing.TB, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
