package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
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

func loginServer(t *testing.T, opts ...serverOpt) (*testServer, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte(fakeClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cl := claude.New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"HOME": home}, Host: &runner.HostLauncher{}})
	cx := codex.New(providers.AdapterConfig{Binary: "codex-not-installed-here", Host: &runner.HostLauncher{}})
	opts = append([]serverOpt{func(o *Options) {
		o.RouteProviders = append(o.RouteProviders, &ProviderLogins{Registry: o.Registry, HostUser: runner.HostUser{Name: "root"}})
	}}, opts...)
	return newTestServer(t, []providers.Provider{cl, cx}, opts...), home
}

const loginCode = "PASTED-SECRET-code-1#s1"

// TestProviderLoginRoutes: root (the host user here) logs Claude Code in
// through the API: the URL and the paste prompt, the code handed to the
// CLI's input, success; a second start returns the running login; Codex
// refuses an API key (S13); logout runs the CLI's own. The pasted code
// never reaches a response or the daemon's log.
func TestProviderLoginRoutes(t *testing.T) {
	var logs lockedBuffer
	ts, home := loginServer(t, func(o *Options) {
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
	ts, home := loginServer(t, func(o *Options) { o.Access = Access{GIDs: []int{65534}} })
	run := asNobody(t, ts)
	code, body := ts.do(http.MethodPost, "/v1/providers/claude/login", "root", nil)
	var l api.ProviderLogin
	if code != http.StatusAccepted || json.Unmarshal(body, &l) != nil {
		t.Fatalf("root's start: %d %s", code, body)
	}
	defer ts.do(http.MethodDelete, "/v1/providers/claude/login/"+l.ID, "root", nil)

	paths := []peerRequest{
		{Method: "POST", Path: "/v1/providers/claude/login"},
		{Method: "GET", Path: "/v1/providers/claude/login/" + l.ID},
		{Method: "POST", Path: "/v1/providers/claude/login/" + l.ID + "/code", Body: json.RawMessage(`{"code":"evil"}`)},
		{Method: "DELETE", Path: "/v1/providers/claude/login/" + l.ID},
		{Method: "POST", Path: "/v1/providers/claude/logout"},
	}
	const refusal = `{"error":{"code":"forbidden","message":"user \"nobody\" may not log the host's CLIs in or out: only the host user (root) or root may"}}` + "\n"
	for i, a := range run(paths...) {
		if a.Status != http.StatusForbidden || a.Body != refusal {
			t.Errorf("%s %s as nobody: %d %s, want 403 %s", paths[i].Method, paths[i].Path, a.Status, a.Body, refusal)
		}
	}
	for _, p := range paths {
		var b any
		if p.Body != nil {
			b = []byte(p.Body)
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
