package projectapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/daemontest"
	"remote/daemon/egress"
	"remote/internal/testkit"
	"remote/lxdexec"
)

// testNames is the test's DNS. pkg.test is the operator's package index
// on the host's loopback; mirror.test is a host on "the internet" (the
// test's stand-in: a second loopback address the daemon is told is
// public); sneaky.test resolves to the host's loopback.
type testNames map[string]string

func (n testNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var internet = netip.MustParseAddr("127.0.0.2")

func serveIndex(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "index at "+r.Host+"\n")
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// execIn runs script in the container and returns its exit code and
// output.
func execIn(t *testing.T, cl *lxdexec.Client, container, script string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := cl.Exec(ctx, container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	_ = ex.Stdin().Close()
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	var mu sync.Mutex
	copyTo := func(r io.Reader) {
		defer wg.Done()
		b, _ := io.ReadAll(r)
		mu.Lock()
		out.Write(b)
		mu.Unlock()
	}
	go copyTo(ex.Stdout())
	go copyTo(ex.Stderr())
	wg.Wait()
	code, err := ex.Wait()
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return code, out.String()
}

// TestNetworkAllowRoute: an allowlist project's container reaches the
// operator's package index through its egress proxy; a host not listed
// fails and its running chat gets system/egress_blocked naming it; the
// owner allows it with POST /v1/projects/{name}/network/allow and the
// retry works without a restart. Off refuses the operator's index too.
func TestNetworkAllowRoute(t *testing.T) {
	indexPort := serveIndex(t, "127.0.0.1")
	mirrorPort := serveIndex(t, internet.String())
	d := daemontest.New(t, daemontest.Options{LXD: true, Network: &daemontest.Network{
		Config:   egress.Config{Allow: []string{"pkg.test:" + indexPort}},
		Resolver: testNames{"pkg.test": "127.0.0.1", "mirror.test": internet.String(), "sneaky.test": "127.0.0.1"},
		Public:   func(a netip.Addr) bool { return a == internet || egress.Public(a) },
	}})
	name := "net-" + strings.TrimPrefix(testkit.ContainerName("n"), "t-n-")
	testkit.CleanupProjectContainers(t, d.LXD, name)
	ctx := context.Background()
	alice := d.Client("alice")
	proj, err := alice.CreateProject(ctx, api.CreateProjectRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if proj.Network == nil || proj.Network.Mode != api.NetworkAllowlist {
		t.Fatalf("a new project's network %+v, want the default allowlist", proj.Network)
	}
	do := func(user, method, path string, body any) (int, string) {
		t.Helper()
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://remoted"+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Remote-User", user)
		resp, err := d.HTTPAs(0, 0).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := do("alice", "POST", "/v1/projects/"+name+"/start", nil); st != http.StatusOK {
		t.Fatalf("start: %d %s", st, body)
	}
	d.Claude.SetHold(true)
	chat, err := alice.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Project: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Prompt(ctx, chat.ID, api.PromptRequest{Text: "pip install"}); err != nil {
		t.Fatal(err)
	}
	waitNet(t, "the chat runs", func() bool { return d.System.Hub.Running(chat.ID) })

	wget := func(host, port string) (int, string) {
		return execIn(t, d.LXD, proj.Container, "wget -q -O - http://"+host+":"+port+"/simple/")
	}
	if code, out := wget("pkg.test", indexPort); code != 0 || !strings.Contains(out, "index at pkg.test:"+indexPort) {
		t.Fatalf("the operator's index through the proxy: exit %d %s", code, out)
	}
	if code, out := wget("mirror.test", mirrorPort); code == 0 {
		t.Fatalf("an unlisted host was reached: %s", out)
	}
	waitNet(t, "system/egress_blocked naming mirror.test", func() bool {
		evs, err := alice.Events(ctx, chat.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == api.EventSystem && ev.Subtype == api.SubtypeEgressBlocked &&
				strings.Contains(string(ev.Data), `"host":"mirror.test"`) && strings.Contains(string(ev.Data), `"method":"GET"`) {
				return true
			}
		}
		return false
	})

	// Another user cannot allow a host for alice's project.
	if st, body := do("bob", "POST", "/v1/projects/"+name+"/network/allow", api.NetworkAllowRequest{Host: "mirror.test:" + mirrorPort}); st != http.StatusNotFound {
		t.Fatalf("bob allowing a host: %d %s", st, body)
	}
	if st, body := do("alice", "POST", "/v1/projects/"+name+"/network/allow", api.NetworkAllowRequest{Host: "mirror.test:" + mirrorPort}); st != http.StatusOK {
		t.Fatalf("allow: %d %s", st, body)
	}
	if code, out := wget("mirror.test", mirrorPort); code != 0 || !strings.Contains(out, "index at mirror.test:"+mirrorPort) {
		t.Fatalf("the retry after allowing: exit %d %s", code, out)
	}

	// Off: the operator's index is refused too.
	if st, body := do("alice", "PATCH", "/v1/projects/"+name, api.PatchProjectRequest{Network: &api.ProjectNetwork{Mode: api.NetworkOff}}); st != http.StatusOK {
		t.Fatalf("patch to off: %d %s", st, body)
	}
	if code, out := wget("pkg.test", indexPort); code == 0 {
		t.Fatalf("off reached the operator's index: %s", out)
	}
	d.Claude.SetHold(false)
	_ = alice.Cancel(ctx, chat.ID)
}

// TestAttackNetworkAllowRoute: the owner (or hostile model output talking
// the owner into it) tries to allow what reaches the host's network: a
// bare IP address, a name that resolves to loopback, every host. Defences:
// a project's allow holds host names only within project_may_allow, and
// what it allows is dialled at a public address only.
func TestAttackNetworkAllowRoute(t *testing.T) {
	indexPort := serveIndex(t, "127.0.0.1")
	d := daemontest.New(t, daemontest.Options{LXD: true, Network: &daemontest.Network{
		Config:   egress.Config{ProjectMayAllow: []string{"*.example.org:*", "sneaky.test:*"}},
		Resolver: testNames{"sneaky.test": "127.0.0.1"},
	}})
	name := "atk-" + strings.TrimPrefix(testkit.ContainerName("n"), "t-n-")
	testkit.CleanupProjectContainers(t, d.LXD, name)
	ctx := context.Background()
	alice := d.Client("alice")
	proj, err := alice.CreateProject(ctx, api.CreateProjectRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string, body any) (int, string) {
		t.Helper()
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://remoted"+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Remote-User", "alice")
		resp, err := d.HTTPAs(0, 0).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, h := range []string{"127.0.0.1", "127.0.0.1:" + indexPort, "[::1]:80", "169.254.169.254", "*", "*:*", "evil.com", "2130706433", "localhost:" + indexPort} {
		if st, body := do("POST", "/v1/projects/"+name+"/network/allow", api.NetworkAllowRequest{Host: h}); st != http.StatusBadRequest {
			t.Errorf("allow %q: %d %s, want 400", h, st, body)
		}
		if st, body := do("PATCH", "/v1/projects/"+name, api.PatchProjectRequest{Network: &api.ProjectNetwork{Mode: api.NetworkAllowlist, Allow: []string{h}}}); st != http.StatusBadRequest {
			t.Errorf("patch allow %q: %d %s, want 400", h, st, body)
		}
	}
	// Within project_may_allow but resolving to loopback: stored, never
	// reached.
	if st, body := do("POST", "/v1/projects/"+name+"/network/allow", api.NetworkAllowRequest{Host: "sneaky.test:" + indexPort}); st != http.StatusOK {
		t.Fatalf("allow sneaky.test: %d %s", st, body)
	}
	if st, body := do("POST", "/v1/projects/"+name+"/start", nil); st != http.StatusOK {
		t.Fatalf("start: %d %s", st, body)
	}
	if code, out := execIn(t, d.LXD, proj.Container, "wget -q -O - http://sneaky.test:"+indexPort+"/"); code == 0 {
		t.Fatalf("a project-allowed name resolving to the host's loopback was reached: %s", out)
	}
	if code, out := execIn(t, d.LXD, proj.Container, "wget -q -O - http://127.0.0.1:"+indexPort+"/"); code == 0 {
		t.Fatalf("the host's loopback was reached from the container: %s", out)
	}
}

// waitNet polls cond until it holds (a wait, not a timing assertion).
func waitNet(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 90*time.Second, cond, "waiting for %s", what)
}
