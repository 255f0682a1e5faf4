package codex

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
)

func codexReadiness(t *testing.T, binary, auth string) providers.Readiness {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "codex-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		if err := os.WriteFile(filepath.Join(home, "auth.json"), []byte(auth), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := New(providers.AdapterConfig{Binary: binary, Env: map[string]string{"CODEX_HOME": home, "HOME": root},
		Host: &runner.HostLauncher{}})
	return p.Readiness(context.Background())
}

// chatGPTAuth is an auth.json of the shape `codex login` writes for a
// ChatGPT subscription (unsigned test tokens).
func chatGPTAuth() string {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	jwt := b64(`{"alg":"none","typ":"JWT"}`) + "." +
		b64(`{"email":"t@example.com","https://api.openai.com/auth":{"chatgpt_plan_type":"plus","chatgpt_account_id":"acc-1"}}`) + ".sig"
	return `{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"` + jwt + `","access_token":"` + jwt +
		`","refresh_token":"rt-test","account_id":"acc-1"},"last_refresh":"2026-12-01T00:00:00Z"}`
}

func TestReadinessCodex(t *testing.T) {
	bin := testkit.CodexBinary(t)
	cases := []struct {
		name, auth, wantAuth, wantAction string
		ready                            bool
	}{
		{"not logged in", "", providers.AuthNone, LoginAction, false},
		{"chatgpt", chatGPTAuth(), providers.AuthSubscription, "", true},
		{"api key", `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-never-shown"}`, providers.AuthAPIKey, APIKeyAction, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := codexReadiness(t, bin, tc.auth)
			if r.Ready != tc.ready || r.Auth != tc.wantAuth || (r.Action != tc.wantAction && (testkit.PinnedCLIs() || !tc.ready)) || r.LoggedIn != tc.ready {
				t.Fatalf("got %+v, want ready=%v auth=%s action=%q", r, tc.ready, tc.wantAuth, tc.wantAction)
			}
			if !r.BinaryFound || r.Binary != bin || (testkit.PinnedCLIs() && (r.Version != providers.TestedCodexVersion || !r.Tested)) {
				t.Errorf("binary/version: %+v", r)
			}
			if strings.Contains(r.Action, "sk-never-shown") {
				t.Errorf("the key leaked into the action: %q", r.Action)
			}
		})
	}
}

func TestReadinessCodexMissingBinary(t *testing.T) {
	r := codexReadiness(t, "codex-not-installed-here", "")
	if r.Ready || r.BinaryFound || r.Auth != providers.AuthUnknown {
		t.Fatalf("got %+v", r)
	}
	want := `"codex-not-installed-here" not found on the host user's PATH: install Codex (npm install -g @openai/codex@` + providers.TestedCodexVersion + `) or set [providers.codex] binary`
	if r.Action != want {
		t.Errorf("action = %q, want %q", r.Action, want)
	}
}

// A CODEX_HOME configured with a custom model provider (the fake's
// config.toml, env_key auth) needs no login: ready, auth model-provider.
func TestReadinessCodexModelProvider(t *testing.T) {
	e := newEnv(t)
	r := e.p.Readiness(context.Background())
	if !r.Ready || !r.LoggedIn || r.Auth != providers.AuthModelProvider || (r.Action != "" && testkit.PinnedCLIs()) {
		t.Fatalf("got %+v", r)
	}
}
