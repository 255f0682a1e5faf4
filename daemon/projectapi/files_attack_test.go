package projectapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
)

// get GETs a file route as alice with extra headers; the caller closes
// the body.
func (e *projectEnv) get(t *testing.T, u string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://remoted"+u, nil)
	req.Header.Set(api.HeaderUser, "alice")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp
}

// TestAttackFilesNonRegular: root in the container puts a FIFO, a unix
// socket and (through a link to /dev) a device under /workspace, and
// swaps a listed file for a FIFO. The listing names each for what it is,
// and a download or an upload of any of them is a 400 naming its type,
// at once: nothing opens them on the host's side (LXD's file API would
// open the FIFO in its host-side forkfile and block there for good, and
// stream /dev/zero without end).
func TestAttackFilesNonRegular(t *testing.T) {
	// A short open bound: without the defence the FIFO's download is a
	// 504 after it instead of a 400.
	e, p := filesEnv(t, projectEnvOpts{pullOpen: 5 * time.Second, maxUpload: 1 << 20}, "ffifo")
	lxdShell(t, e.lxd, p.Container, `cd /workspace && mkfifo pipe && echo swapped > later && ln -s /dev dev &&
		mkdir sk && unshare -m sh -c "mount --bind /workspace/sk /dev && syslogd -O /dev/null" && test -S sk/log`)

	l := e.listFiles(t, p.Name, "")
	for name, want := range map[string]string{"pipe": "fifo", "later": "file", "dev": "symlink", "sk": "directory"} {
		if f := findEntry(l, name); f == nil || f.Type != want {
			t.Errorf("listing: %s is %+v, want a %s", name, f, want)
		}
	}
	if f := findEntry(l, "later"); f == nil || f.Size == nil || *f.Size != int64(len("swapped\n")) {
		t.Errorf("listing: later %+v, want its size", f)
	}
	if f := findEntry(e.listFiles(t, p.Name, "sk"), "log"); f == nil || f.Type != "socket" {
		t.Errorf("listing of sk: log is %+v, want a socket", f)
	}
	// The listed file becomes a FIFO before it is fetched (TOCTOU).
	lxdShell(t, e.lxd, p.Container, "cd /workspace && rm later && mkfifo later")

	for _, tc := range []struct{ path, typ string }{
		{"pipe", "fifo"}, {"later", "fifo"}, {"sk/log", "socket"}, {"dev/zero", "device"}, {"dev/null", "device"},
	} {
		status, body := e.do("GET", filesURL(p.Name, "/files/raw", tc.path), "alice", nil)
		want := `path "/workspace/` + tc.path + `": is a ` + tc.typ + `, not a file`
		if status != 400 || !strings.HasPrefix(errorMessage(t, body), want) {
			t.Errorf("download %s: %d %.200s, want 400 %q", tc.path, status, body, want)
		}
		if tc.typ == "device" {
			continue
		}
		if status, body := e.upload(t, p.Name, "alice", tc.path, strings.NewReader("x"), 1); status != 400 || !strings.Contains(errorMessage(t, body), "is a "+tc.typ) {
			t.Errorf("upload onto %s: %d %s", tc.path, status, body)
		}
	}
}

// TestAttackFilesConcurrentDownloads: a client (or a page) that opens
// downloads and never reads them holds at most the project's and the
// user's bound of file requests; past them a 429 names the bound, and a
// slot is free again once its download ends.
func TestAttackFilesConcurrentDownloads(t *testing.T) {
	e, a := filesEnv(t, projectEnvOpts{fileOpsPerUser: 3, fileOpsPerProject: 2}, "fconc")
	b := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("fconcb")})
	if status, body := e.do("POST", "/v1/projects/"+b.Name+"/start", "alice", nil); status != 200 {
		t.Fatalf("start: %d %s", status, body)
	}
	// Larger than every buffer between the container and this client.
	for _, p := range []api.Project{a, b} {
		lxdShell(t, e.lxd, p.Container, "dd if=/dev/zero of=/workspace/big bs=1M count=64 2>/dev/null")
	}
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	hold := func(p api.Project) {
		t.Helper()
		r := e.get(t, filesURL(p.Name, "/files/raw", "big"), nil)
		if r.StatusCode != 200 {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			t.Fatalf("download %d of %s: %d %s", len(held)+1, p.Name, r.StatusCode, b)
		}
		held = append(held, r) // never read
	}
	refused := func(p api.Project, want string) {
		t.Helper()
		status, body := e.do("GET", filesURL(p.Name, "/files/raw", "big"), "alice", nil)
		if status != 429 || !strings.Contains(errorMessage(t, body), want) {
			t.Fatalf("download past the bound in %s: %d %.300s, want 429 naming %s", p.Name, status, body, want)
		}
	}
	hold(a)
	hold(a)
	refused(a, `project "`+a.Name+`" has 2 in flight`)
	if status, body := e.do("GET", "/v1/projects/"+a.Name+"/files", "alice", nil); status != 429 {
		t.Fatalf("listing past the project's bound: %d %s", status, body)
	}
	hold(b)
	refused(b, `user "alice" has 3 in flight`)

	// A download that ends gives its slot back.
	held[0].Body.Close()
	testkit.Eventually(t, 90*time.Second, func() bool {
		status, _ := e.do("GET", "/v1/projects/"+a.Name+"/files", "alice", nil)
		return status == 200
	}, "a slot freed by a closed download")
}

// TestAttackFilesSubresource: a chat's Markdown renders
// <img src="/v1/projects/p/files/raw?path=…">; the browser fetches it
// with Sec-Fetch-Dest: image. Such a request is refused before anything
// runs; a link followed (document), a fetch (empty) and curl or remotectl
// (none) download.
func TestAttackFilesSubresource(t *testing.T) {
	e, p := filesEnv(t, projectEnvOpts{}, "fdest")
	lxdShell(t, e.lxd, p.Container, "echo payload > /workspace/a.txt")
	u := filesURL(p.Name, "/files/raw", "a.txt")
	for _, dest := range []string{"image", "script", "style", "iframe", "frame", "embed", "object", "audio", "video", "track", "font", "worker", "sharedworker", "serviceworker", "manifest", "report", "xslt", "paintworklet", "audioworklet", "unknown"} {
		r := e.get(t, u, map[string]string{"Sec-Fetch-Dest": dest})
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 403 || strings.Contains(string(body), "payload") || !strings.Contains(errorMessage(t, body), `Sec-Fetch-Dest "`+dest+`"`) {
			t.Errorf("Sec-Fetch-Dest %s: %d %s", dest, r.StatusCode, body)
		}
	}
	for _, dest := range []string{"", "document", "empty"} {
		hdr := map[string]string{}
		if dest != "" {
			hdr["Sec-Fetch-Dest"] = dest
		}
		r := e.get(t, u, hdr)
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || string(body) != "payload\n" {
			t.Errorf("Sec-Fetch-Dest %q: %d %s", dest, r.StatusCode, body)
		}
	}
}

// TestAttackFilesHelperReplaced: root in the container replaces the
// daemon's copy of remote-shim for the file routes with a FIFO (or
// removes it). LXD's exec cannot run it (126/127); the daemon pushes a
// fresh copy to a new random name, never opening what is there, and the
// routes keep working. Copies of earlier daemons do not pile up.
func TestAttackFilesHelperReplaced(t *testing.T) {
	e, p := filesEnv(t, projectEnvOpts{}, "fhelp")
	// An earlier daemon's copy, and a FIFO named like one: removed (by
	// name, unlinked) once this daemon has pushed its own.
	lxdShell(t, e.lxd, p.Container, `echo kept > /workspace/a.txt && mkdir -p /usr/local/lib/remote && cd /usr/local/lib/remote &&
		echo old > remote-shim-0123456789abcdef.files-earlier && mkfifo remote-shim-0123456789abcdef.files-fifo && echo mine > remote-shim-other`)
	e.listFiles(t, p.Name, "")
	if out := lxdShell(t, e.lxd, p.Container, "ls /usr/local/lib/remote/"); strings.Contains(out, "earlier") || strings.Contains(out, "files-fifo") || !strings.Contains(out, "remote-shim-other") {
		t.Fatalf("after the first push: %q", out)
	}
	first := lxdShell(t, e.lxd, p.Container, "ls /usr/local/lib/remote/ | grep '\\.files-'")
	if strings.Count(first, "\n") != 1 {
		t.Fatalf("helpers in the container: %q", first)
	}
	for i, plant := range []string{"rm -f $f && mkfifo $f", "rm -f $f"} {
		lxdShell(t, e.lxd, p.Container, "for f in /usr/local/lib/remote/*.files-*; do "+plant+"; done")
		if f := findEntry(e.listFiles(t, p.Name, ""), "a.txt"); f == nil || f.Type != "file" {
			t.Fatalf("listing after %q: %+v", plant, f)
		}
		status, body := e.do("GET", filesURL(p.Name, "/files/raw", "a.txt"), "alice", nil)
		if status != 200 || string(body) != "kept\n" {
			t.Fatalf("download after %q: %d %s", plant, status, body)
		}
		now := lxdShell(t, e.lxd, p.Container, "ls /usr/local/lib/remote/ | grep '\\.files-'")
		if strings.Count(now, "\n") != 1 || now == first {
			t.Fatalf("round %d: helpers %q (before %q): want one new copy, the planted one removed", i, now, first)
		}
		first = now
	}
}
