package testkit

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/lxdexec"
)

// HostileCGI is the CGI script ServeHTTPD installs at /cgi-bin/hostile: a
// hostile app's answer, setting headers that must never reach the browser
// or a Remote frontend as if they were Remote's own (cookies named like
// Remote's, HSTS and Clear-Site-Data that act on the whole host, an
// X-Remote-User), then echoing the request headers the app was given.
const HostileCGI = "#!/bin/sh\n" +
	"printf 'Content-Type: text/plain\\r\\n'\n" +
	"printf 'Set-Cookie: remote_session=evil; Path=/\\r\\n'\n" +
	"printf 'Set-Cookie: remote_preview=evil; Path=/\\r\\n'\n" +
	"printf 'Set-Cookie: app=fine; Path=/\\r\\n'\n" +
	"printf 'X-Remote-User: root\\r\\n'\n" +
	"printf 'Strict-Transport-Security: max-age=31536000; includeSubDomains\\r\\n'\n" +
	"printf 'Clear-Site-Data: \"cookies\"\\r\\n'\n" +
	"printf '\\r\\n'\n" +
	"echo \"user=[$HTTP_X_REMOTE_USER] frontend=[$HTTP_X_REMOTE_FRONTEND] host=[$HTTP_HOST] cookie=[$HTTP_COOKIE]\"\n"

// ServeHTTPD starts busybox httpd in container on 127.0.0.1:port (the
// container's loopback only), serving index as /index.html and
// HostileCGI as /cgi-bin/hostile.
func ServeHTTPD(t testing.TB, cl *lxdexec.Client, container string, port int, index string) {
	t.Helper()
	push(t, cl, container, "/www/index.html", index, 0o644)
	push(t, cl, container, "/www/cgi-bin/hostile", HostileCGI, 0o755)
	run(t, cl, container, "busybox httpd -p 127.0.0.1:"+strconv.Itoa(port)+" -h /www")
}

// PushFile writes content into container at path (mode 0644, parents
// made).
func PushFile(t testing.TB, cl *lxdexec.Client, container, path, content string) {
	t.Helper()
	push(t, cl, container, path, content, 0o644)
}

var wsecho struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// ServeWSEcho builds internal/testkit/wsecho statically (once per test
// process), pushes it into container and starts it on 127.0.0.1:port: a
// WebSocket echo at /ws.
func ServeWSEcho(t testing.TB, cl *lxdexec.Client, container string, port int) {
	t.Helper()
	wsecho.once.Do(func() {
		dir, err := os.MkdirTemp("", "remote-wsecho-")
		if err != nil {
			wsecho.err = err
			return
		}
		wsecho.path = filepath.Join(dir, "wsecho")
		cmd := exec.Command("go", "build", "-o", wsecho.path, "remote/internal/testkit/wsecho")
		cmd.Dir = Root()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		wsecho.out, wsecho.err = cmd.CombinedOutput()
	})
	if wsecho.err != nil {
		t.Fatalf("build wsecho: %v\n%s", wsecho.err, wsecho.out)
	}
	data, err := os.ReadFile(wsecho.path)
	if err != nil {
		t.Fatal(err)
	}
	push(t, cl, container, "/usr/local/bin/wsecho", string(data), 0o755)
	run(t, cl, container, "/usr/local/bin/wsecho "+strconv.Itoa(port)+" </dev/null >/dev/null 2>&1 &")
	// Wait until it listens (it is up in milliseconds). -Y off: busybox
	// wget ignores no_proxy, and a project behind the egress proxy has
	// http_proxy set.
	for i := 0; i < 50; i++ {
		if strings.Contains(run(t, cl, container, "wget -Y off -q -O- http://127.0.0.1:"+strconv.Itoa(port)+"/ 2>/dev/null; true"), "wsecho") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("wsecho did not start in %s", container)
}

func push(t testing.TB, cl *lxdexec.Client, container, path, content string, mode os.FileMode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cl.PushFile(ctx, container, path, strings.NewReader(content), lxdexec.FileOptions{Mode: mode, MkdirParents: true})
	if err != nil {
		t.Fatalf("push %s into %s: %v", path, container, err)
	}
}

// run runs script with sh in container and returns its stdout; a
// non-zero exit fails t.
func run(t testing.TB, cl *lxdexec.Client, container, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := cl.Exec(ctx, container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec in %s: %v", container, err)
	}
	_ = ex.Stdin().Close()
	var stderr bytes.Buffer
	go func() { _, _ = io.Copy(&stderr, ex.Stderr()) }()
	out, _ := io.ReadAll(ex.Stdout())
	code, err := ex.Wait()
	if err != nil || code != 0 {
		t.Fatalf("exec %q in %s: exit %d, %v: %s", script, container, code, err, stderr.String())
	}
	return string(out)
}
