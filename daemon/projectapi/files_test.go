package projectapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
)

// filesEnv is a project env with a running project of alice's.
func filesEnv(t *testing.T, o projectEnvOpts, prefix string) (*projectEnv, api.Project) {
	t.Helper()
	e := newProjectEnv(t, o)
	name := uniqueProject(prefix)
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
	if status, body := e.do("POST", "/v1/projects/"+name+"/start", "alice", nil); status != 200 {
		t.Fatalf("start: %d %s", status, body)
	}
	return e, p
}

func filesURL(project, route, p string) string {
	return "/v1/projects/" + project + route + "?path=" + url.QueryEscape(p)
}

// upload PUTs size bytes of r to path as user, with Content-Length.
func (e *projectEnv) upload(t *testing.T, project, user, p string, r io.Reader, size int64) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("PUT", "http://remoted"+filesURL(project, "/files/raw", p), r)
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(api.HeaderUser, user)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", p, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// listFiles GETs a listing (without path when p is "") and decodes it.
func (e *projectEnv) listFiles(t *testing.T, project, p string) api.FileList {
	t.Helper()
	u := "/v1/projects/" + project + "/files"
	if p != "" {
		u = filesURL(project, "/files", p)
	}
	status, body := e.do("GET", u, "alice", nil)
	if status != 200 {
		t.Fatalf("list %s: %d %s", p, status, body)
	}
	var l api.FileList
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func findEntry(l api.FileList, name string) *api.FileEntry {
	for i := range l.Entries {
		if l.Entries[i].Name == name {
			return &l.Entries[i]
		}
	}
	return nil
}

// TestFilesRoundTrip uploads 50 MiB, finds it in the listing and
// downloads it byte for byte, all streamed.
func TestFilesRoundTrip(t *testing.T) {
	e, p := filesEnv(t, projectEnvOpts{maxUpload: 100 << 20, fileUID: 1000, fileGID: 1000}, "files")
	const size = 50 << 20
	src := rand.NewChaCha8([32]byte{42})
	sum := sha256.New()
	if status, body := e.upload(t, p.Name, "alice", "big.bin", io.TeeReader(io.LimitReader(src, size), sum), size); status != 204 {
		t.Fatalf("upload: %d %s", status, body)
	}
	want := hex.EncodeToString(sum.Sum(nil))

	l := e.listFiles(t, p.Name, "")
	got := findEntry(l, "big.bin")
	if l.Path != "/workspace" || got == nil || got.Type != "file" || got.Mode != "0644" || got.UID != 1000 || got.GID != 1000 || got.MTime.IsZero() {
		t.Fatalf("listing %+v: want big.bin, a file, 0644, owned by 1000:1000 with a time", l)
	}

	req, _ := http.NewRequest("GET", "http://remoted"+filesURL(p.Name, "/files/raw", "/workspace/big.bin"), nil)
	req.Header.Set(api.HeaderUser, "alice")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Content-Length") != "52428800" || h.Get("Content-Type") != "application/octet-stream" ||
		h.Get("Content-Disposition") != "attachment; filename=big.bin" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("download: %d %v", resp.StatusCode, h)
	}
	dl := sha256.New()
	n, err := io.Copy(dl, resp.Body)
	if err != nil || n != size || hex.EncodeToString(dl.Sum(nil)) != want {
		t.Fatalf("download: %d bytes (%v), sha256 %x, want %d bytes %s", n, err, dl.Sum(nil), size, want)
	}
	// The container agrees (busybox sha256sum).
	if out := lxdShell(t, e.lxd, p.Container, "sha256sum /workspace/big.bin"); !strings.HasPrefix(out, want) {
		t.Fatalf("in the container: %q, want %s", out, want)
	}
}

// TestAttackFilesPaths: paths that leave /workspace, another user's
// project, and bad input are refused on all three routes, and nothing is
// written outside /workspace.
func TestAttackFilesPaths(t *testing.T) {
	e, p := filesEnv(t, projectEnvOpts{maxUpload: 1 << 20}, "fpath")
	lxdShell(t, e.lxd, p.Container, "echo mine > /workspace/notes.txt")

	t.Run("another user's project is not found", func(t *testing.T) {
		for _, route := range []string{"/files", "/files/raw"} {
			status, body := e.do("GET", filesURL(p.Name, route, "notes.txt"), "bob", nil)
			if status != 404 || errorMessage(t, body) != fmt.Sprintf("project %q: not found", p.Name) {
				t.Errorf("bob GET %s: %d %s", route, status, body)
			}
		}
		if status, body := e.upload(t, p.Name, "bob", "notes.txt", strings.NewReader("bob's"), 5); status != 404 {
			t.Errorf("bob PUT: %d %s", status, body)
		}
		if out := lxdShell(t, e.lxd, p.Container, "cat /workspace/notes.txt"); out != "mine\n" {
			t.Errorf("notes.txt now %q", out)
		}
	})

	t.Run("paths outside /workspace are 400 naming path", func(t *testing.T) {
		for _, bad := range []string{"../etc/passwd", "/etc/passwd", "/workspace/../etc", "/workspace/../etc/passwd", "..", "/", "/workspacex/a", "a\x00b", ""} {
			for _, route := range []string{"/files", "/files/raw"} {
				status, body := e.do("GET", filesURL(p.Name, route, bad), "alice", nil)
				if status != 400 || !strings.HasPrefix(errorMessage(t, body), "path") {
					t.Errorf("GET %s %q: %d %s", route, bad, status, body)
				}
			}
		}
		for _, bad := range []string{"../etc/pwned", "/etc/pwned", "/workspace/../etc/pwned", "/workspacex/pwned", "../pwned", "/pwned", "..", "a\x00b", ""} {
			if status, body := e.upload(t, p.Name, "alice", bad, strings.NewReader("pwned"), 5); status != 400 || !strings.HasPrefix(errorMessage(t, body), "path") {
				t.Errorf("PUT %q: %d %s", bad, status, body)
			}
		}
		if out := lxdShell(t, e.lxd, p.Container, "ls / /etc; ls -d /workspacex 2>&1"); strings.Contains(out, "pwned") || !strings.Contains(out, "No such file") {
			t.Fatalf("an upload landed outside /workspace:\n%s", out)
		}
	})

	t.Run("wrong kinds are 400 and change nothing", func(t *testing.T) {
		lxdShell(t, e.lxd, p.Container, "mkdir -p /workspace/dir && ln -sf notes.txt /workspace/link")
		for _, tc := range []struct{ method, route, path, want string }{
			{"GET", "/files", "notes.txt", `path "/workspace/notes.txt": is a file, not a directory`},
			{"GET", "/files/raw", "dir", `path "/workspace/dir": is a directory`},
			{"GET", "/files/raw", "link", `path "/workspace/link": is a symlink, not a file`},
			{"GET", "/files/raw", "nope", `path "/workspace/nope" in project "` + p.Name + `": not found`},
		} {
			status, body := e.do(tc.method, filesURL(p.Name, tc.route, tc.path), "alice", nil)
			if !strings.HasPrefix(errorMessage(t, body), tc.want) {
				t.Errorf("%s %s %s: %d %s, want %q", tc.method, tc.route, tc.path, status, body, tc.want)
			}
		}
		for _, target := range []string{"dir", "link", "."} {
			if status, body := e.upload(t, p.Name, "alice", target, strings.NewReader("x"), 1); status != 400 {
				t.Errorf("PUT onto %s: %d %s", target, status, body)
			}
		}
		if out := lxdShell(t, e.lxd, p.Container, "test -d /workspace/dir && readlink /workspace/link && cat /workspace/notes.txt"); out != "notes.txt\nmine\n" {
			t.Errorf("after refused uploads: %q", out)
		}
	})

	t.Run("upload needs octet-stream and a length", func(t *testing.T) {
		req, _ := http.NewRequest("PUT", "http://remoted"+filesURL(p.Name, "/files/raw", "t.txt"), strings.NewReader("x"))
		req.Header.Set(api.HeaderUser, "alice")
		req.Header.Set("Content-Type", "text/plain")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 415 {
			t.Errorf("text/plain upload: %d", resp.StatusCode)
		}
		if status, body := e.upload(t, p.Name, "alice", "t.txt", io.MultiReader(strings.NewReader("x")), -1); status != 411 {
			t.Errorf("chunked upload: %d %s", status, body)
		}
		if _, err := e.lxd.StatFile(context.Background(), p.Container, "/workspace/t.txt"); !errors.Is(err, lxdexec.ErrNotFound) {
			t.Errorf("refused upload left a file: %v", err)
		}
	})
}

// TestAttackFilesUploadCap: an upload over [projects] max_upload_bytes is
// 413 before anything is written, and one that breaks off midway leaves no
// partial file.
func TestAttackFilesUploadCap(t *testing.T) {
	e, p := filesEnv(t, projectEnvOpts{maxUpload: 1 << 20}, "fcap")
	gone := func(name string) bool {
		_, err := e.lxd.StatFile(context.Background(), p.Container, "/workspace/"+name)
		return errors.Is(err, lxdexec.ErrNotFound)
	}
	status, body := e.upload(t, p.Name, "alice", "over.bin", strings.NewReader(strings.Repeat("x", 1<<20+1)), 1<<20+1)
	if status != 413 || errorMessage(t, body) != "upload of 1048577 bytes is larger than 1048576 bytes ([projects] max_upload_bytes)" {
		t.Fatalf("over the cap: %d %s", status, body)
	}
	if !gone("over.bin") {
		t.Fatal("the refused upload left over.bin")
	}
	if status, body := e.upload(t, p.Name, "alice", "at.bin", strings.NewReader(strings.Repeat("x", 1<<20)), 1<<20); status != 204 {
		t.Fatalf("at the cap: %d %s", status, body)
	}

	// A client that announces 1 MiB, sends 256 KiB and hangs up.
	conn, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: remoted\r\nX-Remote-User: alice\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
		filesURL(p.Name, "/files/raw", "half.bin"), 1<<20)
	if _, err := conn.Write([]byte(strings.Repeat("y", 256<<10))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) //nolint:forbidigo // let the push reach LXD
	conn.Close()
	testkit.Eventually(t, 30*time.Second, func() bool { return gone("half.bin") }, "a broken-off upload leaves no half.bin behind")
}

// TestAttackFilesSymlinkEscape: root in the container links /workspace
// entries to / and up past the root. LXD resolves them inside the
// container's own filesystem: the container's files, never the host's.
func TestAttackFilesSymlinkEscape(t *testing.T) {
	e, p := filesEnv(t, projectEnvOpts{}, "flink")
	hostDir := t.TempDir()
	if err := os.Chmod(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(hostDir, "host-only-secret")
	if err := os.WriteFile(hostFile, []byte("host-only-7Qx"), 0o644); err != nil {
		t.Fatal(err)
	}
	lxdShell(t, e.lxd, p.Container, "ln -s / /workspace/root && ln -s ../../../../../../../.. /workspace/up")
	for _, via := range []string{"root", "up"} {
		status, body := e.do("GET", filesURL(p.Name, "/files/raw", via+hostFile), "alice", nil)
		if status != 404 || strings.Contains(string(body), "host-only-7Qx") {
			t.Errorf("host file through %s: %d %s", via, status, body)
		}
		if status, body := e.do("GET", filesURL(p.Name, "/files", via+hostDir), "alice", nil); status != 404 {
			t.Errorf("host dir through %s: %d %s", via, status, body)
		}
	}
	// What a link reaches is the container's own /etc/passwd.
	status, body := e.do("GET", filesURL(p.Name, "/files/raw", "root/etc/passwd"), "alice", nil)
	hostPasswd, _ := os.ReadFile("/etc/passwd")
	if status != 200 || !strings.Contains(string(body), "user:x:1000:1000") || string(body) == string(hostPasswd) {
		t.Fatalf("root/etc/passwd: %d %q", status, body)
	}

	// The links are listed as links (LXD's HEAD never follows the last
	// component). No FIFO here: LXD's GET of one blocks its forkfile and
	// then the container's stop (see docs/threat-model.md).
	l := e.listFiles(t, p.Name, ".")
	if f := findEntry(l, "root"); f == nil || f.Type != "symlink" {
		t.Fatalf("listing %+v", l)
	}
}
