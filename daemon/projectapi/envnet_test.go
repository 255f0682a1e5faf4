package projectapi

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/egress"
	"remote/internal/testkit"
)

// fixedNames is the egress proxy's DNS in these tests.
type fixedNames map[string]string

func (n fixedNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// theInternet is the tests' stand-in for a public address: a second
// loopback address the egress proxy is told is public.
var theInternet = netip.MustParseAddr("127.0.0.2")

// mathxWheel is the wheel of a one-module package, mathx 1.0.
func mathxWheel(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for _, f := range []struct{ name, body string }{
		{"mathx/__init__.py", "def double(x):\n    return 2 * x\n"},
		{"mathx-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mathx\nVersion: 1.0\n"},
		{"mathx-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: remote-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"mathx-1.0.dist-info/RECORD", "mathx/__init__.py,,\nmathx-1.0.dist-info/METADATA,,\nmathx-1.0.dist-info/WHEEL,,\nmathx-1.0.dist-info/RECORD,,\n"},
	} {
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// packageIndex serves a PEP 503 simple index holding mathx on
// addr:port, to requests authenticated with user __token__ and token
// (HTTP basic, as pip sends an index URL's credentials); others get 401.
// served counts the wheels it served.
func packageIndex(t *testing.T, addr, token string) (port string, served *atomic.Int32) {
	t.Helper()
	wheel := mathxWheel(t)
	sum := sha256.Sum256(wheel)
	served = &atomic.Int32{}
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "__token__" || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="index"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/simple/mathx/":
			fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/packages/mathx-1.0-py3-none-any.whl#sha256=%s\">mathx-1.0-py3-none-any.whl</a></body></html>\n", hex.EncodeToString(sum[:]))
		case "/packages/mathx-1.0-py3-none-any.whl":
			served.Add(1)
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(wheel)
		default:
			http.NotFound(w, r)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, served
}

var mathCalcPy = "from mathx import double\n\n\ndef quad(x):\n    return double(double(x))\n"
var mathTestPy = "import unittest\n\nfrom calc import quad\n\n\nclass TestQuad(unittest.TestCase):\n    def test_quad(self):\n        self.assertEqual(quad(2), 8)\n"

// blockedHost reports whether evs hold system/egress_blocked naming host.
func blockedHost(evs []api.Event, host string) bool {
	for _, ev := range evs {
		if ev.Type == api.EventSystem && ev.Subtype == api.SubtypeEgressBlocked && strings.Contains(string(ev.Data), `"host":"`+host+`"`) {
			return true
		}
	}
	return false
}

// TestEnvironmentAcceptance is the project environment end to end: real
// LXD, the daemon's egress proxy, a real git server. A Python
// repository's tests need mathx, which only the operator's stand-in
// package index has (on "the internet", pkg.test); the index wants a
// token, the project secret INDEX_TOKEN. The project's network is
// allowlist with nothing of its own; its environment's setup makes a
// venv and pip-installs mathx from the index with the secret, through
// the egress proxy, allowed to pkg.test by environment.network for the
// setup only. The agent's turn then runs the tests with no network and
// they pass; its own curl to the index is refused (egress_blocked naming
// pkg.test), and so is the setup's proxy credential it finds on disk
// (captured by the setup: 407). A second chat starts from the cached
// environment and runs the maintenance, not the setup; a changed setup
// rebuilds; a failing one is not cached and runs again at the next
// turn. The index token is in no event, not in the agent's environment,
// no file of the container, not in the cached snapshot, not in LXD's
// instance config nor the daemon's log; the setup's credential neither
// (but the file the setup wrote it to).
func TestEnvironmentAcceptance(t *testing.T) {
	const token = "tok_accept_0123456789abcd"
	const indexToken = "idx_s3cr3t_5f4e3d2c1b0a"
	testkit.LXD(t)
	indexPort, served := packageIndex(t, theInternet.String(), indexToken)
	e := newRepoEnv(t, token, func(o *projectEnvOpts) {
		o.network = &egress.Config{Mode: api.NetworkAllowlist}
		o.netResolver = fixedNames{"pkg.test": theInternet.String()}
		o.netPublic = func(a netip.Addr) bool { return a == theInternet || egress.Public(a) }
	})
	url := e.git.NewRepo(t, "acme/mathcalc", map[string]string{"calc.py": mathCalcPy, "test_calc.py": mathTestPy})
	index := "pkg.test:" + indexPort
	env := api.ProjectEnvironment{
		Setup: "python3 -m venv .venv\n" +
			".venv/bin/pip install --no-cache-dir --no-deps --disable-pip-version-check --trusted-host pkg.test " +
			"--index-url \"http://__token__:${INDEX_TOKEN}@" + index + "/simple/\" mathx\n" +
			// What root in the container could read from the setup's
			// /proc/PID/environ while it runs: kept for the agent.
			"printf '%s\\n' \"$http_proxy\" > /workspace/.captured-proxy\n" +
			"echo \"SETUP-DONE token=$INDEX_TOKEN\"\n",
		Maintenance:  "echo MAINT-RAN\n",
		SetupSecrets: []string{"INDEX_TOKEN"},
		Network:      &api.EnvironmentNetwork{Allow: []string{index}},
	}
	proj, chat := e.envProject(t, url, token, &env, map[string]string{"INDEX_TOKEN": indexToken})
	if proj.Network == nil || proj.Network.Mode != api.NetworkAllowlist || len(proj.Network.Allow) != 0 {
		t.Fatalf("project network = %+v, want allowlist with nothing of its own", proj.Network)
	}
	if proj.Environment == nil || proj.Environment.Network == nil || len(proj.Environment.Network.Allow) != 1 {
		t.Fatalf("project environment = %+v", proj.Environment)
	}

	agent := ".venv/bin/python -m unittest -v 2>&1; echo \"TESTS-EXIT=$?\"; " +
		"curl -sS -o /dev/null -w 'AGENT-CURL=%{http_code}\\n' http://" + index + "/simple/mathx/; " +
		"curl -sS -o /dev/null -w 'REPLAY=%{http_code}\\n' -x \"$(cat .captured-proxy)\" http://" + index + "/simple/mathx/"
	evs := e.prompt(t, chat.ID, "alice", agent)
	text := turnText(evs)
	if got := envPhases(evs); got != "setup:started,setup:ready" {
		t.Fatalf("first turn's environment events = %q; setup output %q; agent %q", got, envOutput(evs), text)
	}
	if !strings.Contains(envOutput(evs), "SETUP-DONE token=[redacted]") || served.Load() != 1 {
		t.Fatalf("setup output %q, wheels served %d", envOutput(evs), served.Load())
	}
	if !strings.Contains(text, "Ran 1 test") || !strings.Contains(text, "TESTS-EXIT=0") {
		t.Fatalf("the agent's test run: %q", text)
	}
	if !strings.Contains(text, "AGENT-CURL=403") {
		t.Fatalf("the agent's own request to the index: %q, want 403 from the egress proxy", text)
	}
	if !strings.Contains(text, "REPLAY=407") {
		t.Fatalf("the agent replaying the setup's credential: %q, want 407", text)
	}
	testkit.Eventually(t, time.Minute, func() bool { return blockedHost(e.events(chat.ID), "pkg.test") },
		"system/egress_blocked naming pkg.test")
	// The agent's proxy is the project's own: no credential in it.
	if m := regexp.MustCompile(`(?m)^http_proxy=(.*)$`).FindStringSubmatch(text); m == nil || m[1] != "http://127.0.0.1:3128" {
		t.Fatalf("the agent's http_proxy = %v, want http://127.0.0.1:3128", m)
	}
	st := e.envStatus(t, proj.Name)
	if st.State != api.EnvironmentReady {
		t.Fatalf("status after setup = %+v", st)
	}
	key1 := st.CacheKey
	snaps := envSnapshots(t, proj.Container)
	if len(snaps) != 1 || snaps[0] != "env-"+key1[:32] {
		t.Fatalf("environment snapshots = %v", snaps)
	}
	captured, err := exec.Command("lxc", "exec", proj.Container, "--", "cat", "/workspace/.captured-proxy").CombinedOutput()
	if err != nil {
		t.Fatalf("read the captured proxy: %v %s", err, captured)
	}
	credential := regexp.MustCompile(`^http://setup:([0-9a-f]{64})@127\.0\.0\.1:3128$`).FindStringSubmatch(strings.TrimSpace(string(captured)))
	if credential == nil {
		t.Fatalf("the setup's http_proxy = %q, want a setup credential", captured)
	}

	// The index token, and the setup's credential, are nowhere they
	// should not be.
	source, err := exec.Command("lxc", "storage", "get", "default", "source").Output()
	if err != nil {
		t.Fatalf("lxc storage get default source: %v", err)
	}
	snapDir := strings.TrimSpace(string(source)) + "/containers-snapshots/" + proj.Container + "/" + snaps[0]
	if _, err := os.Stat(snapDir); err != nil {
		t.Fatalf("the cached environment's snapshot on the host: %v", err)
	}
	snapFiles, _ := exec.Command("grep", "-rlF", "--", indexToken, snapDir).CombinedOutput()
	files, _ := exec.Command("lxc", "exec", proj.Container, "--", "grep", "-rlF", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev",
		"--", indexToken, "/").CombinedOutput()
	config, err := exec.Command("lxc", "config", "show", "--expanded", proj.Container).CombinedOutput()
	if err != nil {
		t.Fatalf("lxc config show: %v %s", err, config)
	}
	all, _ := json.Marshal(e.events(chat.ID))
	e.mu.Lock()
	answers := e.answers
	e.mu.Unlock()
	for what, b := range map[string][]byte{"events": all, "agent's output and environment": []byte(text), "container's files": files,
		"cached snapshot": snapFiles, "LXD instance config": config, "daemon log": []byte(e.logs.String()), "API answers": answers} {
		if bytes.Contains(b, []byte(indexToken)) {
			t.Errorf("the index token is in the %s", what)
		}
		if what != "container's files" && what != "cached snapshot" && bytes.Contains(b, []byte(credential[1])) {
			t.Errorf("the setup's proxy credential is in the %s", what)
		}
	}
	if len(files) != 0 || len(snapFiles) != 0 {
		t.Errorf("grep for the index token: container %q, snapshot %q", files, snapFiles)
	}
	if strings.Contains(text, "INDEX_TOKEN") {
		t.Errorf("the agent's environment names the setup secret: %q", text)
	}

	// A second chat starts from the cached environment: maintenance,
	// not setup; the tests pass again, the index not asked.
	chat2 := e.chatIn(t, proj.Name)
	evs = e.prompt(t, chat2.ID, "alice", ".venv/bin/python -m unittest 2>&1; echo \"TESTS-EXIT=$?\"")
	if got := envPhases(evs); got != "maintenance:started,maintenance:ready" || !strings.Contains(envOutput(evs), "MAINT-RAN") {
		t.Fatalf("second chat's environment events = %q (%q)", got, envOutput(evs))
	}
	if text := turnText(evs); !strings.Contains(text, "TESTS-EXIT=0") || served.Load() != 1 {
		t.Fatalf("second chat's tests: %q; wheels served %d", text, served.Load())
	}
	if st := e.envStatus(t, proj.Name); st.CacheKey != key1 {
		t.Fatalf("the cache key changed without a change: %+v", st)
	}

	// A changed setup rebuilds at the next turn, under a new key.
	env.Setup += "echo V2\n"
	if status, body := e.call(t, "PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Environment: &env}); status != http.StatusOK {
		t.Fatalf("patch environment: %d %s", status, body)
	}
	evs = e.prompt(t, chat2.ID, "alice", ".venv/bin/python -m unittest 2>&1; echo \"TESTS-EXIT=$?\"")
	if got := envPhases(evs); got != "setup:started,setup:ready" || !strings.Contains(envOutput(evs), "V2") {
		t.Fatalf("turn after a changed setup: %q (%q)", got, envOutput(evs))
	}
	if st := e.envStatus(t, proj.Name); st.CacheKey == key1 || st.State != api.EnvironmentReady {
		t.Fatalf("status after the rebuild = %+v", st)
	}

	// A failing setup is not cached: state failed, the agent never runs,
	// the next turn runs the setup again.
	bad := env
	bad.Setup = "echo BROKEN-SETUP\nexit 3\n"
	if status, body := e.call(t, "PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Environment: &bad}); status != http.StatusOK {
		t.Fatalf("patch environment: %d %s", status, body)
	}
	evs = e.prompt(t, chat2.ID, "alice", "echo AGENT-RAN")
	if got := envPhases(evs); got != "setup:started,setup:failed" || strings.Contains(turnText(evs), "AGENT-RAN") {
		t.Fatalf("a failing setup: %q, agent %q", got, turnText(evs))
	}
	st = e.envStatus(t, proj.Name)
	if st.State != api.EnvironmentFailed || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Fatalf("status after a failing setup = %+v", st)
	}
	for _, s := range envSnapshots(t, proj.Container) {
		if s == "env-"+st.CacheKey[:32] {
			t.Fatalf("the failed setup was cached as %s", s)
		}
	}
	evs = e.prompt(t, chat2.ID, "alice", "echo AGENT-RAN")
	if got := envPhases(evs); got != "setup:started,setup:failed" {
		t.Fatalf("the turn after a failed setup: %q, want the setup again", got)
	}
}
