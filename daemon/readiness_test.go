package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/codex"
	"remote/providers/runner"
)

// TestFaultPromptToNotReadyProvider: a loose-chat prompt to a provider
// whose CLI is missing or not logged in is refused at once (503
// unavailable, the one-line action), instead of a run that fails (or, for
// Codex, hangs retrying) minutes later; GET /v1/providers shows why.
func TestFaultPromptToNotReadyProvider(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	codexHome := filepath.Join(t.TempDir(), "codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	cl := claude.New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"HOME": t.TempDir()}, Host: &runner.HostLauncher{}})
	cx := codex.New(providers.AdapterConfig{Binary: "codex-not-installed-here", Env: map[string]string{"CODEX_HOME": codexHome},
		Host: &runner.HostLauncher{}})
	ts := newTestServer(t, []providers.Provider{cl, cx})

	cases := []struct{ provider, want string }{
		{"claude", `provider "claude" is not ready: ` + claude.LoginAction},
		{"codex", `provider "codex" is not ready: "codex-not-installed-here" not found on the host user's PATH: ` +
			`install Codex (npm install -g @openai/codex@` + providers.TestedCodexVersion + `) or set [providers.codex] binary`},
	}
	for _, tc := range cases {
		chat := ts.createChat("alice", tc.provider)
		start := time.Now()
		code, body := ts.do(http.MethodPost, "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
		if code != http.StatusServiceUnavailable || errorCode(t, body) != api.CodeUnavailable {
			t.Fatalf("%s: prompt = %d %s, want 503 unavailable", tc.provider, code, body)
		}
		var env struct{ Error api.ErrorBody }
		_ = json.Unmarshal(body, &env)
		if env.Error.Message != tc.want {
			t.Errorf("%s: message\n got %q\nwant %q", tc.provider, env.Error.Message, tc.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: refusal took %s", tc.provider, d)
		}
		if evs := ts.events(chat.ID); len(evs) != 0 {
			t.Errorf("%s: a refused prompt stored events: %v", tc.provider, types(evs))
		}
	}

	code, body := ts.do(http.MethodGet, "/v1/providers", "alice", nil)
	if code != http.StatusOK {
		t.Fatalf("providers = %d %s", code, body)
	}
	var list []api.ProviderInfo
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]*api.ProviderReadiness{}
	for _, p := range list {
		got[p.ID] = p.Readiness
	}
	if r := got["claude"]; r == nil || r.Ready || !r.BinaryFound || r.Binary != bin ||
		(testkit.PinnedCLIs() && (r.Version != providers.TestedClaudeVersion || !r.Tested)) || r.Auth != providers.AuthNone || r.Action != claude.LoginAction {
		t.Errorf("claude readiness = %+v", r)
	}
	if r := got["codex"]; r == nil || r.Ready || r.BinaryFound || r.Binary != "codex-not-installed-here" {
		t.Errorf("codex readiness = %+v", r)
	}
}

// claudeEnv is the environment of a real Claude Code CLI against fake,
// logged in with a dummy API key.
func claudeEnv(t *testing.T, fake *fakeanthropic.Server, extra ...string) map[string]string {
	env := map[string]string{"HOME": t.TempDir(), "ANTHROPIC_BASE_URL": fake.URL, "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// promptStatus sends a prompt to the chat and returns the status and body.
func (ts *testServer) promptStatus(chatID, text string) (int, []byte) {
	return ts.do(http.MethodPost, "/v1/chats/"+chatID+"/prompt", "alice", api.PromptRequest{Text: text})
}

// A "not ready" answer is checked again before a prompt is refused: the
// CLI is installed between two prompts (here: its path appears), and the
// second prompt is admitted and runs.
func TestPromptAdmittedOnceCLIInstalled(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	fake := fakeanthropic.New(t)
	link := filepath.Join(t.TempDir(), "claude")
	cl := claude.New(providers.AdapterConfig{Binary: link, Host: &runner.HostLauncher{}, Env: claudeEnv(t, fake)})
	ts := newTestServer(t, []providers.Provider{cl})
	chat := ts.createChat("alice", "claude")
	code, body := ts.promptStatus(chat.ID, "before the install")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "not found on the host user's PATH") {
		t.Fatalf("before the install: %d %s, want 503 naming the missing CLI", code, body)
	}
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	if code, body := ts.promptStatus(chat.ID, "after the install"); code != http.StatusAccepted {
		t.Fatalf("after the install: %d %s, want 202 at once", code, body)
	}
	ts.waitIdle(chat.ID)
	if evs := ts.events(chat.ID); evs[len(evs)-1].Type != api.EventComplete {
		t.Fatalf("the admitted run ended with %+v", evs[len(evs)-1])
	}
}

// A prompt never waits for the readiness probe of a provider known ready:
// with a stale ready answer (TTL 1 ns) the probe's `claude auth status`
// blocks until released (a wrapper around the real CLI), yet prompts are
// admitted and run while it blocks. The old synchronous probe waited for
// it; the failsafe then releases it after a minute and the test fails.
func TestPromptDoesNotWaitForReadinessRefresh(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	fake := fakeanthropic.New(t)
	dir := t.TempDir()
	hold := filepath.Join(dir, "hold")
	wrapper := filepath.Join(dir, "claude")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = auth ] && [ -e %[1]q ]; then
	: > %[1]q.entered
	while [ -e %[1]q ]; do sleep 0.05; done
	%[2]q "$@"; rc=$?
	: > %[1]q.done
	exit $rc
fi
exec %[2]q "$@"
`, hold, bin)
	// Written by a child, so no write descriptor of ours leaks into a
	// fork that would then fail to exec it (ETXTBSY).
	write := exec.Command("sh", "-c", `cat > "$0" && chmod 755 "$0"`, wrapper)
	write.Stdin = strings.NewReader(script)
	if out, err := write.CombinedOutput(); err != nil {
		t.Fatalf("write %s: %v %s", wrapper, err, out)
	}
	cl := claude.New(providers.AdapterConfig{Binary: wrapper, Host: &runner.HostLauncher{}, ReadyTTL: time.Nanosecond, Env: claudeEnv(t, fake)})
	ts := newTestServer(t, []providers.Provider{cl})
	chat := ts.createChat("alice", "claude")
	run := func(text string) {
		t.Helper()
		if code, body := ts.promptStatus(chat.ID, text); code != http.StatusAccepted {
			t.Fatalf("prompt %q: %d %s", text, code, body)
		}
		ts.waitIdle(chat.ID)
		if evs := ts.events(chat.ID); evs[len(evs)-1].Type != api.EventComplete {
			t.Fatalf("prompt %q: the run ended with %+v", text, evs[len(evs)-1])
		}
	}
	run("first") // the first check, not held: ready
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	failsafe := time.AfterFunc(time.Minute, func() { failed.Store(true); os.Remove(hold) })
	run("second") // stale: admitted, and the refresh starts (and blocks)
	testkit.Eventually(t, 2*time.Minute, func() bool { return fileExists(hold + ".entered") }, "the refresh entered")
	run("third") // the refresh still blocks
	failsafe.Stop()
	if failed.Load() {
		t.Fatal("a prompt waited for the blocked readiness probe of a provider known ready")
	}
	if fileExists(hold + ".done") {
		t.Fatal("the probe ended before it was released")
	}
	os.Remove(hold)
	// The CLI writes to HOME until then.
	testkit.Eventually(t, 2*time.Minute, func() bool { return fileExists(hold + ".done") }, "the probe's end")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
