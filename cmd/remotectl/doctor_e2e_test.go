package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"remote/internal/testkit"
	"remote/internal/testkit/fakeopenai"
	"remote/providers"
)

// TestDoctorHealthy: a real remoted on real LXD with both pinned CLIs
// ready: `remotectl doctor` exits 0, every check ok (host_user root is a
// warning); `remotectl providers` shows version and login.
func TestDoctorHealthy(t *testing.T) {
	codex := testkit.CodexBinary(t)
	testkit.LXD(t) // skips (fails in CI) without LXD
	codexHome := filepath.Join(t.TempDir(), "codex-home")
	if err := fakeopenai.WriteCodexConfig(codexHome, fakeopenai.CodexConfig{BaseURL: "http://127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	e := startE2EWith(t, fmt.Sprintf("[providers.codex]\nbinary = %q\nenv = { CODEX_HOME = %q }\n", codex, codexHome))
	r := e.run("", "doctor")
	if r.code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wants := []string{"ok       lxd:", "reachable, server version ", "ok       socket:", "mode 0660",
		"ok       state_dir:", "ok       secrets_key:", "(mode 0600)", "ok       provider claude:", providers.TestedClaudeVersion + " (tested), logged in: api-key",
		"ok       provider codex:", providers.TestedCodexVersion + " (tested), logged in: model-provider"}
	if !testkit.PinnedCLIs() { // REMOTE_CLI_VERSIONS=latest: untested versions are a warning
		wants = []string{"ok       lxd:", "warn     provider claude:", "is not the tested " + providers.TestedClaudeVersion, "warn     provider codex:"}
	}
	for _, want := range wants {
		if !strings.Contains(squash(r.stdout), squash(want)) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.stdout)
		}
	}
	out := e.must("providers")
	for _, want := range []string{"READY", "VERSION", "AUTH", "yes", "api-key"} {
		if !strings.Contains(out, want) {
			t.Errorf("providers lacks %q:\n%s", want, out)
		}
	}
}

// TestFaultDoctorBrokenHost: a secrets key others can read is a problem
// line, and doctor exits 1. A missing Codex binary is a warning while no
// chat or project uses Codex (every provider is enabled by default; an
// operator who uses Claude only need not install Codex), and a problem
// once a chat of it exists. The [lxd] profile and the default forges
// have their lines.
func TestFaultDoctorBrokenHost(t *testing.T) {
	e := startE2EWith(t, "[providers.codex]\nbinary = \"codex-not-installed-here\"\n")
	key := filepath.Join(e.dir, "state", "secrets.key")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := `"codex-not-installed-here" not found on the host user's PATH: install Codex (npm install -g @openai/codex@` + providers.TestedCodexVersion + `) or set [providers.codex] binary`
	r := e.run("", "doctor")
	if r.code != 1 || r.stderr != "remotectl: doctor: 1 problem(s)\n" ||
		!strings.Contains(squash(r.stdout), squash("warn     provider codex:  "+missing+" (no chat or project uses it; [providers.codex] enabled = false leaves it out)")) {
		t.Fatalf("doctor, Codex unused: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	e.must("chat", "create", "-provider", "codex", "-cwd", e.dir)
	r = e.run("", "doctor")
	if r.code != 1 || r.stderr != "remotectl: doctor: 2 problem(s)\n" {
		t.Fatalf("doctor: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	for _, want := range []string{
		"problem  provider codex:  " + missing + " (needed: 1 chat of it)",
		"problem  secrets_key:     " + key + " has mode 0644: it must be 0600 (or 0400)",
		"ok       profile default: in LXD ([lxd] profiles)",
		"ok       forge github.com: github at https://api.github.com; no project's repository is on this host",
	} {
		if !strings.Contains(squash(r.stdout), squash(want)) {
			t.Errorf("doctor output lacks\n%q:\n%s", want, r.stdout)
		}
	}
	out := e.must("providers")
	if !strings.Contains(out, "not installed") || !strings.Contains(out, `codex: "codex-not-installed-here" not found`) {
		t.Errorf("providers:\n%s", out)
	}
}

// squash collapses runs of spaces (the table's padding).
func squash(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}
