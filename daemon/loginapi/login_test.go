package loginapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/daemon/daemontest"
	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/codex"
	"remote/providers/runner"
)

// fakeClaude prints exactly what `claude auth login` prints without a
// terminal (the 2.1.328 binary's strings), reads the pasted code, stores
// credentials and says "Login successful."; `auth logout` leaves a mark.
const fakeClaude = `#!/bin/sh
case "$1 $2" in
"auth login")
  printf 'Opening browser to sign in\342\200\246\n'
  printf "If the browser didn't open, visit: https://claude.com/cai/oauth/authorize?code=true&client_id=9d1c250a-e61b-44d9-88ed-5944d1962f5e&state=s1\n"
  printf 'Paste code here if prompted > '
  read code || exit 1
  echo "$code" > "$HOME/code-seen"
  echo "Login successful." ;;
"auth logout")
  touch "$HOME/logged-out"; echo "Successfully logged out from your Anthropic account." ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac
`

// loginServer is a real daemon (daemontest) serving Claude Code (the
// fakeClaude script, HOME its own directory) and a Codex that is not
// installed, with the login routes for host user root.
func loginServer(t *testing.T, configure func(o *daemon.Options)) (*loginDaemon, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte(fakeClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cl := claude.New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"HOME": home}, Host: &runner.HostLauncher{}})
	cx := codex.New(providers.AdapterConfig{Binary: "codex-not-installed-here", Host: &runner.HostLauncher{}})
	d := daemontest.New(t, daemontest.Options{Providers: []providers.Provider{cl, cx}, HostUser: &runner.HostUser{Name: "root"}, Configure: configure})
	return &loginDaemon{Daemon: d, t: t, client: &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return net.Dial("unix", d.Socket)
	}}}}, home
}

// loginDaemon sends raw requests to a daemontest daemon.
type loginDaemon struct {
	*daemontest.Daemon
	t      *testing.T
	client *http.Client
}

// do sends a request as user (none when "") and returns status and body.
func (ts *loginDaemon) do(method, path, user string, body any) (int, []byte) {
	ts.t.Helper()
	return doWith(ts.t, ts.client, method, path, user, body)
}

// doWith sends a request through hc as user (none when "").
func doWith(t *testing.T, hc *http.Client, method, path, user string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, "http://remoted"+path, r)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set(api.HeaderUser, user)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const loginCode = "PASTED-SECRET-code-1#s1"

// TestProviderLoginRoutes: root (the host user here) logs Claude Code in
// through the API: the URL and the paste prompt, the code handed to the
// CLI's input, success; a second start returns the running login; Codex
// refuses an API key (S13); logout runs the CLI's own. The pasted code
// never reaches a response or the daemon's log.
func TestProviderLoginRoutes(t *testing.T) {
	var logs lockedBuffer
	ts, home := loginServer(t, func(o *daemon.Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "api", Level: hclog.Debug, Output: &logs, JSONFormat: true})
	})
	code, body := ts.do(http.MethodPost, "/v1/providers/claude/login", "root", api.StartLoginRequest{})
	var l api.ProviderLogin
	if code != http.StatusAccepted || json.Unmarshal(body, &l) != nil || l.ID == "" || l.Provider != "claude" || l.Method != "oauth" {
		t.Fatalf("start: %d %s", code, body)
	}
	// refresh reads the login again; the checks after each wait say what
	// was wrong if it never came.
	refresh := func() api.ProviderLogin {
		_, body = ts.do(http.MethodGet, "/v1/providers/claude/login/"+l.ID, "root", nil)
		_ = json.Unmarshal(body, &l)
		return l
	}
	_ = testkit.Poll(30*time.Second, func() bool { return refresh().NeedsCode })
	if l.State != "waiting" || !strings.HasPrefix(l.URL, "https://claude.com/cai/oauth/authorize?") {
		t.Fatalf("waiting: %s", body)
	}
	if code, again := ts.do(http.MethodPost, "/v1/providers/claude/login", "root", nil); code != http.StatusAccepted || !strings.Contains(string(again), `"id":"`+l.ID+`"`) {
		t.Fatalf("second start: %d %s, want the running login", code, again)
	}
	if code, body := ts.do(http.MethodPost, "/v1/providers/claude/login/"+l.ID+"/code", "root", api.LoginCodeRequest{Code: loginCode}); code != http.StatusOK || strings.Contains(string(body), "SECRET") {
		t.Fatalf("code: %d %s", code, body)
	}
	_ = testkit.Poll(30*time.Second, func() bool { return refresh().State == "succeeded" })
	if l.State != "succeeded" || l.Message != "logged in" {
		t.Fatalf("final: %s", body)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "code-seen")); strings.TrimSpace(string(b)) != loginCode {
		t.Fatalf("the CLI read %q", b)
	}
	if code, body := ts.do(http.MethodPost, "/v1/providers/claude/login/"+l.ID+"/code", "root", api.LoginCodeRequest{Code: "x"}); code != http.StatusConflict ||
		!strings.Contains(string(body), "the login has already ended (succeeded)") {
		t.Fatalf("code after the end: %d %s", code, body)
	}
	if code, body := ts.do(http.MethodGet, "/v1/providers/claude/login/nope", "root", nil); code != http.StatusNotFound {
		t.Fatalf("unknown login: %d %s", code, body)
	}

	code, body = ts.do(http.MethodPost, "/v1/providers/codex/login", "root", api.StartLoginRequest{Method: "api-key"})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "Codex runs on a ChatGPT subscription only; an OpenAI API key is not accepted (S13)") {
		t.Fatalf("codex api-key: %d %s", code, body)
	}
	if code, body := ts.do(http.MethodPost, "/v1/providers/nope/login", "root", nil); code != http.StatusBadRequest || !strings.Contains(string(body), `unknown provider \"nope\"`) {
		t.Fatalf("unknown provider: %d %s", code, body)
	}

	code, body = ts.do(http.MethodPost, "/v1/providers/claude/logout", "root", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"message":"Successfully logged out from your Anthropic account."`) {
		t.Fatalf("logout: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(home, "logged-out")); err != nil {
		t.Fatal("the CLI's logout did not run")
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("the pasted code reached the log:\n%s", logs.String())
	}
}

// TestAttackProviderLoginByOtherUser: the host's CLI login is every loose
// chat's account, so a local user the socket admits (nobody, through its
// group) may neither start, read, answer nor cancel a login nor log the
// CLI out, and neither may a frontend relaying another user (root naming
// alice). Before the guard these routes did not exist (404); with routes
// and no guard, nobody could log the host out.
func TestAttackProviderLoginByOtherUser(t *testing.T) {
	ts, home := loginServer(t, func(o *daemon.Options) { o.Access = daemon.Access{GIDs: []int{65534}} })
	nobody := ts.HTTPAs(65534, 65534) // admitted through its group
	code, body := ts.do(http.MethodPost, "/v1/providers/claude/login", "root", nil)
	var l api.ProviderLogin
	if code != http.StatusAccepted || json.Unmarshal(body, &l) != nil {
		t.Fatalf("root's start: %d %s", code, body)
	}
	defer ts.do(http.MethodDelete, "/v1/providers/claude/login/"+l.ID, "root", nil)

	paths := []struct {
		Method, Path string
		Body         json.RawMessage
	}{
		{Method: "POST", Path: "/v1/providers/claude/login"},
		{Method: "GET", Path: "/v1/providers/claude/login/" + l.ID},
		{Method: "POST", Path: "/v1/providers/claude/login/" + l.ID + "/code", Body: json.RawMessage(`{"code":"evil"}`)},
		{Method: "DELETE", Path: "/v1/providers/claude/login/" + l.ID},
		{Method: "POST", Path: "/v1/providers/claude/logout"},
	}
	const refusal = `{"error":{"code":"forbidden","message":"user \"nobody\" may not log the host's CLIs in or out: only the host user (root) or root may"}}` + "\n"
	for _, p := range paths {
		var b any
		if p.Body != nil {
			b = []byte(p.Body)
		}
		if status, body := doWith(t, nobody, p.Method, p.Path, "", b); status != http.StatusForbidden || string(body) != refusal {
			t.Errorf("%s %s as nobody: %d %s, want 403 %s", p.Method, p.Path, status, body, refusal)
		}
		code, body := ts.do(p.Method, p.Path, "alice", b)
		if code != http.StatusForbidden || !strings.Contains(string(body), `user \"alice\" may not log the host's CLIs in or out`) {
			t.Errorf("%s %s relayed for alice: %d %s", p.Method, p.Path, code, body)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "logged-out")); err == nil {
		t.Fatal("the CLI was logged out by another user")
	}
	if _, body := ts.do(http.MethodGet, "/v1/providers/claude/login/"+l.ID, "root", nil); !strings.Contains(string(body), `"state":"waiting"`) && !strings.Contains(string(body), `"state":"starting"`) {
		t.Fatalf("root's login was disturbed: %s", body)
	}
}
