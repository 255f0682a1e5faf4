// Package gitserver is a real git server for tests: `git http-backend`
// (smart HTTP, fetch and push) behind HTTP basic auth on the host's
// loopback, serving bare repositories from a temporary directory. A
// container reaches it through an LXD proxy device.
//
// It is a test helper: nothing that ships imports it. It imports nothing
// of ours but testkit (to skip or fail without git).
package gitserver

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"remote/internal/testkit"
)

// Server serves the bare repositories under Dir at URL
// (http://127.0.0.1:Port/<name>.git) to a client whose basic-auth
// password is Token; any other request gets 401.
type Server struct {
	URL   string
	Port  int
	Dir   string
	Token string

	mu        sync.Mutex
	onRequest func(r *http.Request)
	denied    int
	allowed   int
	passwords []string
}

// Passwords returns every basic-auth password presented to the server.
func (s *Server) Passwords() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.passwords...)
}

// New starts a server that accepts token; it stops at the test's end.
func New(t testing.TB, token string) *Server {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		testkit.Missing(t, "git: %v", err)
	}
	s := &Server{Dir: t.TempDir(), Token: token}
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + s.Dir, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=test"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pass, ok := r.BasicAuth()
		if ok {
			s.mu.Lock()
			s.passwords = append(s.passwords, pass)
			s.mu.Unlock()
		}
		if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(s.Token)) != 1 {
			s.mu.Lock()
			s.denied++
			s.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		s.allowed++
		hook := s.onRequest
		s.mu.Unlock()
		if hook != nil {
			hook(r)
		}
		backend.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	s.Port = ln.Addr().(*net.TCPAddr).Port
	s.URL = "http://127.0.0.1:" + strconv.Itoa(s.Port)
	return s
}

// OnRequest has fn called with each authorized request before it is
// served (while the client's git waits for the answer).
func (s *Server) OnRequest(fn func(r *http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRequest = fn
}

// Requests reports how many requests were refused (no or a wrong token)
// and served.
func (s *Server) Requests() (denied, allowed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied, s.allowed
}

// git runs git with args in dir, failing the test on an error.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// NewRepo creates the bare repository <name>.git holding files in one
// commit on branch main, open to pushes, and returns its URL.
func (s *Server) NewRepo(t testing.TB, name string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	git(t, work, "init", "-q", "-b", "main")
	for p, content := range files {
		full := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, work, "add", "-A")
	git(t, work, "commit", "-q", "-m", "initial")
	bare := filepath.Join(s.Dir, name+".git")
	git(t, s.Dir, "clone", "-q", "--bare", work, bare)
	git(t, bare, "config", "http.receivepack", "true")
	return s.URL + "/" + name + ".git"
}

// LsRemote lists the refs of repository name as `git ls-remote` prints
// them ("<sha>\t<ref>" lines), read from the server's directory (no
// token on a command line).
func (s *Server) LsRemote(t testing.TB, name string) string {
	t.Helper()
	return git(t, s.Dir, "ls-remote", filepath.Join(s.Dir, name+".git"))
}

// Git runs git in repository name's bare directory (show, log, cat-file).
func (s *Server) Git(t testing.TB, name string, args ...string) string {
	t.Helper()
	return git(t, filepath.Join(s.Dir, name+".git"), args...)
}
