package projectapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning"
)

// socketProxy forwards a Unix socket to LXD's. Taking it down makes LXD
// unreachable for the daemon under test only — the real LXD, which other
// tests use at the same time, is never stopped.
type socketProxy struct {
	path, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func (p *socketProxy) up(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// down closes the listener and cuts every forwarded connection.
func (p *socketProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	_ = os.Remove(p.path)
}

// TestProjectsLXDOutage makes LXD unreachable while the daemon runs: the
// project API answers 503 unavailable, and everything recovers by itself
// when LXD answers again (lifecycle events included).
func TestProjectsLXDOutage(t *testing.T) {
	testkit.LXD(t)
	target, err := lxdexec.DiscoverSocket()
	if err != nil {
		testkit.Missing(t, "lxd socket: %v", err)
	}
	dir, err := os.MkdirTemp("", "lxdp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	proxy := &socketProxy{path: filepath.Join(dir, "unix.socket"), target: target, conns: map[net.Conn]bool{}}
	proxy.up(t)
	defer proxy.down()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := lxdexec.Connect(ctx, lxdexec.Options{Socket: proxy.path})
	if err != nil {
		t.Fatal(err)
	}
	e := newProjectEnv(t, projectEnvOpts{lxd: cl, resync: 200 * time.Millisecond})
	recDone := make(chan struct{})
	go func() { defer close(recDone); _ = e.rec.Run(ctx) }()
	defer func() { cancel(); <-recDone }()
	name := uniqueProject("outage")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
	if status, body := e.do("POST", "/v1/projects/"+name+"/start", "alice", nil); status != 200 {
		t.Fatalf("start: %d %s", status, body)
	}

	proxy.down()
	for _, r := range []struct{ method, path string }{
		{"POST", "/v1/projects/" + name + "/start"},
		{"POST", "/v1/projects/" + name + "/stop"},
		{"POST", "/v1/projects/" + name + "/exec"},
	} {
		var body any
		if strings.HasSuffix(r.path, "/exec") {
			body = api.ExecRequest{Command: []string{"true"}}
		}
		status, resp := e.do(r.method, r.path, "alice", body)
		if status != http.StatusServiceUnavailable || errorCode(t, resp) != api.CodeUnavailable || !strings.Contains(string(resp), "lxd") {
			t.Errorf("%s %s during the outage: %d %s, want 503 unavailable naming lxd", r.method, r.path, status, resp)
		}
	}
	// Reads of stored state still work.
	if status, _ := e.do("GET", "/v1/projects/"+name, "alice", nil); status != 200 {
		t.Errorf("GET project during the outage: %d", status)
	}
	testkit.Eventually(t, 90*time.Second, func() bool { return errors.Is(e.rec.Available(), errUnavailableClass()) }, "reconciler notices the outage")

	proxy.up(t)
	testkit.Eventually(t, 90*time.Second, func() bool {
		status, _ := e.do("POST", "/v1/projects/"+name+"/start", "alice", nil)
		return status == 200 && e.rec.Available() == nil
	}, "recovery")
	// Lifecycle events flow again: a stop behind the daemon's back shows.
	if err := testkit.LXD(t).SetState(context.Background(), p.Container, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 90*time.Second, func() bool {
		_, body := e.do("GET", "/v1/projects/"+name, "alice", nil)
		return strings.Contains(string(body), `"status":"stopped"`)
	}, "stored status stopped after recovery")
}

func errUnavailableClass() error { return provisioning.ErrUnavailable }
