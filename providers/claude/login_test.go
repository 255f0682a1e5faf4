package claude

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
)

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

const pastedCode = "CODE-SECRET-never-shown#state-1"

// TestLoginClaudeRealCLI runs the real `claude auth login` as far as it
// goes offline: the sign-in URL and the paste prompt are shown, the pasted
// code goes to the CLI, whose exchange with platform.claude.com fails
// (no network here; an invalid code where there is): one failed status
// with the CLI's own line, no code in it.
func TestLoginClaudeRealCLI(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	p := New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"HOME": t.TempDir()}, Host: &runner.HostLauncher{}})
	s, err := p.StartLogin(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Cancel()
	st := waitLogin(t, s, func(st providers.LoginStatus) bool { return st.NeedsCode })
	if st.State != providers.LoginWaiting || st.Method != "oauth" ||
		!strings.HasPrefix(st.URL, "https://claude.") || !strings.Contains(st.URL, "/oauth/authorize?") {
		t.Fatalf("waiting status: %+v", st)
	}
	if err := s.SubmitCode("two words"); err == nil {
		t.Fatal("a code with a space was accepted")
	}
	if err := s.SubmitCode(pastedCode); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	st = s.Status()
	if st.State != providers.LoginFailed || !(strings.HasPrefix(st.Message, "Couldn't log in:") || strings.HasPrefix(st.Message, "OAuth login failed")) {
		t.Fatalf("final status: %+v", st)
	}
	if b, _ := json.Marshal(st); strings.Contains(string(b), "SECRET") {
		t.Fatalf("the code reached the status: %s", b)
	}
}

// fakeClaudeLogin prints exactly what `claude auth login` prints without a
// terminal (strings from the 2.1.328 binary), reads the pasted code and,
// like the real CLI after a successful exchange, stores credentials and
// prints "Login successful.".
const fakeClaudeLogin = `#!/bin/sh
[ "$1 $2" = "auth login" ] || { echo "unexpected args: $*" >&2; exit 2; }
printf 'Opening browser to sign in\342\200\246\n'
printf "If the browser didn't open, visit: https://claude.com/cai/oauth/authorize?code=true&client_id=9d1c250a-e61b-44d9-88ed-5944d1962f5e&response_type=code&state=abc\n"
printf 'Paste code here if prompted > '
read code || { echo "Input ended before a code was pasted. Sign in again and paste the code shown." >&2; exit 1; }
mkdir -p "$HOME/.claude" && echo '{"claudeAiOauth":{"accessToken":"sk-ant-oat01-SECRET"}}' > "$HOME/.claude/.credentials.json"
echo "$code" > "$HOME/code-seen"
echo "Login successful."
`

// TestLoginClaudePastCode runs past the network step with a fake CLI
// printing the real one's lines: the pasted code reaches the CLI's input
// (and only there), the login succeeds.
func TestLoginClaudePastCode(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte(fakeClaudeLogin), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	p := New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"HOME": home}, Host: &runner.HostLauncher{}})
	s, err := p.StartLogin(context.Background(), "oauth")
	if err != nil {
		t.Fatal(err)
	}
	st := waitLogin(t, s, func(st providers.LoginStatus) bool { return st.NeedsCode })
	if !strings.HasSuffix(st.URL, "&state=abc") || st.Message != "open the URL, sign in with your Claude account, then paste the code the page shows" {
		t.Fatalf("waiting: %+v", st)
	}
	if err := s.SubmitCode(pastedCode); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	st = s.Status()
	if st.State != providers.LoginSucceeded || st.NeedsCode {
		t.Fatalf("final: %+v", st)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "code-seen")); strings.TrimSpace(string(b)) != pastedCode {
		t.Fatalf("the CLI read %q", b)
	}
	if err := s.SubmitCode(pastedCode); err == nil || !strings.Contains(err.Error(), "already ended (succeeded)") {
		t.Fatalf("code after the end: %v", err)
	}
	if _, err := p.StartLogin(context.Background(), "api-key"); err == nil || !strings.Contains(err.Error(), `not "api-key"`) {
		t.Fatalf("api-key: %v", err)
	}
}

// TestLogoutClaudeRealCLI runs the real `claude auth logout` as the host
// user on a home with credentials: they are gone and readiness says so.
func TestLogoutClaudeRealCLI(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	home := t.TempDir()
	creds := filepath.Join(home, ".claude", ".credentials.json")
	if err := os.MkdirAll(filepath.Dir(creds), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-SECRET","refreshToken":"r","expiresAt":9999999999999,"scopes":["user:inference"],"subscriptionType":"max"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"HOME": home}, Host: &runner.HostLauncher{}})
	line, err := p.Logout(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, "SECRET") {
		t.Fatalf("logout line leaks: %q", line)
	}
	if b, err := os.ReadFile(creds); err == nil && strings.Contains(string(b), "SECRET") {
		t.Fatalf("credentials still there after logout: %s", b)
	}
	if r := p.Readiness(context.Background()); r.Ready || r.LoggedIn {
		t.Fatalf("after logout: %+v", r)
	}
	t.Logf("claude auth logout printed %q", line)
}
