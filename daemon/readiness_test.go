package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
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
