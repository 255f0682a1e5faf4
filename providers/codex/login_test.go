package codex

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
)

// fakeIssuer is an OpenAI auth issuer on loopback speaking the device-code
// protocol `codex login --device-auth` uses (codex-rs/login/src/
// device_code_auth.rs): usercode, token polling (403 until approved), the
// code exchange at /oauth/token, and /oauth/revoke for the logout.
type fakeIssuer struct {
	*httptest.Server
	approved, revoked atomic.Bool
	polls             atomic.Int32
}

const fakeAccessToken = "at-SECRET-never-shown-0123456789abcdef"

func newFakeIssuer(t *testing.T) *fakeIssuer {
	f := &fakeIssuer{}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	jwt := b64(`{"alg":"none"}`) + "." + b64(`{"email":"t@example.com","https://api.openai.com/auth":{"chatgpt_plan_type":"plus","chatgpt_account_id":"acc-1","chatgpt_user_id":"user-1"}}`) + ".sig"
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/accounts/deviceauth/usercode":
			_ = json.NewEncoder(w).Encode(map[string]string{"device_auth_id": "dev-1", "user_code": "WXYZ-9876", "interval": "1"})
		case "/api/accounts/deviceauth/token":
			f.polls.Add(1)
			if !f.approved.Load() {
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"authorization_code": "authcode-1", "code_challenge": "ch", "code_verifier": "ver"})
		case "/oauth/token":
			_ = json.NewEncoder(w).Encode(map[string]string{"id_token": jwt, "access_token": fakeAccessToken, "refresh_token": "rt-SECRET-never-shown"})
		case "/oauth/revoke":
			f.revoked.Store(true)
			_, _ = w.Write([]byte(`{}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func loginProvider(t *testing.T, binary string, issuer *fakeIssuer) (*Provider, string) {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "codex-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	p := NewWithOptions(providers.AdapterConfig{Binary: binary, Host: &runner.HostLauncher{},
		Env: map[string]string{"CODEX_HOME": home, "HOME": root, "CODEX_REVOKE_TOKEN_URL_OVERRIDE": issuer.URL + "/oauth/revoke"}},
		Options{LoginArgs: []string{"--experimental_issuer", issuer.URL}})
	return p, home
}

func waitLogin(t *testing.T, s providers.LoginSession, cond func(providers.LoginStatus) bool) providers.LoginStatus {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		st := s.Status()
		if cond(st) {
			return st
		}
		select {
		case <-deadline:
			t.Fatalf("login never reached the state wanted: %+v", st)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestLoginCodexDeviceCode drives the real `codex login --device-auth`
// against a fake issuer: the URL and code are shown, the CLI polls until
// the user approves, stores its tokens, and readiness turns to a logged-in
// subscription; `codex logout` revokes and removes them. No token reaches
// the status.
func TestLoginCodexDeviceCode(t *testing.T) {
	bin := testkit.CodexBinary(t)
	issuer := newFakeIssuer(t)
	p, home := loginProvider(t, bin, issuer)
	if r := p.Readiness(context.Background()); r.Ready || r.Auth != providers.AuthNone {
		t.Fatalf("before login: %+v", r)
	}
	s, err := p.StartLogin(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	st := waitLogin(t, s, func(st providers.LoginStatus) bool { return st.UserCode != "" && issuer.polls.Load() > 0 })
	if st.State != providers.LoginWaiting || st.URL != issuer.URL+"/codex/device" || st.UserCode != "WXYZ-9876" || st.Method != "device-code" || st.NeedsCode {
		t.Fatalf("waiting status: %+v", st)
	}
	issuer.approved.Store(true)
	<-s.Done()
	st = s.Status()
	if st.State != providers.LoginSucceeded || st.Message != "logged in" {
		t.Fatalf("final status: %+v", st)
	}
	if b, _ := json.Marshal(st); strings.Contains(string(b), "SECRET") {
		t.Fatalf("a token reached the status: %s", b)
	}
	if b, err := os.ReadFile(filepath.Join(home, "auth.json")); err != nil || !strings.Contains(string(b), fakeAccessToken) {
		t.Fatalf("auth.json not written by the CLI: %v", err)
	}
	if r := p.Readiness(context.Background()); !r.Ready || r.Auth != providers.AuthSubscription {
		t.Fatalf("after login: %+v", r)
	}

	line, err := p.Logout(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, "SECRET") {
		t.Fatalf("logout line leaks: %q", line)
	}
	if _, err := os.Stat(filepath.Join(home, "auth.json")); !os.IsNotExist(err) {
		t.Fatalf("auth.json still there after logout: %v", err)
	}
	if r := p.Readiness(context.Background()); r.Ready || r.Auth != providers.AuthNone {
		t.Fatalf("after logout: %+v", r)
	}
	t.Logf("logout printed %q, issuer revoke called: %v", line, issuer.revoked.Load())
}

// TestLoginCodexIssuerRefuses: an issuer without device-code login ends
// the login as failed with Codex's own message.
func TestLoginCodexIssuerRefuses(t *testing.T) {
	bin := testkit.CodexBinary(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	p := NewWithOptions(providers.AdapterConfig{Binary: bin, Host: &runner.HostLauncher{},
		Env: map[string]string{"CODEX_HOME": t.TempDir(), "HOME": t.TempDir()}},
		Options{LoginArgs: []string{"--experimental_issuer", srv.URL}})
	s, err := p.StartLogin(context.Background(), providers.LoginMethodDeviceCode)
	if err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	st := s.Status()
	if st.State != providers.LoginFailed || !strings.Contains(st.Message, "device code login is not enabled for this Codex server") {
		t.Fatalf("status: %+v", st)
	}
}

// TestLoginCodexAPIKeyRefused: an API-key login is refused with S13's
// reason, without running anything.
func TestLoginCodexAPIKeyRefused(t *testing.T) {
	p := New(providers.AdapterConfig{Binary: "codex-not-installed-here", Host: &runner.HostLauncher{}})
	_, err := p.StartLogin(context.Background(), "api-key")
	if !errors.Is(err, providers.ErrLoginMethod) || !strings.Contains(err.Error(), "an OpenAI API key is not accepted (S13)") {
		t.Fatalf("err = %v", err)
	}
	if _, err := p.StartLogin(context.Background(), "password"); err == nil || !strings.Contains(err.Error(), `not "password"`) {
		t.Fatalf("unknown method: %v", err)
	}
}

// TestLoginCancel: cancelling a waiting login stops the CLI.
func TestLoginCancel(t *testing.T) {
	bin := testkit.CodexBinary(t)
	issuer := newFakeIssuer(t)
	p, _ := loginProvider(t, bin, issuer)
	s, err := p.StartLogin(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	waitLogin(t, s, func(st providers.LoginStatus) bool { return st.UserCode != "" })
	s.Cancel()
	<-s.Done()
	if st := s.Status(); st.State != providers.LoginCancelled || st.Message != "login cancelled" {
		t.Fatalf("status: %+v", st)
	}
}
