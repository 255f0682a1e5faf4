package lxdexec_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// TestSuiteUnix runs the real-LXD suite over the local Unix socket.
func TestSuiteUnix(t *testing.T) {
	runSuite(t, testkit.LXD(t))
}

// TestSuiteHTTPS runs the same suite over HTTPS: the test makes LXD listen
// on a loopback port, trusts a client certificate it generates, pins the
// server certificate, and undoes both afterwards.
func TestSuiteHTTPS(t *testing.T) {
	runSuite(t, httpsClient(t, testkit.LXD(t)))
}

// runSuite is the behaviour every transport must show against a real LXD.
func runSuite(t *testing.T, c *lxdexec.Client) {
	t.Run("lifecycle", func(t *testing.T) { t.Parallel(); testLifecycle(t, c) })
	t.Run("deleted-during-exec", func(t *testing.T) { t.Parallel(); testDeletedDuringExec(t, c) })
	t.Run("shared", func(t *testing.T) {
		t.Parallel()
		name := testkit.NewContainer(t, c, "suite")
		for _, tc := range []struct {
			name string
			fn   func(*testing.T, *lxdexec.Client, string)
		}{
			{"exec-streams", testExecStreams},
			{"exec-env-cwd-user", testExecEnvCwdUser},
			{"exec-not-found", testExecCommandNotFound},
			{"exec-64MiB", testExecLargeOutput},
			{"exec-cancel", testExecCancel},
			{"exec-cancel-kill", testExecCancelKill},
			{"exec-pty-resize", testExecPTY},
			{"exec-while-frozen", testExecWhileFrozen},
			{"files", testFiles},
			{"mkdir-concurrent", testMkdirConcurrent},
			{"proxy-device", testProxyDevice},
		} {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, c, name) })
		}
	})
}

// testCtx bounds one subtest. Generous: LXD 5.0 can stall its whole API
// for 30 s now and then (a forced stop whose hook it only serves when the
// stop's own 30 s lock times out), and other packages' tests share it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testLifecycle(t *testing.T, c *lxdexec.Client) {
	ctx := testCtx(t)
	name := testkit.ContainerName("life")
	t.Cleanup(func() { _ = c.ForceDeleteInstance(context.Background(), name) })

	events, err := c.Events(ctx, lxdexec.EventTypeLifecycle)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	seen := make(chan string, 64)
	go func() {
		for ev := range events {
			if ev.Instance == name {
				seen <- ev.Action
			}
		}
	}()

	if _, _, err := c.Instance(ctx, name); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("Instance(missing) = %v, want ErrNotFound", err)
	}
	req := lxdexec.InstancesPost{Name: name, Source: lxdexec.InstanceSource{Alias: testkit.TestImage},
		Config: map[string]string{"environment.SUITE": "yes"}}
	if err := c.CreateInstance(ctx, req); err != nil {
		t.Fatalf("CreateInstance: %v", err)
	}
	if err := c.CreateInstance(ctx, req); !errors.Is(err, lxdexec.ErrConflict) {
		t.Fatalf("CreateInstance(duplicate) = %v, want ErrConflict", err)
	}
	missing := lxdexec.InstancesPost{Name: name + "x", Source: lxdexec.InstanceSource{Alias: "no-such-alias"}}
	if err := c.CreateInstance(ctx, missing); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("CreateInstance(missing alias) = %v, want ErrNotFound", err)
	}

	inst, etag, err := c.Instance(ctx, name)
	if err != nil || inst.Status != "Stopped" || etag == "" {
		t.Fatalf("Instance = %+v, etag %q, %v; want Stopped with etag", inst, etag, err)
	}
	if err := c.UpdateInstance(ctx, name, lxdexec.InstancePatch{Config: map[string]string{"boot.autostart": "true"}}, etag); err != nil {
		t.Fatalf("UpdateInstance(boot.autostart): %v", err)
	}
	if err := c.UpdateInstance(ctx, name, lxdexec.InstancePatch{Config: map[string]string{"boot.autostart": "false"}}, etag); !errors.Is(err, lxdexec.ErrPreconditionFailed) {
		t.Fatalf("UpdateInstance(stale etag) = %v, want ErrPreconditionFailed", err)
	}
	inst, _, err = c.Instance(ctx, name)
	if err != nil || inst.Config["boot.autostart"] != "true" || inst.Config["environment.SUITE"] != "yes" {
		t.Fatalf("after PATCH config = %v, %v; want boot.autostart=true", inst.Config, err)
	}

	if err := c.SetState(ctx, name, lxdexec.StateRequest{Action: "start"}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := c.SetState(ctx, name, lxdexec.StateRequest{Action: "start"}); !errors.Is(err, lxdexec.ErrAlreadyInState) {
		t.Fatalf("start(running) = %v, want ErrAlreadyInState", err)
	}
	if err := c.DeleteInstance(ctx, name); !errors.Is(err, lxdexec.ErrBadRequest) {
		t.Fatalf("DeleteInstance(running) = %v, want ErrBadRequest", err)
	}
	list, err := c.Instances(ctx)
	if err != nil || !containsInstance(list, name, "Running") {
		t.Fatalf("Instances = %d items, %v; want %s Running", len(list), err, name)
	}
	// busybox init ignores SIGPWR, so a short graceful stop escalates to force.
	st := time.Now()
	if err := c.SetState(ctx, name, lxdexec.StateRequest{Action: "stop", Timeout: 1}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("stop took %v", time.Since(st))
	if err := c.DeleteInstance(ctx, name); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	if _, _, err := c.Instance(ctx, name); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("Instance(deleted) = %v, want ErrNotFound", err)
	}
	want := map[string]bool{lxdexec.ActionInstanceCreated: false, lxdexec.ActionInstanceStarted: false, "stopped": false, lxdexec.ActionInstanceDeleted: false}
	for !want[lxdexec.ActionInstanceCreated] || !want[lxdexec.ActionInstanceStarted] || !want["stopped"] || !want[lxdexec.ActionInstanceDeleted] {
		select {
		case a := <-seen:
			if (lxdexec.Event{Action: a}).Stopped() {
				a = "stopped"
			}
			want[a] = true
		case <-ctx.Done():
			t.Fatalf("lifecycle events seen: %v", want)
		}
	}
}

func containsInstance(list []lxdexec.Instance, name, status string) bool {
	for _, i := range list {
		if i.Name == name && i.Status == status {
			return true
		}
	}
	return false
}

// run executes a command, feeding stdin, and returns stdout, stderr and the
// exit code.
func run(t *testing.T, ctx context.Context, c *lxdexec.Client, name string, req lxdexec.ExecRequest, stdin string) (string, string, int, error) {
	t.Helper()
	e, err := c.Exec(ctx, name, req)
	if err != nil {
		t.Fatalf("Exec(%v): %v", req.Command, err)
	}
	go func() {
		if stdin != "" {
			_, _ = io.WriteString(e.Stdin(), stdin)
		}
		_ = e.Stdin().Close()
	}()
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = io.Copy(&stderr, e.Stderr()) }()
	_, _ = io.Copy(&stdout, e.Stdout())
	wg.Wait()
	code, err := e.Wait()
	return stdout.String(), stderr.String(), code, err
}

func testExecStreams(t *testing.T, c *lxdexec.Client, name string) {
	out, errOut, code, err := run(t, testCtx(t), c, name, lxdexec.ExecRequest{
		Command: []string{"sh", "-c", "echo out-line; echo err-line >&2; read x; echo got:$x; cat; exit 3"},
	}, "hello-stdin\nrest\n")
	if err != nil || code != 3 {
		t.Fatalf("exit = %d, %v; want 3, nil", code, err)
	}
	if out != "out-line\ngot:hello-stdin\nrest\n" || errOut != "err-line\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
}

func testExecEnvCwdUser(t *testing.T, c *lxdexec.Client, name string) {
	uid := uint32(1000)
	out, _, code, err := run(t, testCtx(t), c, name, lxdexec.ExecRequest{
		Command: []string{"sh", "-c", "echo $FOO:$SUITE_ENV:$(pwd):$(id -u):$(id -g)"},
		Env:     map[string]string{"FOO": "bar", "SUITE_ENV": "a b"},
		Cwd:     "/tmp", User: &uid, Group: &uid,
	}, "")
	if err != nil || code != 0 || out != "bar:a b:/tmp:1000:1000\n" {
		t.Fatalf("got %q, exit %d, %v", out, code, err)
	}
}

func testExecCommandNotFound(t *testing.T, c *lxdexec.Client, name string) {
	_, _, code, err := run(t, testCtx(t), c, name, lxdexec.ExecRequest{Command: []string{"/no/such/binary"}}, "")
	if code != 127 || !errors.Is(err, lxdexec.ErrOperationFailed) {
		t.Fatalf("exit %d, %v; want 127 and ErrOperationFailed", code, err)
	}
}

func testExecLargeOutput(t *testing.T, c *lxdexec.Client, name string) {
	const size = 64 << 20
	ctx := testCtx(t)
	e, err := c.Exec(ctx, name, lxdexec.ExecRequest{Command: []string{"sh", "-c",
		fmt.Sprintf("head -c %d /dev/urandom >/tmp/big && sha256sum /tmp/big >&2 && cat /tmp/big && rm /tmp/big", size)}})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Stdin().Close()
	var errOut bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&errOut, e.Stderr()); close(done) }()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	h := sha256.New()
	buf := make([]byte, 256<<10)
	var n int64
	for next := int64(0); ; {
		k, rerr := e.Stdout().Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if n >= next { // sample memory every 4 MiB
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			next += 4 << 20
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			t.Fatalf("read stdout: %v", rerr)
		}
	}
	<-done
	code, err := e.Wait()
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	want, _, _ := strings.Cut(errOut.String(), " ")
	if n != size || got != want {
		t.Fatalf("got %d bytes sha256 %s; want %d bytes sha256 %q", n, got, size, want)
	}
	// Streaming, not buffering: the heap grows far less than the output.
	if grown := int64(peak) - int64(base); grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB while streaming 64 MiB", grown>>20)
	}
	t.Logf("64 MiB streamed, heap growth %d KiB", (int64(peak)-int64(base))>>10)
}

func testExecCancel(t *testing.T, c *lxdexec.Client, name string) {
	ctx, cancel := context.WithCancel(testCtx(t))
	// A long grace: the SIGTERM must end it, SIGKILL must not be needed.
	e, err := c.Exec(ctx, name, lxdexec.ExecRequest{Command: []string{"sleep", "1000"}, KillGrace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
	go func() { _, _ = io.Copy(io.Discard, e.Stdout()) }()
	start := time.Now()
	cancel()
	type result struct {
		code int
		err  error
	}
	res := make(chan result, 1)
	go func() { code, err := e.Wait(); res <- result{code, err} }()
	select {
	case r := <-res:
		if !errors.Is(r.err, context.Canceled) || r.code != 128+15 {
			t.Fatalf("Wait = %d, %v; want 143 and context.Canceled", r.code, r.err)
		}
		t.Logf("cancel returned after %v", time.Since(start))
	case <-time.After(30 * time.Second): // a hang guard, not a timing check
		t.Fatal("Wait did not return after cancel")
	}
	out, _, _, err := run(t, testCtx(t), c, name, lxdexec.ExecRequest{Command: []string{"ps", "-o", "args"}}, "")
	if err != nil || strings.Contains(out, "sleep 1000") {
		t.Fatalf("process list after cancel: %q, %v", out, err)
	}
}

// testExecCancelKill: a command that ignores SIGTERM gets SIGKILL after
// the grace period.
func testExecCancelKill(t *testing.T, c *lxdexec.Client, name string) {
	ctx, cancel := context.WithCancel(testCtx(t))
	e, err := c.Exec(ctx, name, lxdexec.ExecRequest{KillGrace: 200 * time.Millisecond,
		Command: []string{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
	ready := make([]byte, 6)
	if _, err := io.ReadFull(e.Stdout(), ready); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, e.Stdout()) }()
	cancel()
	if code, err := e.Wait(); !errors.Is(err, context.Canceled) || code != 128+9 {
		t.Fatalf("Wait = %d, %v; want 137 and context.Canceled", code, err)
	}
}

func testExecPTY(t *testing.T, c *lxdexec.Client, name string) {
	ctx := testCtx(t)
	e, err := c.Exec(ctx, name, lxdexec.ExecRequest{Command: []string{"sh"}, Interactive: true, Width: 100, Height: 30,
		Env: map[string]string{"PS1": "$ "}})
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(out, e.Stdout()); close(copied) }()
	waitFor := func(s string) {
		t.Helper()
		for !strings.Contains(out.String(), s) {
			select {
			case <-ctx.Done():
				t.Fatalf("pty output %q lacks %q", out.String(), s)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if _, err := io.WriteString(e.Stdin(), "stty size; echo size-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	waitFor("size-42")
	if !strings.Contains(out.String(), "30 100") {
		t.Fatalf("initial size: %q", out.String())
	}
	if err := e.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(e.Stdin(), "stty size; echo resized-$((6*7)); echo to-stderr >&2\n"); err != nil {
		t.Fatal(err)
	}
	waitFor("resized-42")
	if s := out.String(); !strings.Contains(s, "40 120") || !strings.Contains(s, "to-stderr") {
		t.Fatalf("after resize: %q", s)
	}
	// ^D must reach the shell's line editor: ash prints its prompt after
	// putting the tty in raw mode, while a ^D that lands while it still
	// runs the command (canonical mode) is turned into NUL by the tty.
	for {
		s := out.String()
		if strings.Contains(s[strings.LastIndex(s, "to-stderr"):], "$ ") {
			break
		}
		waitFor("$ ")
		select {
		case <-ctx.Done():
			t.Fatalf("no prompt after the command: %q", s)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := e.Stdin().Close(); err != nil { // ^D ends the shell
		t.Fatal(err)
	}
	<-copied
	if b, _ := io.ReadAll(e.Stderr()); len(b) != 0 {
		t.Fatalf("interactive stderr not empty: %q", b)
	}
	if code, err := e.Wait(); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testFiles(t *testing.T, c *lxdexec.Client, name string) {
	ctx := testCtx(t)
	content := bytes.Repeat([]byte("file content\x00\xff\n"), 10000)
	p := "/workspace/a/b/c/data.bin"
	err := c.PushFile(ctx, name, p, bytes.NewReader(content), lxdexec.FileOptions{Mode: 0o640, UID: 1000, GID: 1000, MkdirParents: true})
	if err != nil {
		t.Fatalf("PushFile: %v", err)
	}
	rc, info, err := c.PullFile(ctx, name, p)
	if err != nil {
		t.Fatalf("PullFile: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, content) || info.Mode != 0o640 || info.UID != 1000 || info.GID != 1000 || info.Type != lxdexec.FileTypeFile {
		t.Fatalf("pulled %d bytes (equal %v), info %+v", len(got), bytes.Equal(got, content), info)
	}
	out, _, _, _ := run(t, ctx, c, name, lxdexec.ExecRequest{Command: []string{"stat", "-c", "%a %u:%g", "/workspace/a/b/c/data.bin", "/workspace/a/b"}}, "")
	if out != "640 1000:1000\n755 1000:1000\n" {
		t.Fatalf("stat in container: %q", out)
	}
	// Pushing from a non-seekable stream (chunked body) works too.
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte("streamed")); pw.Close() }()
	if err := c.PushFile(ctx, name, "/tmp/streamed", pr, lxdexec.FileOptions{Mode: 0o600}); err != nil {
		t.Fatalf("PushFile(stream): %v", err)
	}
	if err := c.PushFile(ctx, name, "/tmp/link", strings.NewReader(p), lxdexec.FileOptions{Type: lxdexec.FileTypeSymlink}); err != nil {
		t.Fatalf("PushFile(symlink): %v", err)
	}
	rc, info, err = c.PullFile(ctx, name, "/tmp/link")
	if err != nil {
		t.Fatalf("PullFile(symlink): %v", err)
	}
	target, _ := io.ReadAll(rc)
	rc.Close()
	if string(target) != p || info.Type != lxdexec.FileTypeSymlink {
		t.Fatalf("symlink pulled as %q %+v", target, info)
	}
	if _, _, err := c.PullFile(ctx, name, "/workspace/a"); !errors.Is(err, lxdexec.ErrIsDirectory) {
		t.Fatalf("PullFile(dir) = %v, want ErrIsDirectory", err)
	}
	names, err := c.ListDir(ctx, name, "/workspace/a/b/c")
	if err != nil || len(names) != 1 || names[0] != "data.bin" {
		t.Fatalf("ListDir = %v, %v", names, err)
	}
	for _, f := range []string{p, "/tmp/link", "/tmp/streamed"} {
		if err := c.DeleteFile(ctx, name, f); err != nil {
			t.Fatalf("DeleteFile(%s): %v", f, err)
		}
	}
	if _, _, err := c.PullFile(ctx, name, p); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("PullFile(deleted) = %v, want ErrNotFound", err)
	}
	if err := c.DeleteFile(ctx, name, p); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("DeleteFile(missing) = %v, want ErrNotFound", err)
	}
	if err := c.PushFile(ctx, name, "/no/such/dir/f", strings.NewReader("x"), lxdexec.FileOptions{}); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("PushFile(missing parent) = %v, want ErrNotFound", err)
	}
}

func testProxyDevice(t *testing.T, c *lxdexec.Client, name string) {
	ctx := testCtx(t)
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from host\n")
	}))
	defer host.Close()
	hostAddr := strings.TrimPrefix(host.URL, "http://")
	if err := c.AddProxyDevice(ctx, name, "model", "tcp:127.0.0.1:18080", "tcp:"+hostAddr); err != nil {
		t.Fatalf("AddProxyDevice: %v", err)
	}
	inst, _, err := c.Instance(ctx, name)
	if err != nil || inst.Devices["model"]["type"] != "proxy" || inst.Devices["model"]["bind"] != "instance" {
		t.Fatalf("devices %v, %v", inst.Devices, err)
	}
	// The proxy may take a moment to listen after the hot-plug.
	out, _, code, err := run(t, ctx, c, name, lxdexec.ExecRequest{Command: []string{"sh", "-c",
		"for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O- http://127.0.0.1:18080/ && exit 0; sleep 0.2; done; exit 1"}}, "")
	if err != nil || code != 0 || out != "hello from host\n" {
		t.Fatalf("through proxy: %q exit %d, %v", out, code, err)
	}
	if err := c.AddProxyDevice(ctx, name, "", "", ""); err == nil {
		t.Fatal("AddProxyDevice with empty fields succeeded")
	}
}

func testDeletedDuringExec(t *testing.T, c *lxdexec.Client) {
	ctx := testCtx(t)
	name := testkit.NewContainer(t, c, "del")
	e, err := c.Exec(ctx, name, lxdexec.ExecRequest{Command: []string{"sh", "-c", "echo started; sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
	line := make([]byte, 8)
	if _, err := io.ReadFull(e.Stdout(), line); err != nil {
		t.Fatalf("read first line: %v", err)
	}
	if err := c.ForceDeleteInstance(ctx, name); err != nil {
		t.Fatalf("ForceDeleteInstance: %v", err)
	}
	_, _ = io.Copy(io.Discard, e.Stdout())
	code, err := e.Wait()
	if err == nil && code == 0 {
		t.Fatalf("Wait after delete = %d, nil; want a failure or a kill status", code)
	}
	t.Logf("Wait after delete: %d, %v", code, err)
}

// httpsClient makes LXD listen on loopback (unless it already listens),
// trusts a fresh client certificate and connects over HTTPS with the
// server certificate pinned. Everything is undone in t.Cleanup.
func httpsClient(t *testing.T, unix *lxdexec.Client) *lxdexec.Client {
	t.Helper()
	ctx := testCtx(t)
	srv, err := unix.Server(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prev, _ := srv.Config["core.https_address"].(string)
	addr := prev
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
		setHTTPS(t, unix, addr)
		t.Cleanup(func() { setHTTPS(t, unix, prev) })
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("core.https_address %q: %v", addr, err)
	}
	if host == "" || host == "::" || host == "0.0.0.0" || host == "[::]" {
		host = "127.0.0.1"
	}

	dir := t.TempDir()
	certPEM, keyPEM := clientCert(t)
	certFile, keyFile, serverFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "server.crt")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, serverFile: []byte(srv.Certificate)} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := pem.Decode(certPEM)
	fp, _ := lxdexec.CertificateFingerprint(certPEM)
	if _, err := unix.Query(ctx, "POST", "/1.0/certificates", map[string]any{
		"type": "client", "name": "lxdexec-test-" + fp[:8], "certificate": base64.StdEncoding.EncodeToString(block.Bytes),
		"restricted": false, "projects": []string{},
	}, ""); err != nil {
		t.Fatalf("trust client certificate: %v", err)
	}
	t.Cleanup(func() {
		if _, err := unix.Query(context.Background(), "DELETE", "/1.0/certificates/"+fp, nil, ""); err != nil {
			t.Errorf("remove client certificate: %v", err)
		}
	})

	url := "https://" + net.JoinHostPort(host, port)
	opts := lxdexec.Options{URL: url, ClientCert: certFile, ClientKey: keyFile, ServerCert: serverFile}
	c, err := lxdexec.Connect(ctx, opts)
	if err != nil {
		t.Fatalf("Connect(%s): %v", url, err)
	}
	if s, err := c.Server(ctx); err != nil || s.Auth != "trusted" {
		t.Fatalf("over https auth = %v, %v; want trusted", s, err)
	}
	// An untrusted client certificate is refused at Connect.
	otherCert, otherKey := clientCert(t)
	otherCertFile, otherKeyFile := filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key")
	_ = os.WriteFile(otherCertFile, otherCert, 0o600)
	_ = os.WriteFile(otherKeyFile, otherKey, 0o600)
	untrusted := opts
	untrusted.ClientCert, untrusted.ClientKey = otherCertFile, otherKeyFile
	if _, err := lxdexec.Connect(ctx, untrusted); !errors.Is(err, lxdexec.ErrForbidden) {
		t.Fatalf("Connect with untrusted cert = %v, want ErrForbidden", err)
	}
	// A different pinned certificate must be refused.
	wrong := filepath.Join(dir, "wrong.crt")
	if err := os.WriteFile(wrong, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	opts.ServerCert = wrong
	if _, err := lxdexec.Connect(ctx, opts); err == nil || !strings.Contains(err.Error(), "does not match pinned") {
		t.Fatalf("Connect with wrong pin = %v, want a pin mismatch", err)
	}
	return c
}

func setHTTPS(t *testing.T, c *lxdexec.Client, addr string) {
	t.Helper()
	body := map[string]any{"config": map[string]string{"core.https_address": addr}}
	if _, err := c.Query(context.Background(), "PATCH", "/1.0", body, ""); err != nil {
		t.Fatalf("set core.https_address=%q: %v", addr, err)
	}
}

// clientCert generates an EC P-384 self-signed client certificate.
func clientCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "lxdexec-test"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// testMkdirConcurrent creates one tree from several goroutines at once, as
// concurrent project preparations do: every Mkdir succeeds.
func testMkdirConcurrent(t *testing.T, c *lxdexec.Client, name string) {
	ctx := testCtx(t)
	errs := make(chan error, 8)
	for i := 0; i < cap(errs); i++ {
		go func() {
			errs <- c.Mkdir(ctx, name, "/workspace/race/x/y/z", lxdexec.FileOptions{Mode: 0o755})
		}()
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Mkdir: %v", err)
		}
	}
}

// TestFaultOperationForgottenLXD waits for each operation only after the
// real LXD has forgotten it (404 "Operation not found", as a late wait on
// a loaded host gets): the calls succeed by the resources they changed,
// and a create that failed (name in use) still fails.
func TestFaultOperationForgottenLXD(t *testing.T) {
	t.Parallel()
	testkit.LXD(t)
	ctx := testCtx(t)
	c, err := lxdexec.Connect(ctx, lxdexec.Options{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	forgotten := 0
	lxdexec.SetBeforeWait(c, func(op string) {
		if testkit.Poll(2*time.Minute, func() bool {
			_, err := c.GetOperation(ctx, op)
			return errors.Is(err, lxdexec.ErrNotFound)
		}) != nil {
			t.Errorf("LXD never forgot operation %s", op)
			return
		}
		forgotten++
	})
	name := testkit.ContainerName("forgot")
	testkit.CleanupContainer(t, testkit.LXD(t), name)
	req := lxdexec.InstancesPost{Name: name, Source: lxdexec.InstanceSource{Alias: testkit.TestImage}}
	if err := c.CreateInstance(ctx, req); err != nil {
		t.Fatalf("CreateInstance: %v", err)
	}
	// LXD 5.0 fails a duplicate only in the operation; later versions at once.
	err = c.CreateInstance(ctx, req)
	if !errors.Is(err, lxdexec.ErrOperationForgotten) && !errors.Is(err, lxdexec.ErrConflict) {
		t.Fatalf("CreateInstance(duplicate) = %v, want ErrOperationForgotten or ErrConflict", err)
	}
	t.Logf("duplicate: %v", err)
	if err := c.SetState(ctx, name, lxdexec.StateRequest{Action: "start"}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := c.CreateSnapshot(ctx, name, "s1", time.Time{}); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if err := c.SetState(ctx, name, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.DeleteInstance(ctx, name); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	if _, _, err := c.Instance(ctx, name); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("Instance(deleted) = %v, want ErrNotFound", err)
	}
	if forgotten < 5 {
		t.Fatalf("LXD forgot %d operations before their wait, want at least 5", forgotten)
	}
}

// testExecWhileFrozen: LXD refuses an exec while the instance is frozen
// (as during a snapshot: two chats of one project, one taking its turn's
// checkpoint); Exec waits for the thaw instead of failing the turn.
func testExecWhileFrozen(t *testing.T, c *lxdexec.Client, name string) {
	ctx := testCtx(t)
	if err := c.SetState(ctx, name, lxdexec.StateRequest{Action: "freeze", Timeout: 30}); err != nil {
		t.Fatalf("freeze: %v", err)
	}
	thawed := make(chan error, 1)
	go func() {
		time.Sleep(700 * time.Millisecond) //nolint:forbidigo // the subject: the instance stays frozen a while, so Exec must wait for the thaw
		thawed <- c.SetState(ctx, name, lxdexec.StateRequest{Action: "unfreeze", Timeout: 30})
	}()
	out, _, code, err := run(t, ctx, c, name, lxdexec.ExecRequest{Command: []string{"echo", "ran-after-thaw"}}, "")
	if uerr := <-thawed; uerr != nil {
		t.Fatalf("unfreeze: %v", uerr)
	}
	if err != nil || code != 0 || out != "ran-after-thaw\n" {
		t.Fatalf("exec on a frozen instance: %q exit %d, %v; want it run once thawed", out, code, err)
	}
}
