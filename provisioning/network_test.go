package provisioning

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/egress"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning/netdev"
)

// fixedNames is the test's DNS: the package index's name resolves to
// the host's loopback, where it listens.
type fixedNames map[string]string

func (n fixedNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// shExit runs script in the container and returns its exit code and
// output (stdout and stderr).
func shExit(t testing.TB, cl *lxdexec.Client, container, script string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ex, err := cl.Exec(ctx, container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	_ = ex.Stdin().Close()
	var out, errb strings.Builder
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&out, ex.Stdout()) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&errb, ex.Stderr()) }()
	wg.Wait()
	code, err := ex.Wait()
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return code, out.String() + errb.String()
}

// TestNetworkAllowlistLXD: a busybox container of an allowlist project
// reaches a package index on the host's loopback through its egress
// proxy (wget with the proxy variables the preparer set), and nothing
// else; off refuses the same host; allowing through the project's list
// makes a retry work without a restart.
func TestNetworkAllowlistLXD(t *testing.T) {
	cl := testkit.LXD(t)
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "simple index of "+r.Host+"\n")
	}))
	t.Cleanup(index.Close)
	_, port, _ := net.SplitHostPort(index.Listener.Addr().String())

	name := testkit.NewContainer(t, cl, "egress")
	proj := api.Project{ID: testProjectID(name), Name: "egress", Container: name,
		Network: &api.ProjectNetwork{Mode: api.NetworkAllowlist}}
	markContainer(t, cl, name, proj)
	st := newMemStore(proj)

	policy, err := egress.Compile(egress.Config{Allow: []string{"pkg.test:" + port}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var blocked []string
	srv, err := egress.New(egress.Options{Dir: t.TempDir(), Policy: policy,
		Lookup: func(string) (api.Project, error) { return st.Project(proj.Name) },
		Blocked: func(_ api.Project, host string, port int, method, _ string) {
			mu.Lock()
			defer mu.Unlock()
			blocked = append(blocked, fmt.Sprintf("%s:%d", host, port))
		},
		Resolver: fixedNames{"pkg.test": "127.0.0.1", "other.test": "127.0.0.1", "mirror.test": "127.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	prep, err := New(Options{LXD: cl, Projects: st, Image: testkit.TestImage, Egress: srv})
	if err != nil {
		t.Fatal(err)
	}
	if err := prep.SyncNetwork(context.Background(), proj); err != nil {
		t.Fatalf("sync network: %v", err)
	}
	inst, _, err := cl.Instance(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	for dev, d := range inst.ExpandedDevices {
		if d["type"] == "nic" {
			t.Errorf("an allowlist container keeps NIC %s: %v", dev, d)
		}
	}
	wasBlocked := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range blocked {
			if b == s {
				return true
			}
		}
		return false
	}
	wget := func(host string) (int, string) {
		// The environment comes from the instance's environment.* config.
		// (No -T: busybox 1.35 wget crashes with -T through a proxy.)
		return shExit(t, cl, name, "wget -q -O - http://"+host+":"+port+"/simple/")
	}
	if code, out := wget("pkg.test"); code != 0 || !strings.Contains(out, "simple index of pkg.test:"+port) {
		t.Fatalf("wget of the allowed index: exit %d: %s", code, out)
	}
	if code, out := wget("other.test"); code == 0 {
		t.Fatalf("wget of an unlisted host worked: %s", out)
	}
	if !wasBlocked("other.test:" + port) {
		t.Fatalf("no egress_blocked for other.test: %v", blocked)
	}
	if code, out := wget("127.0.0.1"); code == 0 {
		t.Fatalf("wget of a bare IP through the proxy worked: %s", out)
	}
	if code, out := shExit(t, cl, name, "http_proxy= wget -q -O - http://127.0.0.1:"+port+"/ 2>&1"); code == 0 {
		t.Fatalf("the host's loopback was reached without the proxy: %s", out)
	}
	// A public name allowed by the project: the retry works once listed
	// (the proxy reads the list per connection). mirror.test resolves to
	// loopback here, so a project's allow must still not reach it.
	if _, err := st.UpdateProject(proj.Name, func(p *api.Project) error {
		p.Network.Allow = []string{"mirror.test:" + port}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if code, out := wget("mirror.test"); code == 0 {
		t.Fatalf("a project-allowed name resolving to loopback was reached: %s", out)
	}
	// Off: even the operator's hosts are refused.
	if _, err := st.UpdateProject(proj.Name, func(p *api.Project) error {
		p.Network.Mode = api.NetworkOff
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if code, out := wget("pkg.test"); code == 0 {
		t.Fatalf("off mode reached the index: %s", out)
	}
	// Open again: the proxy device and the environment go.
	open := proj
	open.Network = &api.ProjectNetwork{Mode: api.NetworkOpen}
	if err := prep.SyncNetwork(context.Background(), open); err != nil {
		t.Fatal(err)
	}
	inst, _, err = cl.Instance(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inst.Devices[netdev.Device]; ok || inst.Config["environment.http_proxy"] != "" {
		t.Fatalf("open mode kept the egress device or environment: %v %v", inst.Devices, inst.Config)
	}
}
