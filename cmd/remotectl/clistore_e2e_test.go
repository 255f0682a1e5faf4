package main

import (
	"strings"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
)

// TestProvidersInstallE2E: `remotectl providers install codex` against a
// real remoted installs the tested Codex with the host's npm (the real
// package, from npm's cache or the registry) into the daemon's store and
// selects it; `providers` and `doctor` show it; an untested version needs
// -untested; a hostile version is refused.
func TestProvidersInstallE2E(t *testing.T) {
	testkit.CodexBinary(t) // scripts/install-clis ran: npm and its cache are there
	e := startE2EWith(t, "")
	v := providers.TestedCodexVersion

	r := e.run("", "providers", "install", "codex@9.9.9")
	if r.code == 0 || !strings.Contains(r.stderr, "codex 9.9.9 (tested: "+v+"; say -untested to install it anyway)") {
		t.Fatalf("untested install: exit %d\n%s", r.code, r.stderr)
	}
	r = e.run("", "providers", "select", "codex@../..")
	if r.code == 0 || !strings.Contains(r.stderr, `invalid cli version "../.."`) {
		t.Fatalf("hostile select: exit %d\n%s", r.code, r.stderr)
	}
	out := e.must("providers", "install", "codex")
	if !strings.Contains(out, "store codex: *"+v+"\n") || !strings.Contains(out, "store claude: none (remotectl providers install claude)\n") {
		t.Fatalf("install output:\n%s", out)
	}
	if out := e.must("providers"); !strings.Contains(out, "store codex: *"+v+"\n") {
		t.Fatalf("providers lacks the store:\n%s", out)
	}
	r = e.run("", "doctor")
	if !strings.Contains(r.stdout, "store codex:") || !strings.Contains(r.stdout, v+" selected (tested), mounted read-only into project containers") {
		t.Fatalf("doctor:\n%s", r.stdout)
	}
}
