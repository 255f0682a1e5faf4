package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"remote/providers"
)

// fakeCodex prints exactly what Codex 0.169.0 prints for `codex login
// --device-auth` (codex-rs/login/src/device_code_auth.rs, ANSI colours
// included), then, as the real one does once the user has entered the
// code and the token exchange succeeded, writes auth.json and says
// "Successfully logged in" on stderr. `login status`, `logout` and
// `--version` answer as the real CLI does.
const fakeCodex = `#!/bin/sh
auth="$CODEX_HOME/auth.json"
case "$*" in
--version) echo "codex-cli ` + providers.TestedCodexVersion + `" ;;
"login --device-auth")
  printf '\nWelcome to Codex [v\033[90m` + providers.TestedCodexVersion + `\033[0m]\n\033[90mOpenAI'"'"'s command-line coding agent\033[0m\n\n'
  printf 'Follow these steps to sign in with ChatGPT using device code authorization:\n\n'
  printf '1. Open this link in your browser and sign in to your account\n   \033[94mhttps://auth.openai.com/codex/device\033[0m\n\n'
  printf '2. Enter this one-time code \033[90m(expires in 15 minutes)\033[0m\n   \033[94mQRST-4567\033[0m\n\n'
  printf '\033[90mDevice codes are a common phishing target. Never share this code.\033[0m\n\n'
  sleep 2
  echo '{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"eyJhbGciOiJub25lIn0.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9wbGFuX3R5cGUiOiJwbHVzIn19.sig","access_token":"at-SECRET","refresh_token":"rt-SECRET","account_id":"a"},"last_refresh":"2026-12-01T00:00:00Z"}' > "$auth"
  echo "Successfully logged in" >&2 ;;
"login status")
  if [ -f "$auth" ]; then echo "Logged in using ChatGPT" >&2; else echo "Not logged in" >&2; exit 1; fi ;;
logout) rm -f "$auth"; echo "Successfully logged out" ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac
`

// TestProvidersLoginE2E: `remotectl providers login codex` on a real
// remoted shows the URL and the one-time code, waits and reports;
// `remotectl providers` then shows Codex logged in; `providers logout`
// logs it out. `providers login claude` drives the real Claude Code to its
// paste prompt, hands it the piped code and reports the CLI's own failure
// (no network here).
func TestProvidersLoginE2E(t *testing.T) {
	dir := t.TempDir()
	codex := filepath.Join(dir, "codex")
	if err := os.WriteFile(codex, []byte(fakeCodex), 0o755); err != nil {
		t.Fatal(err)
	}
	codexHome := filepath.Join(dir, "codex-home")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	e := startE2EWith(t, fmt.Sprintf("[providers.codex]\nbinary = %q\nenv = { CODEX_HOME = %q }\n", codex, codexHome))

	if out := e.must("providers"); codexAuth(out) != "none" {
		t.Fatalf("codex logged in before the login:\n%s", out)
	}
	r := e.run("", "providers", "login", "codex")
	want := "Open this URL in a browser and sign in:\n  https://auth.openai.com/codex/device\n" +
		"Enter this one-time code there (expires in 15 minutes):\n  QRST-4567\n" +
		"Waiting for the sign-in… (Ctrl-C cancels)\ncodex: logged in\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("login codex: exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", r.code, r.stdout, want, r.stderr)
	}
	t.Logf("remotectl providers login codex printed:\n%s", r.stdout)
	out := e.must("providers")
	if codexAuth(out) != "subscription" {
		t.Fatalf("providers after login:\n%s", out)
	}
	r = e.run("", "providers", "logout", "codex")
	if r.code != 0 || r.stdout != "codex: Successfully logged out\n" {
		t.Fatalf("logout: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(codexHome, "auth.json")); !os.IsNotExist(err) {
		t.Fatalf("auth.json after logout: %v", err)
	}
	r = e.run("", "providers", "login", "-method", "api-key", "codex")
	if r.code == 0 || !strings.Contains(r.stderr, "an OpenAI API key is not accepted (S13)") {
		t.Fatalf("api-key: exit %d %s", r.code, r.stderr)
	}

	// The real Claude Code, up to its network step.
	r = e.run("PASTED-code#state\n", "providers", "login", "claude")
	if r.code == 0 || !strings.Contains(r.stdout, "/oauth/authorize?") ||
		!strings.Contains(r.stdout, "Then paste the code the page shows.") ||
		!strings.Contains(r.stderr, "claude login failed: Couldn't log in:") || strings.Contains(r.stdout+r.stderr, "PASTED") {
		t.Fatalf("login claude: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("remotectl providers login claude printed:\n%s%s", r.stdout, r.stderr)
	// A code without its "#state" half: the real CLI says so and waits
	// for another; remotectl shows its line, has no more input, and stops.
	r = e.run("PASTED-code\n", "providers", "login", "claude")
	if r.code == 0 || !strings.Contains(r.stderr, "claude: That doesn't look like the full code. Copy all of it, including the # in the middle.") {
		t.Fatalf("login claude, half a code: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("with half a code, stderr:\n%s", r.stderr)
}

// codexAuth returns the AUTH column of codex's row in `remotectl providers`.
func codexAuth(table string) string {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[0] == "codex" {
			return f[5]
		}
	}
	return ""
}
