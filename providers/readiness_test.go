package providers_test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"remote/providers"
)

// TestTestedVersionsMatchInstallScript keeps the one list of tested CLI
// versions (providers.Tested*) and scripts/install-clis, which installs
// what the contract tests run, equal.
func TestTestedVersionsMatchInstallScript(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "scripts", "install-clis"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"CLAUDE_VERSION": providers.TestedClaudeVersion, "CODEX_VERSION": providers.TestedCodexVersion} {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Errorf("scripts/install-clis sets no %s", name)
			continue
		}
		if string(m[1]) != want {
			t.Errorf("scripts/install-clis pins %s=%s, the Go side tests %s: change both", name, m[1], want)
		}
	}
}
