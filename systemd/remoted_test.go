package systemd

// Integration tests: the real remoted binary under the systemd protocols,
// with the notify socket and the activated listener made by the test.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

	"remote/internal/testkit"
)

// TestMain removes the remoted binary built for the integration tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinaries()
	os.Exit(code)
}

// buildRemoted builds ./cmd/remoted once per test binary.
func buildRemoted(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs remoted")
	}
	return testkit.Binaries(t, "remoted")[0]
}

// daemonEnv is the test's environment without anything a service manager
// may have set for the test itself.
func daemonEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "JOURNAL_STREAM" || k == "LXD_SOCKET" || k == "LXD_DIR" || strings.HasPrefix(k, "REMOTE_") {
			continue
		}
		skip := false
		for _, s := range InheritedEnv() {
			skip = skip || k == s
		}
		if !skip {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// writeConfig writes a config with state, socket and a missing LXD socket
// (degraded mode: the tests do not depend on LXD) under dir.
func writeConfig(t *testing.T, dir string) (configPath, socketPath string) {
	t.Helper()
	socketPath = filepath.Join(dir, "remoted.sock")
	configPath = filepath.Join(dir, "remoted.toml")
	conf := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\nlog_level = \"debug\"\n\n[lxd]\nsocket = %q\n",
		socketPath, filepath.Join(dir, "state"), filepath.Join(dir, "no-lxd.sock"))
	if err := os.WriteFile(configPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return configPath, socketPath
}

// datagram is one notification and when it arrived.
type datagram struct {
	at     time.Time
	fields []string
}

func (d datagram) has(field string) bool {
	for _, f := range d.fields {
		if f == field {
			return true
		}
	}
	return false
}

func (d datagram) status() string {
	for _, f := range d.fields {
		if s, ok := strings.CutPrefix(f, "STATUS="); ok {
			return s
		}
	}
	return ""
}

// collect reads notifications into a channel until the socket closes.
func (s *notifySocket) collect() <-chan datagram {
	ch := make(chan datagram, 1024)
	go func() {
		defer close(ch)
		buf := make([]byte, 4096)
		for {
			if err := s.conn.SetReadDeadline(time.Time{}); err != nil {
				return
			}
			n, err := s.conn.Read(buf)
			if err != nil {
				return
			}
			ch <- datagram{at: time.Now(), fields: strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")}
		}
	}()
	return ch
}

// await returns the datagrams up to and including the first that has
// field, failing the test if none comes in a minute, or within 5 seconds
// of the daemon exiting.
func await(t *testing.T, ch <-chan datagram, exited <-chan struct{}, field string) []datagram {
	t.Helper()
	var seen []datagram
	timeout := time.After(time.Minute)
	for {
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatalf("notify socket closed waiting for %s", field)
			}
			seen = append(seen, d)
			if d.has(field) {
				return seen
			}
		case <-exited:
			// What it sent before exiting may still be on its way to ch.
			exited, timeout = nil, time.After(5*time.Second)
		case <-timeout:
			t.Fatalf("no %s (remoted exited: %v); got %v", field, exited == nil, seen)
		}
	}
}

// startDaemon starts remoted through sh so that LISTEN_PID and WATCHDOG_PID
// can name the daemon's own pid, as systemd sets them.
func startDaemon(t *testing.T, env []string, extra []*os.File, args ...string) (*exec.Cmd, <-chan struct{}, *strings.Builder) {
	t.Helper()
	bin := buildRemoted(t)
	wrapper := `[ -n "$SET_LISTEN_PID" ] && export LISTEN_PID=$$; [ -n "$SET_WATCHDOG_PID" ] && export WATCHDOG_PID=$$; exec "$0" "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", wrapper, bin}, args...)...)
	cmd.Env = env
	cmd.ExtraFiles = extra
	logs := &strings.Builder{}
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("remoted log:\n%s", logs.String())
			mu.Unlock()
		}
	})
	return cmd, exited, logs
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// getInfo does GET /v1/info over the Unix socket at path.
func getInfo(t *testing.T, path string) map[string]any {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}, Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "http://remoted/v1/info", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Remote-User", "systemd-test")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/info over %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/info: %s %s", resp.Status, body)
	}
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatalf("GET /v1/info: %v: %s", err, body)
	}
	return info
}

func waitExit(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("remoted did not exit within a minute of SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("remoted exit code %d after SIGTERM, want 0", code)
	}
}

// TestRemotedNotifyProtocol: STATUS lines while starting, READY=1 only once
// the API socket answers, WATCHDOG=1 more often than the watchdog timeout,
// RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM.
func TestRemotedNotifyProtocol(t *testing.T) {
	dir := t.TempDir()
	configPath, socketPath := writeConfig(t, dir)
	sock := listenNotify(t, false)
	notes := sock.collect()

	const watchdogUsec = 1_000_000 // the daemon must ping at about 500 ms
	env := daemonEnv("NOTIFY_SOCKET="+sock.name, "WATCHDOG_USEC="+strconv.Itoa(watchdogUsec), "SET_WATCHDOG_PID=1")
	cmd, exited, _ := startDaemon(t, env, nil, "-config", configPath)

	startup := await(t, notes, exited, "READY=1")
	// The socket listens before READY=1: it must answer now.
	if _, err := os.Stat(socketPath); err != nil {
		t.Fatalf("READY=1 sent before the API socket exists: %v", err)
	}
	info := getInfo(t, socketPath)
	if info == nil {
		t.Fatal("empty /v1/info")
	}
	var statuses []string
	for _, d := range startup {
		if s := d.status(); s != "" {
			statuses = append(statuses, s)
		}
	}
	if len(statuses) < 2 {
		t.Errorf("STATUS lines before READY=1: %q, want what remoted is doing at each step", statuses)
	}
	ready := startup[len(startup)-1]
	if s := ready.status(); !strings.HasPrefix(s, "serving on "+socketPath) || !strings.Contains(s, "LXD unreachable") {
		t.Errorf("READY=1 status %q, want serving on %s and the degraded mode", s, socketPath)
	}

	// Watchdog: the next pings come more often than WATCHDOG_USEC (or
	// systemd would kill the daemon) and not in a busy loop.
	var pings []time.Time
	for len(pings) < 5 {
		for _, d := range await(t, notes, exited, "WATCHDOG=1") {
			if d.has("WATCHDOG=1") {
				pings = append(pings, d.at)
			}
		}
	}
	mean := pings[len(pings)-1].Sub(pings[0]) / time.Duration(len(pings)-1)
	timeout := time.Duration(watchdogUsec) * time.Microsecond
	if mean >= timeout || mean < timeout/8 {
		t.Errorf("mean watchdog ping interval %v, want about %v (below the %v timeout)", mean, timeout/2, timeout)
	}

	// Reload.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await(t, notes, exited, "RELOADING=1")
	if d := await(t, notes, exited, "READY=1"); d[len(d)-1].status() == "" {
		t.Error("READY=1 after reload without a STATUS")
	}

	// Stop.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await(t, notes, exited, "STOPPING=1")
	waitExit(t, cmd, exited)
}

// TestRemotedSocketActivation: remoted serves on the listener the test
// passes as fd 3, leaves the socket file in place when it stops, and a
// client that connects while no daemon runs is served by the next one.
func TestRemotedSocketActivation(t *testing.T) {
	dir := t.TempDir()
	configPath, configSocket := writeConfig(t, dir)
	activated := filepath.Join(dir, "activated.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: activated, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false) // like systemd, the test keeps the file
	defer l.Close()
	f, err := l.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	sock := listenNotify(t, false)
	notes := sock.collect()
	env := daemonEnv("NOTIFY_SOCKET="+sock.name, "LISTEN_FDS=1", "LISTEN_FDNAMES=remoted.socket", "SET_LISTEN_PID=1")

	cmd, exited, _ := startDaemon(t, env, []*os.File{f}, "-config", configPath)
	ready := await(t, notes, exited, "READY=1")
	if s := ready[len(ready)-1].status(); !strings.Contains(s, activated) {
		t.Errorf("READY=1 status %q does not name the activated socket %s", s, activated)
	}
	getInfo(t, activated)
	if _, err := os.Stat(configSocket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("remoted created its own socket %s under socket activation (stat: %v)", configSocket, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await(t, notes, exited, "STOPPING=1")
	waitExit(t, cmd, exited)
	fi, err := os.Stat(activated)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("activated socket file after remoted stopped: %v, %v; want it kept", fi, err)
	}

	// While no daemon runs, a client still connects (the listener is
	// systemd's); the next daemon serves it.
	conn, err := net.Dial("unix", activated)
	if err != nil {
		t.Fatalf("connect while remoted is down: %v", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /v1/info HTTP/1.1\r\nHost: remoted\r\nX-Remote-User: systemd-test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatalf("write while remoted is down: %v", err)
	}
	cmd2, exited2, _ := startDaemon(t, env, []*os.File{f}, "-config", configPath)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("queued request: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("queued request: %s", resp.Status)
	}
	// remoted handles SIGTERM from its main loop, which runs after READY=1.
	await(t, notes, exited2, "READY=1")
	if err := cmd2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd2, exited2)
}

// TestRemotedSecretsKeyFromCredentials: remoted -init-secrets-key makes the
// key file the unit's LoadCredential= hands over (0600, 32 bytes, never
// replaced); under systemd ($CREDENTIALS_DIRECTORY) remoted uses that
// credential as the store's key, writes no key of its own, and refuses to
// start, creating nothing, when the credential is missing.
func TestRemotedSecretsKeyFromCredentials(t *testing.T) {
	bin := buildRemoted(t)
	dir := t.TempDir()
	configPath, _ := writeConfig(t, dir)
	stateKey := filepath.Join(dir, "state", "secrets.key")

	// -init-secrets-key: create once, then keep.
	keyFile := filepath.Join(dir, "etc-remote", "secrets.key")
	if err := os.Mkdir(filepath.Dir(keyFile), 0o755); err != nil {
		t.Fatal(err)
	}
	initKey := func() string {
		out, err := exec.Command(bin, "-init-secrets-key", keyFile).CombinedOutput()
		if err != nil {
			t.Fatalf("remoted -init-secrets-key: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := initKey(); out != "created secrets key "+keyFile+" (mode 0600); back it up\n" {
		t.Errorf("first -init-secrets-key said %q", out)
	}
	key, err := os.ReadFile(keyFile)
	if fi, _ := os.Stat(keyFile); err != nil || len(key) != 32 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %d bytes, err %v, mode %v; want 32 bytes, mode 0600", len(key), err, fi.Mode())
	}
	if out := initKey(); out != "secrets key "+keyFile+" exists; kept it\n" {
		t.Errorf("second -init-secrets-key said %q", out)
	}
	if again, _ := os.ReadFile(keyFile); string(again) != string(key) {
		t.Fatal("a second -init-secrets-key replaced the key")
	}

	// What LoadCredential= makes of it: a read-only copy, mode 0400.
	credentials := func(name string, key []byte) string {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if key != nil {
			if err := os.WriteFile(filepath.Join(d, "secrets-key"), key, 0o400); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(d, 0o500); err != nil {
			t.Fatal(err)
		}
		return d
	}
	startWith := func(creds string) (*exec.Cmd, <-chan struct{}, *strings.Builder, <-chan datagram) {
		sock := listenNotify(t, false)
		notes := sock.collect()
		cmd, exited, logs := startDaemon(t, daemonEnv("NOTIFY_SOCKET="+sock.name, "CREDENTIALS_DIRECTORY="+creds), nil, "-config", configPath)
		return cmd, exited, logs, notes
	}

	cmd, exited, _, notes := startWith(credentials("creds", key))
	await(t, notes, exited, "READY=1")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, exited)
	if _, err := os.Stat(stateKey); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("remoted wrote its own key %s under systemd credentials (stat: %v)", stateKey, err)
	}

	// The store now checks against the credential: another key is refused.
	other := make([]byte, 32)
	copy(other, "a different thirty-two byte key!")
	cmd, exited, logs, _ := startWith(credentials("other-creds", other))
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("remoted served with a credential that is not the store's key")
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(logs.String(), "secrets key does not match the store") {
		t.Errorf("another credential: exit %d, log %q; want a failure naming the key mismatch", code, logs.String())
	}

	// No credential: a clear refusal, and no key made in its place.
	empty := credentials("empty-creds", nil)
	cmd, exited, logs, _ = startWith(empty)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("remoted served without its secrets-key credential")
	}
	want := "systemd credential secrets-key is missing from $CREDENTIALS_DIRECTORY (" + empty +
		"): the unit needs LoadCredential=secrets-key:/etc/remote/secrets.key"
	if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(logs.String(), want) {
		t.Errorf("missing credential: exit %d, log %q; want %q", code, logs.String(), want)
	}
	for _, p := range []string{filepath.Join(empty, "secrets-key"), stateKey} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remoted made a key %s without its credential (stat: %v)", p, err)
		}
	}
}
