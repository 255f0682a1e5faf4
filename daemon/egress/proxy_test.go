package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"remote/api"
)

// names is a resolver of fixed names (the test's DNS): a name of the
// package index on loopback, and a hostile name that resolves to it.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type blocked struct {
	mu   sync.Mutex
	seen []string
}

func (b *blocked) add(_ api.Project, host string, port int, method, _ string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, fmt.Sprintf("%s %s:%d", method, host, port))
}

func (b *blocked) has(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, x := range b.seen {
		if x == s {
			return true
		}
	}
	return false
}

type fixture struct {
	srv     *Server
	sock    string
	proj    *api.Project
	mu      sync.Mutex
	backend *httptest.Server
	port    string
	hosts   chan string // Host headers the backend saw
	blocked *blocked
}

// newFixture serves a "package index" on loopback and an egress socket
// for one project whose network is net; the operator allows operator.
func newFixture(t *testing.T, network *api.ProjectNetwork, operator ...string) *fixture {
	t.Helper()
	f := &fixture{hosts: make(chan string, 16), blocked: &blocked{}}
	f.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case f.hosts <- r.Host:
		default:
		}
		_, _ = io.WriteString(w, "index of packages\n")
	}))
	t.Cleanup(f.backend.Close)
	_, f.port, _ = net.SplitHostPort(f.backend.Listener.Addr().String())
	for i := range operator {
		operator[i] = strings.ReplaceAll(operator[i], "PORT", f.port)
	}
	pol, err := Compile(Config{Allow: operator})
	if err != nil {
		t.Fatal(err)
	}
	f.proj = &api.Project{ID: "0123456789abcdef", Name: "p", Network: network}
	f.srv, err = New(Options{
		Dir: t.TempDir(),
		Lookup: func(string) (api.Project, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return *f.proj, nil
		},
		Policy:   pol,
		Blocked:  f.blocked.add,
		Resolver: names{"pkg.test": "127.0.0.1", "evil.test": "127.0.0.1", "public.test": "127.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.srv.Close() })
	if f.sock, err = f.srv.Socket(f.proj.ID); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", f.sock)
		},
		DisableKeepAlives: true,
	}}
}

// raw sends one request as written and returns the status line.
func (f *fixture) raw(t *testing.T, req string) string {
	t.Helper()
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read answer to %q: %v", req, err)
	}
	return strings.TrimSpace(line)
}

func (f *fixture) get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := f.client().Get(strings.ReplaceAll(u, "PORT", f.port))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEgressAllowlist(t *testing.T) {
	f := newFixture(t, &api.ProjectNetwork{Mode: api.NetworkAllowlist}, "pkg.test:PORT")
	if code, body := f.get(t, "http://pkg.test:PORT/simple/"); code != 200 || body != "index of packages\n" {
		t.Fatalf("allowed host: %d %q", code, body)
	}
	if got := <-f.hosts; got != "pkg.test:"+f.port {
		t.Fatalf("backend saw Host %q", got)
	}
	if code, _ := f.get(t, "http://other.test:PORT/"); code != http.StatusForbidden {
		t.Fatalf("unlisted host: %d, want 403", code)
	}
	if !f.blocked.has("GET other.test:" + f.port) {
		t.Fatalf("no egress_blocked for other.test: %v", f.blocked.seen)
	}
	// CONNECT through the tunnel to the allowed host.
	if got := f.raw(t, "CONNECT pkg.test:"+f.port+" HTTP/1.1\r\nHost: pkg.test\r\n\r\n"); got != "HTTP/1.1 200 Connection Established" {
		t.Fatalf("CONNECT to an allowed host: %q", got)
	}
	// The project's allow list is read per connection.
	if code, _ := f.get(t, "http://public.test:PORT/"); code != http.StatusForbidden {
		t.Fatalf("before allow: %d", code)
	}
	f.mu.Lock()
	f.proj.Network = &api.ProjectNetwork{Mode: api.NetworkAllowlist, Allow: []string{"public.test:" + f.port}}
	f.mu.Unlock()
	// public.test resolves to loopback here: a project's allow never
	// reaches a private address, so this stays refused for that reason.
	if code, body := f.get(t, "http://public.test:PORT/"); code != http.StatusForbidden || !strings.Contains(body, "private") {
		t.Fatalf("a project-allowed name resolving to loopback: %d %q", code, body)
	}
}

func TestEgressOff(t *testing.T) {
	f := newFixture(t, &api.ProjectNetwork{Mode: api.NetworkOff}, "pkg.test:PORT")
	if code, _ := f.get(t, "http://pkg.test:PORT/"); code != http.StatusForbidden {
		t.Fatalf("off mode reached an operator-allowed host: %d", code)
	}
	if !f.blocked.has("GET pkg.test:" + f.port) {
		t.Fatalf("no egress_blocked: %v", f.blocked.seen)
	}
}

// TestAttackEgressPrivateAddress: a container asks its proxy for a
// private or loopback address directly, and for a name that resolves to
// loopback. Defences: a bare IP address is refused unless the operator
// names it; a name is resolved by the daemon and only a public address
// is dialled (open mode too, where any name is allowed).
func TestAttackEgressPrivateAddress(t *testing.T) {
	for _, mode := range []string{api.NetworkAllowlist, api.NetworkOpen} {
		f := newFixture(t, &api.ProjectNetwork{Mode: mode, Allow: []string{"evil.test:*"}})
		for _, req := range []string{
			"CONNECT 127.0.0.1:" + f.port + " HTTP/1.1\r\nHost: x\r\n\r\n",
			"CONNECT [::ffff:127.0.0.1]:" + f.port + " HTTP/1.1\r\nHost: x\r\n\r\n",
			"CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n",
			"CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: x\r\n\r\n",
			"GET http://127.0.0.1:" + f.port + "/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
			"GET http://2130706433:" + f.port + "/ HTTP/1.1\r\nHost: x\r\n\r\n",
			"CONNECT evil.test:" + f.port + " HTTP/1.1\r\nHost: x\r\n\r\n",
			"GET http://evil.test:" + f.port + "/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		} {
			if got := f.raw(t, req); !strings.HasPrefix(got, "HTTP/1.1 403") {
				t.Errorf("%s: %q reached through: %q", mode, strings.SplitN(req, "\r\n", 2)[0], got)
			}
		}
		select {
		case h := <-f.hosts:
			t.Errorf("%s: the loopback server was reached (Host %q)", mode, h)
		default:
		}
		if !f.blocked.has("CONNECT evil.test:" + f.port) {
			t.Errorf("%s: no egress_blocked for evil.test: %v", mode, f.blocked.seen)
		}
	}
}

// TestAttackEgressDaemonSocket: the container names the daemon's own
// socket (or another Unix socket) as a target. Defence: the proxy dials
// TCP to a checked address only, never a path.
func TestAttackEgressDaemonSocket(t *testing.T) {
	f := newFixture(t, &api.ProjectNetwork{Mode: api.NetworkOpen})
	daemonSock := filepath.Join(t.TempDir(), "remoted.sock")
	l, err := net.Listen("unix", daemonSock)
	if err != nil {
		t.Fatal(err)
	}
	reached := make(chan struct{}, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			reached <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	for _, req := range []string{
		"CONNECT " + daemonSock + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT unix:" + daemonSock + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://unix:" + daemonSock + "/v1/info HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://localhost:" + f.port + "/v1/info HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET " + daemonSock + " HTTP/1.1\r\nHost: " + daemonSock + "\r\n\r\n",
	} {
		got := f.raw(t, req)
		if !strings.HasPrefix(got, "HTTP/1.1 4") {
			t.Errorf("%q: %q, want a 4xx refusal", strings.SplitN(req, "\r\n", 2)[0], got)
		}
	}
	select {
	case <-reached:
		t.Fatal("the daemon's socket was reached through the egress proxy")
	default:
	}
}

// TestAttackEgressHostSmuggling: a request names an allowed host in its
// URL and another in its Host header, or only a Host header (origin
// form). Defences: the decision and the dial follow the request line's
// URL only, the forwarded Host is that URL's authority, and an
// origin-form request is refused.
func TestAttackEgressHostSmuggling(t *testing.T) {
	f := newFixture(t, &api.ProjectNetwork{Mode: api.NetworkAllowlist}, "pkg.test:PORT")
	got := f.raw(t, "GET http://pkg.test:"+f.port+"/ HTTP/1.1\r\nHost: internal.test\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("allowed URL: %q", got)
	}
	if h := <-f.hosts; h != "pkg.test:"+f.port {
		t.Fatalf("the backend saw Host %q: the smuggled header went through", h)
	}
	if got := f.raw(t, "GET / HTTP/1.1\r\nHost: pkg.test:"+f.port+"\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
		t.Fatalf("origin-form request with only a Host header: %q", got)
	}
	if got := f.raw(t, "GET http://other.test:"+f.port+"/ HTTP/1.1\r\nHost: pkg.test:"+f.port+"\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
		t.Fatalf("an unlisted URL with an allowed Host header: %q", got)
	}
	if got := f.raw(t, "CONNECT other.test:"+f.port+" HTTP/1.1\r\nHost: pkg.test:"+f.port+"\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
		t.Fatalf("CONNECT to an unlisted host with an allowed Host header: %q", got)
	}
}

func TestPatterns(t *testing.T) {
	c, err := Compile(Config{ProjectMayAllow: []string{"*.example.org", "pypi.org"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"pypi.org", "files.example.org", "*.cdn.example.org", "pypi.org:443"} {
		if _, err := c.CheckProjectAllow(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1", "[::1]", "*", "evil.com", "example.org", "pypi.org:8080", "pypi.org:*", "a b", "0x7f.1", "2130706433", ""} {
		if _, err := c.CheckProjectAllow(bad); err == nil {
			t.Errorf("%q accepted as a project's allow", bad)
		}
	}
	def, _ := Compile(Config{})
	if _, err := def.CheckProjectAllow("registry.npmjs.org"); err != nil {
		t.Errorf("default project_may_allow refused a public name: %v", err)
	}
	if _, err := def.CheckProjectAllow("127.0.0.1"); err == nil {
		t.Error("default project_may_allow took an IP address")
	}
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "192.168.0.1", "169.254.169.254", "::1", "fe80::1", "fd00::1", "::ffff:10.0.0.1", "100.64.0.1", "0.0.0.0"} {
		if Public(netip.MustParseAddr(a)) {
			t.Errorf("%s taken as public", a)
		}
	}
	if !Public(netip.MustParseAddr("151.101.0.223")) {
		t.Error("a public address taken as private")
	}
}

// TestEgressForgetCutsTunnels: a deleted project's open tunnels end with
// its socket.
func TestEgressForgetCutsTunnels(t *testing.T) {
	f := newFixture(t, &api.ProjectNetwork{Mode: api.NetworkAllowlist}, "pkg.test:PORT")
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "CONNECT pkg.test:"+f.port+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("CONNECT: %q %v", line, err)
	}
	if _, err := r.ReadString('\n'); err != nil { // the blank line
		t.Fatal(err)
	}
	// The tunnel is tracked before its 200 is written.
	f.srv.Forget(f.proj.ID)
	if _, err := io.ReadAll(r); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read after Forget: %v", err)
	}
	if _, err := net.Dial("unix", f.sock); err == nil {
		t.Fatal("the forgotten project's socket still answers")
	}
}
