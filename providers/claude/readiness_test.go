package claude

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
)

// readyFor builds a Claude adapter over the real CLI (or binary) with HOME
// pointed at home and returns its readiness.
func readyFor(t *testing.T, binary, home string, env map[string]string) providers.Readiness {
	t.Helper()
	e := map[string]string{"HOME": home}
	for k, v := range env {
		e[k] = v
	}
	p := New(providers.AdapterConfig{Binary: binary, Env: e, Host: &runner.HostLauncher{}})
	return p.Readiness(context.Background())
}

func TestReadinessMissingBinary(t *testing.T) {
	for _, bin := range []string{"claude-not-installed-here", filepath.Join(t.TempDir(), "claude")} {
		r := readyFor(t, bin, t.TempDir(), nil)
		if r.Ready || r.BinaryFound || r.Binary != bin {
			t.Errorf("%s: got %+v, want not ready, not found", bin, r)
		}
		if !strings.Contains(r.Action, "not found on the host user's PATH") || !strings.Contains(r.Action, "npm install -g @anthropic-ai/claude-code@"+providers.TestedClaudeVersion) {
			t.Errorf("action = %q", r.Action)
		}
	}
}

func TestReadinessNotLoggedIn(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	r := readyFor(t, bin, t.TempDir(), nil)
	if r.Ready || !r.BinaryFound || r.Binary != bin || r.LoggedIn || r.Auth != providers.AuthNone {
		t.Fatalf("got %+v", r)
	}
	if testkit.PinnedCLIs() && (r.Version != providers.TestedClaudeVersion || !r.Tested) {
		t.Errorf("version %q tested %v, want %s", r.Version, r.Tested, providers.TestedClaudeVersion)
	}
	if r.Action != LoginAction {
		t.Errorf("action = %q", r.Action)
	}
}

func TestReadinessLoggedIn(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	home := t.TempDir()
	// The shape `claude /login` writes (a subscription login).
	cred := `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-test","refreshToken":"sk-ant-ort01-test",` +
		`"expiresAt":9999999999999,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte(cred), 0o600); err != nil {
		t.Fatal(err)
	}
	r := readyFor(t, bin, home, nil)
	if !r.Ready || !r.LoggedIn || r.Auth != providers.AuthSubscription || (r.Action != "" && testkit.PinnedCLIs()) {
		t.Fatalf("subscription: got %+v", r)
	}
	r = readyFor(t, bin, t.TempDir(), map[string]string{"ANTHROPIC_API_KEY": "sk-ant-api-test"})
	if !r.Ready || !r.LoggedIn || r.Auth != providers.AuthAPIKey {
		t.Fatalf("api key: got %+v", r)
	}
}

// An untested version is ready, with a warning naming both versions.
func TestReadinessUntestedVersion(t *testing.T) {
	real := testkit.ClaudeBinary(t)
	wrapper := filepath.Join(t.TempDir(), "claude")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '9.9.9 (Claude Code)'; exit 0; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := readyFor(t, wrapper, t.TempDir(), map[string]string{"ANTHROPIC_API_KEY": "sk-ant-api-test"})
	if !r.Ready || r.Version != "9.9.9" || r.Tested || r.TestedVersion != providers.TestedClaudeVersion {
		t.Fatalf("got %+v", r)
	}
	want := `warning: version "9.9.9" is not the tested ` + providers.TestedClaudeVersion
	if !strings.HasPrefix(r.Action, want) {
		t.Errorf("action = %q, want prefix %q", r.Action, want)
	}
}

// TestModelAliasesMatchCLI: every alias the real CLI's --help names for
// --model is declared in Models.
func TestModelAliasesMatchCLI(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(string(out)), " ")
	i := strings.Index(help, "--model <model>")
	if i < 0 {
		t.Fatalf("--help has no --model:\n%s", out)
	}
	line := help[i:min(len(help), i+240)]
	aliases := regexp.MustCompile(`'([a-z]+)'`).FindAllStringSubmatch(line, -1)
	if len(aliases) == 0 {
		t.Fatalf("no aliases in %q", line)
	}
	for _, m := range aliases {
		if !slices.Contains(Models, m[1]) {
			t.Errorf("the CLI names alias %q, Models is %v", m[1], Models)
		}
	}
}
