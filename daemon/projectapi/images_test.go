package projectapi

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/daemon/hostapi"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning"
	"remote/provisioning/lxdconn"
)

// tinyImage is an LXD unified image tarball (metadata.yaml and a rootfs
// with one file of pad random bytes): unique per call, so its fingerprint
// is new to LXD.
func tinyImage(t *testing.T, pad int) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	meta := "architecture: x86_64\ncreation_date: 1767225600\nproperties:\n  description: remote test image\n  os: test\ntemplates: {}\n"
	random := make([]byte, pad)
	_, _ = rand.Read(random)
	for _, f := range []struct {
		name string
		mode int64
		typ  byte
		body []byte
	}{
		{"metadata.yaml", 0o644, tar.TypeReg, []byte(meta)},
		{"rootfs/", 0o755, tar.TypeDir, nil},
		{"rootfs/etc/", 0o755, tar.TypeDir, nil},
		{"rootfs/etc/random", 0o644, tar.TypeReg, random},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Typeflag: f.typ, Size: int64(len(f.body)), ModTime: time.Unix(1767225600, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// cleanupImage deletes, when the test ends, the alias and the image of
// fingerprint fp, both made by the test.
func cleanupImage(t *testing.T, cl *lxdexec.Client, alias, fp string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if alias != "" {
			_, _ = cl.Query(ctx, "DELETE", "/1.0/images/aliases/"+alias, nil, "")
		}
		if fp != "" {
			if r, err := cl.Query(ctx, "DELETE", "/1.0/images/"+fp, nil, ""); err == nil && r.Operation != "" {
				_, _ = cl.WaitOperation(ctx, r.Operation)
			}
		}
	})
}

func decodeImages(t *testing.T, body []byte) map[string]api.Image {
	t.Helper()
	var list []api.Image
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	out := map[string]api.Image{}
	for _, im := range list {
		out[im.Alias] = im
	}
	return out
}

// TestImageRoutesRealLXD: root imports an image tarball through POST
// /v1/images (LXD's API, no lxc); the answer and GET /v1/images show it
// with its fingerprint (the tarball's SHA-256) and size; the same tarball
// under a second alias is the same image; a project may then name it; a
// second import under the first alias moves it to the new image.
func TestImageRoutesRealLXD(t *testing.T) {
	alias, alias2 := testkit.ContainerName("img"), testkit.ContainerName("img2")
	// alias is imported but not in [projects] allowed_images: a user never
	// sees it, an administrator does.
	e := newProjectEnv(t, projectEnvOpts{images: []string{testkit.TestImage, alias2}})
	tarball := tinyImage(t, 1024)
	fp := sha(tarball)
	cleanupImage(t, e.lxd, alias, fp)
	cleanupImage(t, e.lxd, alias2, "")

	status, body := e.do("POST", "/v1/images?alias="+alias, "", tarball)
	if status != http.StatusCreated {
		t.Fatalf("import: %d %s", status, body)
	}
	var im api.Image
	if err := json.Unmarshal(body, &im); err != nil {
		t.Fatal(err)
	}
	if im.Alias != alias || im.Fingerprint != fp || im.Size != int64(len(tarball)) || im.Description != "remote test image" {
		t.Fatalf("imported %+v, want alias %s fingerprint %s size %d", im, alias, fp, len(tarball))
	}
	if a, err := e.lxd.ImageAlias(context.Background(), alias); err != nil || a.Target != fp {
		t.Fatalf("LXD alias %s: %+v %v", alias, a, err)
	}
	// The same bytes again, under another alias: the same image.
	if status, body := e.do("POST", "/v1/images?alias="+alias2, "", tarball); status != http.StatusCreated || !strings.Contains(string(body), fp) {
		t.Fatalf("second import: %d %s", status, body)
	}
	status, body = e.do("GET", "/v1/images", "alice", nil)
	if status != http.StatusOK {
		t.Fatalf("list: %d %s", status, body)
	}
	if users := decodeImages(t, body); len(users) != 2 || users[alias2].Fingerprint != fp || !users[testkit.TestImage].Default {
		t.Errorf("alice sees %+v, want busybox (default) and %s only ([projects] allowed_images)", users, alias2)
	}
	status, body = e.do("GET", "/v1/images", "root", nil)
	if status != http.StatusOK {
		t.Fatalf("list as root: %d %s", status, body)
	}
	list := decodeImages(t, body)
	for _, a := range []string{alias, alias2} {
		if got := list[a]; got.Fingerprint != fp || got.Size != int64(len(tarball)) {
			t.Errorf("list[%s] = %+v", a, got)
		}
	}
	if !list[testkit.TestImage].Default || list[alias].Default {
		t.Errorf("default marks: busybox %+v, %s %+v", list[testkit.TestImage], alias, list[alias])
	}
	// A project may name it (its container is made at the first start).
	name := uniqueProject("img")
	e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Image: alias2})
	// Another tarball under the first alias moves it.
	other := tinyImage(t, 512)
	cleanupImage(t, e.lxd, "", sha(other))
	if status, body := e.do("POST", "/v1/images?alias="+alias, "", other); status != http.StatusCreated || !strings.Contains(string(body), sha(other)) {
		t.Fatalf("re-import: %d %s", status, body)
	}
	if a, err := e.lxd.ImageAlias(context.Background(), alias); err != nil || a.Target != sha(other) {
		t.Fatalf("LXD alias %s after re-import: %+v %v", alias, a, err)
	}
}

// TestProjectCreateChecksImage: a project naming an image LXD has no alias
// of is refused at creation with 400 naming it and the usable aliases
// (before: 201, then "404 Image alias not found" at the first prompt);
// an image server's form naming no configured server is refused naming
// it; a missing default image is named as the default.
func TestProjectCreateChecksImage(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{images: []string{testkit.TestImage, "debian", "images:debian/12"}})
	status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("noimg"), Image: "debian"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `unknown image \"debian\": LXD has no image of that alias; usable local aliases: `) ||
		!strings.Contains(string(body), "busybox") {
		t.Errorf("image debian: %d %s", status, body)
	}
	status, body = e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("noimg"), Image: "images:debian/12"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `image \"images:debian/12\": no such image server configured: \"images\" ([lxd.image_servers]; none is configured)`) {
		t.Errorf("image images:debian/12: %d %s", status, body)
	}
	status, body = e.do("GET", "/v1/projects", "alice", nil)
	if status != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Fatalf("a refused project was stored: %d %s", status, body)
	}

	missing := newProjectEnv(t, projectEnvOpts{image: "no-such-default-image"})
	status, body = missing.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("nodef")})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `the default image \"no-such-default-image\" ([lxd] image) is not in LXD; usable local aliases: `) {
		t.Fatalf("missing default: %d %s", status, body)
	}
	// Naming an image that is there passes the check.
	e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("busy"), Image: testkit.TestImage})
}

// TestProjectCreateLXDUnreachable: while LXD cannot be asked, a project is
// accepted unchecked (as every project is then: its container is made
// once LXD answers), not refused.
func TestProjectCreateLXDUnreachable(t *testing.T) {
	st := openStore(t, t.TempDir())
	prep, err := provisioning.New(provisioning.Options{LXD: lxdconn.NewConn(nil), Projects: st})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProjects(ProjectsOptions{Store: st, Preparer: prep, Exec: lxdconn.NewConn(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.newImage(context.Background(), "whatever"); err != nil {
		t.Fatalf("unreachable LXD: %v", err)
	}
}

// importAs calls the import handler as peer with body (length unknown to
// the handler when chunked).
// rootPeer is root on the socket acting as itself.
func rootPeer() *daemon.Peer {
	return &daemon.Peer{UID: 0, Allowed: true, MayAssert: true, Admin: true, Name: "root"}
}

func importAs(t *testing.T, routes *hostapi.ImageRoutes, peer *daemon.Peer, alias string, body []byte, chunked bool, hdr ...string) (int, api.ErrorBody) {
	t.Helper()
	var h daemon.HandlerFunc
	for _, rt := range routes.Routes() {
		if rt.Method == "POST" {
			h = rt.Handler
		}
	}
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length
	}
	req := httptest.NewRequest("POST", "/v1/images?alias="+alias, rd)
	if chunked {
		req.ContentLength = -1
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if peer != nil {
		req = req.WithContext(daemon.WithPeer(req.Context(), peer))
	}
	rec := httptest.NewRecorder()
	if err := h(rec, req); err != nil {
		return daemon.ToHTTP(err)
	}
	return rec.Code, api.ErrorBody{}
}

// TestAttackImageImportByLocalUser: a local user allowed on the socket, a
// frontend (which may name any user) and a request without a peer try to
// import an image every project naming its alias would run: 403, LXD has
// no such alias. Root passes the same check.
func TestAttackImageImportByLocalUser(t *testing.T) {
	const refusal = "only root (or the daemon's own user) acting as itself may import images: not through a frontend, nor naming another user in X-Remote-User"
	cl := testkit.LXD(t)
	routes := &hostapi.ImageRoutes{LXD: lxdconn.NewConn(cl)}
	alias := testkit.ContainerName("evil")
	tarball := tinyImage(t, 256)
	cleanupImage(t, cl, alias, sha(tarball))
	for _, peer := range []*daemon.Peer{
		{UID: 1000, GID: 1000, Allowed: true},
		{UID: 998, GID: 998, Allowed: true, MayAssert: true},
		nil,
	} {
		status, eb := importAs(t, routes, peer, alias, tarball, false)
		if status != http.StatusForbidden || eb.Message != refusal {
			t.Errorf("import by %+v: %d %+v", peer, status, eb)
		}
	}
	// Root itself, but relaying a browser user (a frontend running as
	// root), or naming another user: no administrator either.
	for _, hdr := range [][]string{{"X-Remote-Frontend", "remote-web"}, {"X-Remote-User", "alice"}} {
		status, eb := importAs(t, routes, rootPeer(), alias, tarball, false, hdr...)
		if status != http.StatusForbidden || eb.Message != refusal {
			t.Errorf("import by root with %v: %d %+v", hdr, status, eb)
		}
	}
	if _, err := cl.ImageAlias(context.Background(), alias); !errorsIsNotFound(err) {
		t.Fatalf("alias %s after the refused imports: %v", alias, err)
	}
	if status, eb := importAs(t, routes, rootPeer(), alias, tarball, false); status != http.StatusCreated {
		t.Fatalf("root: %d %+v", status, eb)
	}
}

// TestAttackImageImportTooLarge: a valid image tarball larger than the
// cap, declared (Content-Length) or streamed chunked so the handler cannot
// know its size up front, is refused with 413 and LXD keeps nothing: no
// alias, no image of that fingerprint.
func TestAttackImageImportTooLarge(t *testing.T) {
	cl := testkit.LXD(t)
	routes := &hostapi.ImageRoutes{LXD: lxdconn.NewConn(cl), MaxBytes: 16 << 10}
	root := rootPeer()
	for _, chunked := range []bool{false, true} {
		alias := testkit.ContainerName("big")
		tarball := tinyImage(t, 64<<10) // random bytes: gzip cannot shrink them
		cleanupImage(t, cl, alias, sha(tarball))
		status, eb := importAs(t, routes, root, alias, tarball, chunked)
		if status != http.StatusRequestEntityTooLarge || eb.Message != "image tarball larger than 16384 bytes" {
			t.Errorf("chunked %v: %d %+v", chunked, status, eb)
		}
		if _, err := cl.ImageAlias(context.Background(), alias); !errorsIsNotFound(err) {
			t.Errorf("chunked %v: alias %s: %v", chunked, alias, err)
		}
		if _, err := cl.Query(context.Background(), "GET", "/1.0/images/"+sha(tarball), nil, ""); !errorsIsNotFound(err) {
			t.Errorf("chunked %v: LXD kept the image: %v", chunked, err)
		}
	}
}

// TestImageImportBadInput: an alias that is empty, names an image server
// or a path, and a body that is no image tarball: 400 naming what was
// wrong; LXD keeps nothing.
func TestImageImportBadInput(t *testing.T) {
	cl := testkit.LXD(t)
	routes := &hostapi.ImageRoutes{LXD: lxdconn.NewConn(cl)}
	root := rootPeer()
	for _, alias := range []string{"", "images:debian", "a/b", "-x", strings.Repeat("a", 65)} {
		status, eb := importAs(t, routes, root, alias, []byte("x"), false)
		if status != http.StatusBadRequest || !strings.HasPrefix(eb.Message, "invalid alias \""+alias+"\"") {
			t.Errorf("alias %q: %d %+v", alias, status, eb)
		}
	}
	alias := testkit.ContainerName("junk")
	junk := []byte("this is not an image tarball")
	cleanupImage(t, cl, alias, sha(junk))
	status, eb := importAs(t, routes, root, alias, junk, false)
	if status != http.StatusBadRequest || !strings.HasPrefix(eb.Message, "LXD refused the image: ") {
		t.Fatalf("junk: %d %+v", status, eb)
	}
	if _, err := cl.ImageAlias(context.Background(), alias); !errorsIsNotFound(err) {
		t.Fatalf("alias %s: %v", alias, err)
	}
}

// TestProjectChatClaudeOnDevImage: a project created with no image on a
// daemon whose default is the development image gets Claude Code from the
// CLI store (no install_files, no npm in the container): the real CLI
// runs from the read-only mount for a project chat against the fake model
// server, on the image's own glibc (the store's is not mounted).
func TestProjectChatClaudeOnDevImage(t *testing.T) {
	testkit.DevImageTarball(t)
	st := testStore(t, providers.Claude)
	e, model, _ := claudeEnv(t, st, false, false, func(o *projectEnvOpts) { o.image = testkit.DevImage })
	name := uniqueProject("devstore")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude"})
	if p.Image != "" {
		t.Fatalf("project image %q, want none (the default)", p.Image)
	}
	chat := e.newChat(t, "claude", name)
	model.Push(fakeanthropic.Text("from the store on remote-dev"))
	evs := e.prompt(t, chat.ID, "alice", "hello")
	if !hasType(evs, api.EventComplete) || hasType(evs, api.EventError) || assistantText(evs) != "from the store on remote-dev" {
		t.Fatalf("run: %s", dump(evs))
	}
	inst, _, err := e.lxd.Instance(context.Background(), p.Container)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Devices["remote-cli-claude-"+providers.TestedClaudeVersion]["readonly"] != "true" || inst.Devices["remote-cli-glibc"] != nil {
		t.Fatalf("devices %v", inst.Devices)
	}
	out, code := e.sh(t, name, "readlink /usr/local/bin/claude; git --version | cut -d' ' -f1-2; command -v npm >/dev/null && echo npm-too")
	if code != 0 || out != "/opt/remote-cli/claude/"+providers.TestedClaudeVersion+"/claude\ngit version\nnpm-too\n" {
		t.Fatalf("in the container: exit %d\n%s", code, out)
	}
}

// imagelessLXD returns a client of a new LXD project with images of its
// own (none), deleted when the test ends: an LXD where the development
// image was never built, without touching the host's images.
func imagelessLXD(t *testing.T) *lxdexec.Client {
	t.Helper()
	testkit.LXD(t)
	name := testkit.ContainerName("noimg")
	ctx := context.Background()
	host, err := lxdexec.Connect(ctx, lxdexec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.Query(ctx, "POST", "/1.0/projects", map[string]any{"name": name,
		"config": map[string]string{"features.images": "true", "features.profiles": "false"}}, ""); err != nil {
		t.Fatalf("create LXD project %s: %v", name, err)
	}
	t.Cleanup(func() { _, _ = host.Query(context.Background(), "DELETE", "/1.0/projects/"+name, nil, "") })
	cl, err := lxdexec.Connect(ctx, lxdexec.Options{Project: name})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestProjectCreateDevImageMissing: on an LXD without the development
// image, a project naming no image (the default, remote-dev) is refused
// at creation with 400 saying which and the command that builds it.
func TestProjectCreateDevImageMissing(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{lxd: imagelessLXD(t), image: testkit.DevImage})
	status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("nodev")})
	want := `the default image \"remote-dev\" ([lxd] image) is not in LXD (build and import it with ` + "`make image`" +
		`, or: remotectl image import FILE --alias remote-dev); LXD has no image aliases`
	if status != http.StatusBadRequest || !strings.Contains(string(body), want) {
		t.Fatalf("%d %s\nwant %s", status, body, want)
	}
}

// TestProjectClaudeWritesAndRunsPythonTests is the first real work on the
// development image: the real Claude Code CLI (its model scripted on
// loopback) writes a small Python module and its unit test into
// /workspace with its Write tool, runs `python3 -m unittest` with its Bash
// tool and reports. The events carry the Bash tool's real output —
// unittest's own lines from the container's python3 — and the files are
// in the container.
func TestProjectClaudeWritesAndRunsPythonTests(t *testing.T) {
	testkit.DevImageTarball(t)
	st := testStore(t, providers.Claude)
	e, model, _ := claudeEnv(t, st, false, false, func(o *projectEnvOpts) { o.image = testkit.DevImage })
	name := uniqueProject("pywork")
	e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude"})
	chat := e.newChat(t, "claude", name)
	module := "def add(a, b):\n    return a + b\n"
	test := "import unittest\n\nfrom mathx import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n"
	write := func(path, content string) string {
		b, _ := json.Marshal(map[string]string{"file_path": path, "content": content})
		return string(b)
	}
	model.Push(
		fakeanthropic.ToolUse("Write", write("/workspace/mathx.py", module)),
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Write", write("/workspace/test_mathx.py", test))),
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Bash", `{"command":"cd /workspace && python3 -m unittest -v 2>&1","description":"run the unit tests"}`)),
		fakeanthropic.AfterToolResult(fakeanthropic.Text("The test passes: Ran 1 test, OK.")),
	)
	evs := e.prompt(t, chat.ID, "alice", "write add(a, b) in mathx.py with a unit test, and run it")
	if !hasType(evs, api.EventComplete) || hasType(evs, api.EventError) {
		t.Fatalf("run: %s", dump(evs))
	}
	var bash string
	for _, ev := range evs {
		if ev.Type == api.EventToolUseEnd && strings.Contains(ev.Output, "Ran 1 test") {
			bash = ev.Output
		}
	}
	for _, want := range []string{"test_add (test_mathx.TestAdd", "ok", "Ran 1 test in ", "\nOK"} {
		if !strings.Contains(bash, want) {
			t.Fatalf("the Bash tool's output lacks %q (unittest's own lines):\n%q\nevents: %s", want, bash, dump(evs))
		}
	}
	if got := assistantText(evs); got != "The test passes: Ran 1 test, OK." {
		t.Errorf("answer %q", got)
	}
	out, code := e.sh(t, name, "cat /workspace/mathx.py; cd /workspace && python3 -m unittest -q 2>&1 | tail -1")
	if code != 0 || out != module+"OK\n" {
		t.Fatalf("in the container: exit %d\n%s", code, out)
	}
}
