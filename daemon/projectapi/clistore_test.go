package projectapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/daemon/hostapi"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/fakeopenai"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/clistore"
	"remote/providers/codex"
	"remote/provisioning"
)

// testStore returns a CLI store in a temp dir with the pinned CLIs of
// build/npm imported (the same npm tree `remotectl providers install`
// would fetch) and selected.
func testStore(t testing.TB, ids ...providers.ProviderID) *clistore.Store {
	t.Helper()
	for _, id := range ids {
		switch id {
		case providers.Claude:
			testkit.ClaudeBinary(t)
		case providers.Codex:
			testkit.CodexBinary(t)
		}
	}
	st := clistore.New(filepath.Join(t.TempDir(), "clis"))
	nm := filepath.Join(testkit.Root(), "build", "npm", "node_modules")
	for _, id := range ids {
		if _, err := st.Import(context.Background(), id, "", nm, clistore.InstallOptions{Select: true}); err != nil {
			t.Fatalf("import %s: %v", id, err)
		}
	}
	return st
}

// cloneVersion makes version "to" of p a hard-linked copy of "from" (a
// second version for the switch tests, without another 373 MB).
func cloneVersion(t testing.TB, st *clistore.Store, p providers.ProviderID, from, to string) {
	t.Helper()
	src := filepath.Join(st.Dir(), string(p), from)
	dst := filepath.Join(st.Dir(), string(p), to)
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return os.Link(path, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// claudeStoreEnv is a project env whose Claude comes from the CLI store
// (no check, install or install_files: the defaults' StoreCLI), talking
// to a fake model server through a proxy device.
func claudeStoreEnv(t testing.TB, st *clistore.Store, push bool) (*projectEnv, *fakeanthropic.Server) {
	e, model, _ := claudeEnv(t, st, push, false)
	return e, model
}

// claudeEnv is claudeStoreEnv; legacy instead pushes the binary and its
// libraries with install_files (the push path, as before the store).
// It also returns the proxy profile its containers get.
func claudeEnv(t testing.TB, st *clistore.Store, push, legacy bool, more ...func(*projectEnvOpts)) (*projectEnv, *fakeanthropic.Server, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	model := fakeanthropic.NewListener(t, ln)
	profile := proxyProfileTB(t, port)
	setup := provisioning.DefaultSetups("/root", t.TempDir())[providers.Claude]
	setup.Credentials = nil
	steps := &provisioning.StepsOptions{
		Providers: map[providers.ProviderID]provisioning.ProviderSetup{providers.Claude: setup},
		CLIStore:  st, CLIStorePush: push,
	}
	if legacy {
		bin := testkit.ClaudeBinary(t)
		setup.StoreCLI, setup.InstallFiles = "", []provisioning.File{{Host: bin, Container: "/usr/local/bin/claude", Mode: 0o755}}
		for _, lib := range glibcLibs {
			setup.InstallFiles = append(setup.InstallFiles, provisioning.File{Host: lib, Container: lib, Mode: 0o755})
		}
		steps = &provisioning.StepsOptions{Providers: map[providers.ProviderID]provisioning.ProviderSetup{providers.Claude: setup}}
	}
	o := projectEnvOpts{
		profiles: []string{"default", profile},
		steps:    steps,
		providers: []func(providers.AdapterConfig) providers.Provider{func(ports providers.AdapterConfig) providers.Provider {
			ports.Binary = "claude" // found on the container's PATH: the store's link
			ports.Env = map[string]string{
				"ANTHROPIC_BASE_URL":                       fmt.Sprintf("http://127.0.0.1:%d", port),
				"ANTHROPIC_API_KEY":                        "sk-ant-test-dummy",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
				"DISABLE_AUTOUPDATER":                      "1",
			}
			ports.ProjectEnv = []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"}
			return claude.New(ports)
		}},
	}
	for _, f := range more {
		f(&o)
	}
	e := newProjectEnv(t, o)
	return e, model, profile
}

func (e *projectEnv) newChat(t testing.TB, provider, project string) api.Chat {
	t.Helper()
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: provider, Project: project})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	_ = json.Unmarshal(body, &chat)
	return chat
}

func (e *projectEnv) sh(t *testing.T, project, script string) (string, int) {
	t.Helper()
	out := e.execFrames(t, project, "alice", api.ExecRequest{Command: []string{"sh", "-c", script}})
	return joinStream(out, "stdout") + joinStream(out, "stderr"), exitCode(t, out)
}

func fileHash(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestProjectChatClaudeFromCLIStore: the store's Claude Code version
// directory is mounted read-only into a busybox project container (with
// the store's glibc, busybox has none), the real CLI runs from it for a
// project chat against the fake model server, a version switch applies to
// the next run while a running run keeps its version, and the container
// cannot write into the store.
func TestProjectChatClaudeFromCLIStore(t *testing.T) {
	testkit.LXD(t)
	st := testStore(t, providers.Claude)
	e, model := claudeStoreEnv(t, st, false)
	name := uniqueProject("store")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude"})
	chat := e.newChat(t, "claude", name)
	const v1, v2 = "2.1.328", "2.1.329"
	dir1 := filepath.Join(st.Dir(), "claude", v1)

	t.Run("first prompt runs claude from the mounted store", func(t *testing.T) {
		model.Push(fakeanthropic.Text("from the store"))
		evs := e.prompt(t, chat.ID, "alice", "hello")
		if !hasType(evs, api.EventComplete) || hasType(evs, api.EventError) || assistantText(evs) != "from the store" {
			t.Fatalf("run: %s", dump(evs))
		}
		inst, _, err := e.lxd.Instance(context.Background(), p.Container)
		if err != nil {
			t.Fatal(err)
		}
		d := inst.Devices["remote-cli-claude-"+v1]
		if d["type"] != "disk" || d["readonly"] != "true" || d["source"] != dir1 || d["path"] != "/opt/remote-cli/claude/"+v1 {
			t.Fatalf("store device %v", d)
		}
		out, code := e.sh(t, name, "claude --version; readlink /usr/local/bin/claude; grep -c ' /opt/remote-cli/claude/"+v1+" .* ro[, ]' /proc/mounts")
		if code != 0 || out != v1+" (Claude Code)\n/opt/remote-cli/claude/"+v1+"/claude\n1\n" {
			t.Fatalf("in the container: exit %d\n%s", code, out)
		}
	})

	t.Run("version switch applies to the next run, the running run keeps its own", func(t *testing.T) {
		cloneVersion(t, st, providers.Claude, v1, v2)
		running := e.newChat(t, "claude", name)
		sent := len(model.MessageRequests())
		model.Push(fakeanthropic.Slow(5*time.Second, fakeanthropic.Text("still on the old one")))
		if status, body := e.do("POST", "/v1/chats/"+running.ID+"/prompt", "alice", api.PromptRequest{Text: "take your time"}); status != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", status, body)
		}
		testkit.Eventually(t, 90*time.Second, func() bool { return len(model.MessageRequests()) > sent }, "the slow run reached the model")
		exe, _ := e.sh(t, name, "readlink /proc/$(pidof claude)/exe")
		if strings.TrimSpace(exe) != "/opt/remote-cli/claude/"+v1+"/claude" {
			t.Fatalf("running claude is %q", exe)
		}
		if _, err := st.Select(providers.Claude, v2); err != nil {
			t.Fatal(err)
		}
		model.Push(fakeanthropic.Text("on the new one"))
		evs := e.prompt(t, chat.ID, "alice", "again")
		if !hasType(evs, api.EventComplete) || assistantText(evs) != "on the new one" {
			t.Fatalf("next run: %s", dump(evs))
		}
		out, _ := e.sh(t, name, "readlink /usr/local/bin/claude")
		if out != "/opt/remote-cli/claude/"+v2+"/claude\n" {
			t.Fatalf("link after the switch: %q", out)
		}
		inst, _, _ := e.lxd.Instance(context.Background(), p.Container)
		if inst.Devices["remote-cli-claude-"+v2]["source"] != filepath.Join(st.Dir(), "claude", v2) || inst.Devices["remote-cli-claude-"+v1] == nil {
			t.Fatalf("devices after the switch: %v", inst.Devices)
		}
		testkit.Eventually(t, 90*time.Second, func() bool { return !e.hub.Running(running.ID) }, "the slow run ended")
		evs = e.events(running.ID)
		if !hasType(evs, api.EventComplete) || hasType(evs, api.EventError) || assistantText(evs) != "still on the old one" {
			t.Fatalf("the run started before the switch: %s", dump(evs))
		}
		// Once nothing runs from it, the earlier version's mount goes at
		// the next preparation.
		model.Push(fakeanthropic.Text("cleaned up"))
		if evs := e.prompt(t, chat.ID, "alice", "third"); !hasType(evs, api.EventComplete) {
			t.Fatalf("third run: %s", dump(evs))
		}
		inst, _, _ = e.lxd.Instance(context.Background(), p.Container)
		if inst.Devices["remote-cli-claude-"+v1] != nil || inst.Devices["remote-cli-claude-"+v2] == nil {
			t.Fatalf("devices after the old run ended: %v", inst.Devices)
		}
		if out, _ := e.sh(t, name, "ls /opt/remote-cli/claude/"+v1+"/claude"); !strings.Contains(out, "No such file") {
			t.Fatalf("old version still mounted: %q", out)
		}
	})
}

// TestProjectChatClaudeStorePushFallback: where LXD cannot mount the
// host path (remote LXD: CLIStorePush), the same version directory is
// pushed to the same paths, and the CLI runs.
func TestProjectChatClaudeStorePushFallback(t *testing.T) {
	testkit.LXD(t)
	st := testStore(t, providers.Claude)
	e, model := claudeStoreEnv(t, st, true)
	name := uniqueProject("storepush")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude"})
	chat := e.newChat(t, "claude", name)
	model.Push(fakeanthropic.Text("pushed"))
	evs := e.prompt(t, chat.ID, "alice", "hello")
	if !hasType(evs, api.EventComplete) || assistantText(evs) != "pushed" {
		t.Fatalf("run: %s", dump(evs))
	}
	inst, _, _ := e.lxd.Instance(context.Background(), p.Container)
	for name := range inst.Devices {
		if strings.HasPrefix(name, "remote-cli-") {
			t.Fatalf("push fallback added device %s", name)
		}
	}
}

// TestProjectChatCodexFromCLIStore: the store's (static) Codex runs from
// its read-only mount in a busybox project container for a project chat
// against the fake OpenAI server.
func TestProjectChatCodexFromCLIStore(t *testing.T) {
	testkit.LXD(t)
	st := testStore(t, providers.Codex)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	model := fakeopenai.Serve(ln)
	t.Cleanup(func() { _ = model.Close() })
	profile := proxyProfile(t, port)
	cfg := fakeopenai.CodexConfigTOML(fakeopenai.CodexConfig{BaseURL: fmt.Sprintf("http://127.0.0.1:%d/v1", port)})
	setup := provisioning.DefaultSetups("/root", t.TempDir())[providers.Codex]
	setup.Credentials = nil
	setup.Assets = []provisioning.File{{Content: []byte(cfg), Container: codex.ContainerCodexHome + "/config.toml", Mode: 0o600}}
	e := newProjectEnv(t, projectEnvOpts{
		profiles: []string{"default", profile},
		steps: &provisioning.StepsOptions{
			Providers: map[providers.ProviderID]provisioning.ProviderSetup{providers.Codex: setup},
			CLIStore:  st,
		},
		providers: []func(providers.AdapterConfig) providers.Provider{func(ports providers.AdapterConfig) providers.Provider {
			ports.Binary = "codex"
			ports.Env = map[string]string{"FAKE_OPENAI_API_KEY": "test-key"}
			ports.ProjectEnv = []string{"FAKE_OPENAI_API_KEY"}
			return codex.New(ports)
		}},
	})
	name := uniqueProject("storecodex")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "codex"})
	chat := e.newChat(t, "codex", name)
	model.Enqueue(fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("codex from the store")}})
	evs := e.prompt(t, chat.ID, "alice", "hello")
	if !hasType(evs, api.EventComplete) || assistantText(evs) != "codex from the store" {
		t.Fatalf("codex run: %s", dump(evs))
	}
	v := providers.TestedCodexVersion
	out, code := e.sh(t, name, "codex --version; readlink /usr/local/bin/codex")
	if code != 0 || out != "codex-cli "+v+"\n/opt/remote-cli/codex/"+v+"/bin/codex\n" {
		t.Fatalf("in the container: exit %d %q", code, out)
	}
	inst, _, _ := e.lxd.Instance(context.Background(), p.Container)
	if d := inst.Devices["remote-cli-codex-"+v]; d["readonly"] != "true" || d["source"] != filepath.Join(st.Dir(), "codex", v) {
		t.Fatalf("codex device %v", d)
	}
	if _, ok := inst.Devices["remote-cli-glibc"]; ok {
		t.Fatal("static codex got the glibc mount")
	}
}

// raw sends a JSON body as is, as root (the test's own uid).
func (ts *testServer) raw(method, path, body string) (int, string) {
	status, b := ts.rawDo(method, path, "", "application/json", body)
	return status, string(b)
}

// proxyProfileTB is proxyProfile for tests and benchmarks.
func proxyProfileTB(t testing.TB, port int) string {
	t.Helper()
	testkit.LXD(t)
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "lxc client: %v", err)
	}
	name := "rt-proxy-" + strings.TrimPrefix(testkit.ContainerName("p"), "t-p-")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("lxc", args...).CombinedOutput(); err != nil {
			t.Fatalf("lxc %v: %v\n%s", args, err, out)
		}
	}
	run("profile", "create", name)
	t.Cleanup(func() { _ = exec.Command("lxc", "profile", "delete", name).Run() })
	// The device is named after its port: a container given two of these
	// profiles (the model's and the git server's) keeps both devices,
	// where one name would leave only the last profile's.
	run("profile", "device", "add", name, fmt.Sprintf("port%d", port), "proxy",
		fmt.Sprintf("listen=tcp:127.0.0.1:%d", port), fmt.Sprintf("connect=tcp:127.0.0.1:%d", port), "bind=instance")
	return name
}

// TestAttackContainerWritesIntoStore: a project's agent (root in its
// container) tries to overwrite the store's binary and libraries, plant a
// file or delete one: every write is refused (read-only mount) and the
// host's store is unchanged.
func TestAttackContainerWritesIntoStore(t *testing.T) {
	testkit.LXD(t)
	st := testStore(t, providers.Claude)
	e, model := claudeStoreEnv(t, st, false)
	name := uniqueProject("storero")
	e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude"})
	chat := e.newChat(t, "claude", name)
	model.Push(fakeanthropic.Text("mounted"))
	if evs := e.prompt(t, chat.ID, "alice", "hello"); !hasType(evs, api.EventComplete) {
		t.Fatalf("run: %s", dump(evs))
	}
	const v1 = "2.1.328"
	dir1 := filepath.Join(st.Dir(), "claude", v1)
	before := fileHash(t, filepath.Join(dir1, "claude"))
	for _, script := range []string{
		"echo pwned > /opt/remote-cli/claude/" + v1 + "/claude",
		"touch /opt/remote-cli/claude/" + v1 + "/planted",
		"rm -f /opt/remote-cli/claude/" + v1 + "/lib/libc.so.6",
		"echo pwned > /lib/x86_64-linux-gnu/libc.so.6",
	} {
		out, code := e.sh(t, name, script)
		if code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("%q: exit %d %q, want a read-only refusal", script, code, out)
		}
	}
	if after := fileHash(t, filepath.Join(dir1, "claude")); after != before {
		t.Fatal("the container changed the store's claude binary")
	}
	if _, err := os.Stat(filepath.Join(dir1, "planted")); err == nil {
		t.Fatal("the container planted a file in the store")
	}
}

// storeServer is a test server with the CLI store routes.
func storeServer(t *testing.T, st *clistore.Store) *testServer {
	return newTestServer(t, nil, func(o *daemon.Options) {
		o.RouteProviders = append(o.RouteProviders, &hostapi.CLIStoreRoutes{Store: st})
	})
}

// TestAttackCLIStoreHostileVersion: a version that is a path ("../..",
// "../../etc") is refused with a 400 naming it, before anything touches
// the disk; nothing appears outside the store.
func TestAttackCLIStoreHostileVersion(t *testing.T) {
	root := t.TempDir()
	st := clistore.New(filepath.Join(root, "state", "clis"))
	ts := storeServer(t, st)
	for _, tc := range []struct{ path, body string }{
		{"/v1/providers/claude/select", `{"version":"../.."}`},
		{"/v1/providers/claude/select", `{"version":"../../../etc"}`},
		{"/v1/providers/claude/install", `{"version":"../..","untested":true}`},
		{"/v1/providers/codex/install", `{"version":"1.2.3/../../x","untested":true}`},
		{"/v1/providers/codex/install", `{"version":"latest","untested":true}`},
	} {
		status, body := ts.raw("POST", tc.path, tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, "invalid cli version") {
			t.Errorf("%s %s: %d %s, want 400 invalid cli version", tc.path, tc.body, status, body)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("something was written: %v", ents)
	}
	// An unknown provider and a not-installed version are named too.
	if status, body := ts.raw("POST", "/v1/providers/kimi/install", `{}`); status != 400 || !strings.Contains(body, `provider \"kimi\"`) {
		t.Errorf("kimi: %d %s", status, body)
	}
	if status, body := ts.raw("POST", "/v1/providers/claude/select", `{"version":"2.1.1"}`); status != 404 || !strings.Contains(body, "claude 2.1.1") {
		t.Errorf("not installed: %d %s", status, body)
	}
	// An untested version needs the explicit flag.
	if status, body := ts.raw("POST", "/v1/providers/claude/install", `{"version":"2.0.1"}`); status != 400 || !strings.Contains(body, "-untested") {
		t.Errorf("untested: %d %s", status, body)
	}
}

// TestCLIStoreRoutesList: GET /v1/cli-store lists the versions and the
// selected one; select switches.
func TestCLIStoreRoutesList(t *testing.T) {
	st := testStore(t, providers.Codex)
	cloneVersion(t, st, providers.Codex, providers.TestedCodexVersion, "0.170.0")
	ts := storeServer(t, st)
	status, body := ts.raw("GET", "/v1/cli-store", "")
	want := `[{"provider":"claude","versions":[],"tested":"2.1.328"},{"provider":"codex","versions":["0.169.0","0.170.0"],"selected":"0.169.0","tested":"0.169.0"}]`
	if status != 200 || strings.TrimSpace(body) != want {
		t.Fatalf("list: %d %s", status, body)
	}
	status, body = ts.raw("POST", "/v1/providers/codex/select", `{"version":"0.170.0"}`)
	if status != 200 || !strings.Contains(body, `"selected":"0.170.0"`) {
		t.Fatalf("select: %d %s", status, body)
	}
	if v, ok := st.Selected(providers.Codex); !ok || v.Version != "0.170.0" {
		t.Fatalf("selected %v %v", v, ok)
	}
}

// TestAttackCLIStoreInstallByLocalUser: a local user allowed on the
// socket, and a frontend (which may name any user), try to install or
// select a CLI that every project container would run: 403, nothing
// installed. Root passes the same check.
func TestAttackCLIStoreInstallByLocalUser(t *testing.T) {
	root := t.TempDir()
	routes := &hostapi.CLIStoreRoutes{Store: clistore.New(filepath.Join(root, "clis"))}
	var install, sel daemon.HandlerFunc
	for _, rt := range routes.Routes() {
		switch rt.Pattern {
		case "/v1/providers/{id}/install":
			install = rt.Handler
		case "/v1/providers/{id}/select":
			sel = rt.Handler
		}
	}
	for _, peer := range []*daemon.Peer{
		{UID: 1000, GID: 1000, Allowed: true},                // a local user in the allowed group
		{UID: 998, GID: 998, Allowed: true, MayAssert: true}, // a frontend (remote-web)
		{UID: 0, Allowed: true, MayAssert: true},             // root listed in frontend_uids
		nil,                                                  // no peer at all
	} {
		for name, h := range map[string]daemon.HandlerFunc{"install": install, "select": sel} {
			req := httptest.NewRequest("POST", "/v1/providers/claude/"+name, strings.NewReader(`{"version":"2.1.328"}`))
			req.Header.Set("Content-Type", "application/json")
			req.SetPathValue("id", "claude")
			if peer != nil {
				req = req.WithContext(daemon.WithPeer(req.Context(), peer))
			}
			err := h(httptest.NewRecorder(), req)
			status, body := daemon.ToHTTP(err)
			if status != http.StatusForbidden || body.Message != "only root (or the daemon's own user) acting as itself may install or select CLIs in the store: not through a frontend, nor naming another user in X-Remote-User" {
				t.Errorf("%s by %+v: %d %+v", name, peer, status, body)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "clis")); err == nil {
		t.Fatal("the store was written")
	}
	// Root gets past the check (to the store's own answer: not installed).
	req := httptest.NewRequest("POST", "/v1/providers/claude/select", strings.NewReader(`{"version":"2.1.328"}`))
	req.Header.Set("Content-Type", "application/json")
	req.SetPathValue("id", "claude")
	req = req.WithContext(daemon.WithPeer(req.Context(), &daemon.Peer{UID: 0, Allowed: true, MayAssert: true, Admin: true, Name: "root"}))
	if status, _ := daemon.ToHTTP(sel(httptest.NewRecorder(), req)); status != http.StatusNotFound {
		t.Fatalf("root: %d", status)
	}
}

// TestAttackCLIStoreThroughFrontend: remote-web running as root (the
// test runs as uid 0) relays its browser users. A relayed request, also
// one naming a browser user called "root", and a uid-0 peer naming
// another user, try to select a CLI version every project container would
// run: 403, the selection unchanged. Root acting as itself (remotectl as
// root: its own name, or none) selects.
func TestAttackCLIStoreThroughFrontend(t *testing.T) {
	testkit.NeedsRoot(t, "the frontend is root here: the test needs uid 0")
	st := testStore(t, providers.Codex)
	cloneVersion(t, st, providers.Codex, providers.TestedCodexVersion, "0.170.0")
	ts := storeServer(t, st)
	post := func(user string, frontend bool, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://remoted"+path, strings.NewReader(`{"version":"0.170.0"}`))
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.Header.Set(api.HeaderUser, user)
		}
		if frontend {
			req.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
		}
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	const refusal = `{"error":{"code":"forbidden","message":"only root (or the daemon's own user) acting as itself may install or select CLIs in the store: not through a frontend, nor naming another user in X-Remote-User"}}` + "\n"
	for _, tc := range []struct {
		user     string
		frontend bool
	}{{"alice", true}, {"root", true}, {"", true}, {"alice", false}} {
		for _, path := range []string{"/v1/providers/codex/select", "/v1/providers/codex/install"} {
			if status, body := post(tc.user, tc.frontend, path); status != http.StatusForbidden || body != refusal {
				t.Errorf("%s as %q (frontend mark %v): %d %s, want 403 %s", path, tc.user, tc.frontend, status, body, refusal)
			}
		}
		if v, _ := st.Selected(providers.Codex); v.Version != "0.169.0" {
			t.Fatalf("after %+v: selected %s, want 0.169.0 unchanged", tc, v.Version)
		}
	}
	for _, user := range []string{"root", ""} {
		if status, body := post(user, false, "/v1/providers/codex/select"); status != http.StatusOK || !strings.Contains(body, `"selected":"0.170.0"`) {
			t.Fatalf("root acting as itself (%q): %d %s", user, status, body)
		}
	}
}

// missingSourceLXD makes every store mount name a host path LXD does not
// have, as a cluster member without the store would see it.
type missingSourceLXD struct{ provisioning.LXD }

func (m missingSourceLXD) UpdateInstance(ctx context.Context, name string, patch lxdexec.InstancePatch, etag string) error {
	for dev, d := range patch.Devices {
		if strings.HasPrefix(dev, "remote-cli-") {
			d["source"] = "/nonexistent-store/" + dev
		}
	}
	return m.LXD.UpdateInstance(ctx, name, patch, etag)
}

// TestFaultCLIStoreNotMountable: LXD refuses the store's mount (the path
// is not on that member); the version tree is pushed instead, the run
// completes, and the fallback is logged.
func TestFaultCLIStoreNotMountable(t *testing.T) {
	testkit.LXD(t)
	st := testStore(t, providers.Claude)
	e, model, _ := claudeEnv(t, st, false, false, func(o *projectEnvOpts) {
		o.stepsLXD = func(l provisioning.LXD) provisioning.LXD { return missingSourceLXD{l} }
	})
	name := uniqueProject("storemiss")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude"})
	chat := e.newChat(t, "claude", name)
	model.Push(fakeanthropic.Text("pushed instead"))
	evs := e.prompt(t, chat.ID, "alice", "hello")
	if !hasType(evs, api.EventComplete) || assistantText(evs) != "pushed instead" {
		t.Fatalf("run: %s", dump(evs))
	}
	inst, _, _ := e.lxd.Instance(context.Background(), p.Container)
	for dev := range inst.Devices {
		if strings.HasPrefix(dev, "remote-cli-") {
			t.Fatalf("device %s left behind", dev)
		}
	}
	if !strings.Contains(e.logs.String(), "cli store not mountable, pushing the cli instead") {
		t.Fatalf("fallback not logged:\n%s", e.logs.String())
	}
}

// rawDo sends body as is, with contentType (when set) and user.
func (ts *testServer) rawDo(method, path, user, contentType, body string) (int, []byte) {
	ts.t.Helper()
	req, _ := http.NewRequest(method, "http://remoted"+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		req.Header.Set(api.HeaderUser, user)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}
