package web

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"remote/internal/testkit"
	"remote/providers"
)

// fakeCodexLogin prints exactly what Codex 0.169.0 prints for `codex
// login --device-auth` (codex-rs/login/src/device_code_auth.rs), waits
// until the test "approves" (a file appears, standing for the user's
// sign-in), then stores auth.json and says "Successfully logged in" on
// stderr, as the real one does after the token exchange.
const fakeCodexLogin = `#!/bin/sh
auth="$CODEX_HOME/auth.json"
case "$*" in
--version) echo "codex-cli ` + providers.TestedCodexVersion + `" ;;
"login --device-auth")
  printf '\nWelcome to Codex [v\033[90m` + providers.TestedCodexVersion + `\033[0m]\n\033[90mOpenAI'"'"'s command-line coding agent\033[0m\n\n'
  printf 'Follow these steps to sign in with ChatGPT using device code authorization:\n\n'
  printf '1. Open this link in your browser and sign in to your account\n   \033[94mhttps://auth.openai.com/codex/device\033[0m\n\n'
  printf '2. Enter this one-time code \033[90m(expires in 15 minutes)\033[0m\n   \033[94mQRST-4567\033[0m\n\n'
  printf '\033[90mDevice codes are a common phishing target. Never share this code.\033[0m\n\n'
  while [ ! -f "$CODEX_HOME/approve" ]; do sleep 0.1; done
  echo '{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"eyJhbGciOiJub25lIn0.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9wbGFuX3R5cGUiOiJwbHVzIn19.sig","access_token":"at-SECRET","refresh_token":"rt-SECRET","account_id":"a"},"last_refresh":"2026-12-01T00:00:00Z"}' > "$auth"
  echo "Successfully logged in" >&2 ;;
"login status")
  if [ -f "$auth" ]; then echo "Logged in using ChatGPT" >&2; else echo "Not logged in" >&2; exit 1; fi ;;
logout) rm -f "$auth"; echo "Successfully logged out" ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac
`

// TestPageProvidersReadinessAndLogin: the page's Providers view shows each
// provider's readiness from a real remoted (the real Claude Code, not
// logged in; Codex through a fake CLI printing the real one's login
// output), and logs the host CLIs in: as the host user (root) the Codex
// login shows the URL and one-time code and ends logged in; the Claude
// login shows the URL and a code box, hands the code to the real CLI and
// shows its failure (no network here). Another web user (alice) is
// refused by the daemon.
func TestPageProvidersReadinessAndLogin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs remoted and remote-web")
	}
	claude := testkit.ClaudeBinary(t)
	bins := testkit.Binaries(t, "remoted", "remote-web")
	dir, err := os.MkdirTemp("", "rwprov")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	codex := filepath.Join(dir, "codex")
	codexHome := filepath.Join(dir, "codex-home")
	home := filepath.Join(dir, "home")
	for _, d := range []string{codexHome, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(codex, []byte(fakeCodexLogin), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "remoted.sock")
	addr := freeAddr(t)
	base := "http://" + addr
	cfg := fmt.Sprintf(`version = 1
[daemon]
socket = %q
state_dir = %q
[agent]
allowed_roots = [%q]
[providers.claude]
binary = %q
env = { HOME = %q, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }
[providers.codex]
binary = %q
env = { CODEX_HOME = %q, HOME = %q }
[web]
listen = %q
[[web.users]]
name = "root"
password_hash = %q
[[web.users]]
name = %q
password_hash = %q
`, sock, filepath.Join(dir, "state"), dir, claude, home, codex, codexHome, home, addr,
		testHash(t, testPassword), testUser, testHash(t, testPassword))
	cfgPath := filepath.Join(dir, "remote.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dlogs := startProc(t, "remoted", bins[0], "-config", cfgPath)
	wlogs := startProc(t, "remote-web", bins[1], "-config", cfgPath)
	if err := testkit.Poll(time.Minute, func() error {
		resp, err := http.Get(base + "/login")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /login: %s", resp.Status)
		}
		_, err = os.Stat(sock)
		return err
	}); err != nil {
		t.Fatalf("stack did not come up: %v\nremoted:\n%s\nremote-web:\n%s", err, dlogs, wlogs)
	}

	ctx := newBrowser(t)
	loginInBrowser(t, ctx, base, "root", testPassword)
	card := func(id string) string { return `document.querySelector('.provider-card[data-provider="` + id + `"]')` }
	field := func(id, f string) string { return card(id) + `.querySelector('[data-field="` + f + `"]').textContent` }
	steps(t, ctx, "providers view",
		chromedp.Click(chromedp.CSS("#nav-providers")),
		waitJS(`!!`+card("claude")+` && !!`+card("codex")),
	)
	for _, c := range []struct{ expr, want string }{
		{field("claude", "binary"), claude},
		{field("claude", "version"), providers.TestedClaudeVersion + " (tested)"},
		{field("claude", "login"), "not logged in (none)"},
		{field("claude", "action"), "Claude Code is not logged in"},
		{card("claude") + `.dataset.ready`, "false"},
		{field("codex", "version"), providers.TestedCodexVersion + " (tested)"},
		{field("codex", "login"), "not logged in (none)"},
		{card("kimi") + `.querySelector('p').textContent`, "This provider reports no readiness."},
	} {
		if strings.Contains(c.want, "(tested)") && !testkit.PinnedCLIs() {
			continue // REMOTE_CLI_VERSIONS=latest: an untested version
		}
		if got := eval[string](t, ctx, c.expr); !strings.Contains(got, c.want) {
			t.Errorf("%s = %q, want %q", c.expr, got, c.want)
		}
	}
	screenshot(t, ctx, "page-providers")

	// Codex: URL and one-time code, then logged in.
	steps(t, ctx, "codex login shows URL and code",
		chromedp.Click(chromedp.CSS(`.provider-card[data-provider="codex"] .login-start`)),
		waitJS(card("codex")+`.querySelector('.login-code')?.textContent === 'QRST-4567'`),
	)
	if got := eval[string](t, ctx, card("codex")+`.querySelector('.login-url').href`); got != "https://auth.openai.com/codex/device" {
		t.Errorf("codex login URL = %q", got)
	}
	screenshot(t, ctx, "page-providers-codex-login")
	if err := os.WriteFile(filepath.Join(codexHome, "approve"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	steps(t, ctx, "codex logged in",
		waitJS(card("codex")+`?.dataset.ready === 'true'`),
		waitJS(`(`+field("codex", "login")+`) === 'logged in: subscription'`),
	)

	// Claude: URL and a code box; the real CLI fails at its network step.
	steps(t, ctx, "claude login shows URL and code box",
		chromedp.Click(chromedp.CSS(`.provider-card[data-provider="claude"] .login-start`)),
		chromedp.WaitVisible(chromedp.CSS(`.provider-card[data-provider="claude"] .login-paste`)),
	)
	if got := eval[string](t, ctx, card("claude")+`.querySelector('.login-url').href`); !strings.HasPrefix(got, "https://claude.") || !strings.Contains(got, "/oauth/authorize?") {
		t.Errorf("claude login URL = %q", got)
	}
	steps(t, ctx, "claude code submitted",
		chromedp.SendKeys(chromedp.CSS(`.provider-card[data-provider="claude"] .login-paste`), "PASTED-code#state"),
		chromedp.Click(chromedp.CSS(`.provider-card[data-provider="claude"] .login-code-form button`)),
		waitJS(`!!`+card("claude")+`.querySelector('.login-failed')`),
	)
	if got := eval[string](t, ctx, card("claude")+`.querySelector('.login-failed').textContent`); !strings.HasPrefix(got, "Couldn't log in:") {
		t.Errorf("claude failure = %q", got)
	}

	// Another web user is refused by the daemon.
	actx := newBrowser(t)
	loginInBrowser(t, actx, base, testUser, testPassword)
	steps(t, actx, "alice's providers view",
		chromedp.Navigate(base+"/#/providers"),
		chromedp.WaitVisible(chromedp.CSS(`.provider-card[data-provider="codex"] .logout-start`)),
		chromedp.Click(chromedp.CSS(`.provider-card[data-provider="codex"] .logout-start`)),
		waitJS(`(`+card("codex")+`.querySelector('.provider-login').textContent).includes('may not log the host')`),
	)
	if got := eval[string](t, actx, card("codex")+`.querySelector('.provider-login').textContent`); got != `cannot log out: user "alice" may not log the host's CLIs in or out: only the host user (root) or root may` {
		t.Errorf("alice's logout: %q", got)
	}
	if _, err := os.Stat(filepath.Join(codexHome, "auth.json")); err != nil {
		t.Errorf("alice logged codex out: %v", err)
	}
	if strings.Contains(dlogs.String(), "SECRET") || strings.Contains(dlogs.String(), "PASTED") {
		t.Errorf("a token or the code reached remoted's log")
	}
}
