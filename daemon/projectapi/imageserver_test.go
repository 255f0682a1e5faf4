package projectapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/simplestreams"
	"remote/lxdexec"
	"remote/provisioning/lxdimage"
)

// imageServerEnv is a project env whose [lxd.image_servers] local-test is
// srv (its certificate pinned) and whose allowed_images are images.
func imageServerEnv(t *testing.T, srv *simplestreams.Server, images ...string) *projectEnv {
	t.Helper()
	return newProjectEnv(t, projectEnvOpts{images: append([]string{testkit.TestImage}, images...),
		imageServers: map[string]lxdimage.Server{"local-test": {URL: srv.URL, Protocol: "simplestreams", Certificate: srv.CertPEM}}})
}

// TestProjectFromImageServer: a project whose image is
// "local-test:busybox" (an image LXD has never seen, on our HTTPS
// simplestreams server, certificate pinned) is checked at creation
// against the server's index, and its container is made through LXD's
// API with a pull source: LXD downloads the tarball from the server, the
// container runs that image (its nonce file), and LXD's image cache keeps
// the image.
func TestProjectFromImageServer(t *testing.T) {
	tarball, nonce := simplestreams.UniqueBusybox(t)
	srv := simplestreams.New(t, simplestreams.Image{Alias: "busybox", Tarball: tarball})
	fp := srv.Fingerprint("busybox")
	e := imageServerEnv(t, srv, "local-test:busybox")
	cleanupImage(t, e.lxd, "", fp) // registered first: runs after the container's removal
	if _, err := e.lxd.Query(context.Background(), "GET", "/1.0/images/"+fp, nil, ""); !errorsIsNotFound(err) {
		t.Fatalf("LXD has image %s before the test: %v", fp, err)
	}

	name := uniqueProject("imgsrv")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Image: "local-test:busybox"})
	if p.Image != "local-test:busybox" {
		t.Fatalf("project image %q", p.Image)
	}
	if reqs := srv.Requests(); !slices.Contains(reqs, "/streams/v1/index.json") || !slices.Contains(reqs, "/streams/v1/images.json") {
		t.Fatalf("the daemon did not read the index at creation: %v", reqs)
	}
	out, code := e.sh(t, name, "cat /etc/remote-test-nonce")
	if code != 0 || out != nonce+"\n" {
		t.Fatalf("in the container: exit %d %q, want the served image's nonce %q", code, out, nonce)
	}
	if !slices.Contains(srv.Requests(), "/"+simplestreams.ImagePath(fp)) {
		t.Fatalf("LXD did not download the tarball from the server: %v", srv.Requests())
	}
	r, err := e.lxd.Query(context.Background(), "GET", "/1.0/images/"+fp, nil, "")
	if err != nil {
		t.Fatalf("LXD's image cache has no %s: %v", fp, err)
	}
	var img struct {
		Cached bool `json:"cached"`
		Source *struct {
			Server   string `json:"server"`
			Protocol string `json:"protocol"`
			Alias    string `json:"alias"`
		} `json:"update_source"`
	}
	if err := json.Unmarshal(r.Metadata, &img); err != nil {
		t.Fatal(err)
	}
	if !img.Cached || img.Source == nil || img.Source.Server != srv.URL || img.Source.Protocol != "simplestreams" || img.Source.Alias != "busybox" {
		t.Fatalf("LXD's image: %s", r.Metadata)
	}
	inst, _, err := e.lxd.Instance(context.Background(), p.Container)
	if err != nil || !inst.Running() || inst.Config["volatile.base_image"] != fp {
		t.Fatalf("container %s: %+v %v", p.Container, inst, err)
	}
}

// TestProjectImageServerRefusals: an alias the server does not list, a
// server that is not configured, and a server whose certificate is not
// the pinned one are refused at POST /v1/projects (400, 400, 503) naming
// what was wrong; nothing is stored.
func TestProjectImageServerRefusals(t *testing.T) {
	junk := t.TempDir() + "/junk.tar.gz"
	if err := writeFileAll(junk, "not needed: never downloaded"); err != nil {
		t.Fatal(err)
	}
	srv := simplestreams.New(t, simplestreams.Image{Alias: "busybox", Tarball: junk})
	e := imageServerEnv(t, srv, "local-test:nope", "nowhere:busybox", "local-test:busybox")
	for _, c := range []struct {
		image  string
		status int
		msg    string
	}{
		{"local-test:nope", 400, `unknown image \"local-test:nope\": image server \"local-test\" has no alias \"nope\"`},
		{"nowhere:busybox", 400, `image \"nowhere:busybox\": no such image server configured: \"nowhere\" ([lxd.image_servers]; configured: local-test)`},
	} {
		status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("ref"), Image: c.image})
		if status != c.status || !strings.Contains(string(body), c.msg) {
			t.Errorf("%s: %d %s, want %d %s", c.image, status, body, c.status, c.msg)
		}
	}

	// The same server address, another certificate pinned: a server
	// impersonating it is not trusted.
	_, otherPEM := simplestreams.SelfSigned(t)
	before := len(srv.Requests())
	wrong := newProjectEnv(t, projectEnvOpts{images: []string{"local-test:busybox"},
		imageServers: map[string]lxdimage.Server{"local-test": {URL: srv.URL, Certificate: otherPEM}}})
	status, body := wrong.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("pin"), Image: "local-test:busybox"})
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"message":"cannot check image \"local-test:busybox\": image server \"local-test\": unreachable or untrusted: GET `) ||
		!strings.Contains(string(body), "its TLS certificate is not the pinned one") {
		t.Errorf("wrong pin: %d %s", status, body)
	}
	if n := len(srv.Requests()); n != before {
		t.Errorf("the server answered %d requests over an untrusted connection", n-before)
	}
	for _, env := range []*projectEnv{e, wrong} {
		if status, body := env.do("GET", "/v1/projects", "alice", nil); status != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
			t.Fatalf("a refused project was stored: %d %s", status, body)
		}
	}
}

// TestAttackImageFromArbitraryURL: a user names an image by URL, or by a
// server the operator did not configure, pointing at a listener of theirs
// (even with the operator's allowlist naming those strings): 400, and
// neither the daemon nor LXD ever connects to the listener, at creation
// or at a start of a project stored with such an image.
func TestAttackImageFromArbitraryURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	evil := []string{"https://" + addr + "/streams:busybox", "https://" + addr + "/busybox", addr + ":busybox", "evil:busybox", "evil:" + addr}
	srv := simplestreams.New(t)
	e := imageServerEnv(t, srv, evil...)
	for _, image := range evil {
		status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("evil"), Image: image})
		if status != http.StatusBadRequest {
			t.Errorf("image %q: %d %s, want 400", image, status, body)
		}
	}
	// A project stored with such an image (an older daemon took it):
	// starting it names the error, and LXD is never asked to pull.
	for _, image := range evil[:2] {
		_, err := lxdimage.NewServers(nil).Source(image)
		if err == nil {
			t.Errorf("image %q resolves to an LXD source", image)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections reached the attacker's listener", n)
	}
}

// TestAttackLXDPullWrongCertificate: the pull source the preparer gives
// LXD carries the pinned certificate, so LXD itself refuses a server
// whose certificate is another (an impersonator at the configured
// address): creating the container fails, LXD downloads nothing and keeps
// no image.
func TestAttackLXDPullWrongCertificate(t *testing.T) {
	tarball, _ := simplestreams.UniqueBusybox(t)
	srv := simplestreams.New(t, simplestreams.Image{Alias: "busybox", Tarball: tarball})
	fp := srv.Fingerprint("busybox")
	cl := testkit.LXD(t)
	cleanupImage(t, cl, "", fp)
	_, other := simplestreams.SelfSigned(t)
	src, err := lxdimage.NewServers(map[string]lxdimage.Server{"local-test": {URL: srv.URL, Certificate: other}}).Source("local-test:busybox")
	if err != nil {
		t.Fatal(err)
	}
	name := testkit.ContainerName("pin")
	testkit.CleanupContainer(t, cl, name)
	err = cl.CreateInstance(context.Background(), lxdexec.InstancesPost{Name: name, Source: src, Profiles: []string{"default"}})
	if err == nil {
		t.Fatalf("LXD created %s from a server with another certificate", name)
	}
	t.Logf("LXD: %v", err)
	if _, err := cl.Query(context.Background(), "GET", "/1.0/images/"+fp, nil, ""); !errorsIsNotFound(err) {
		t.Fatalf("LXD has image %s: %v", fp, err)
	}
	if slices.Contains(srv.Requests(), "/"+simplestreams.ImagePath(fp)) {
		t.Fatalf("LXD downloaded the tarball: %v", srv.Requests())
	}
}
