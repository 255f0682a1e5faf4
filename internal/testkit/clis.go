package testkit

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Root returns the module's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// InCI reports whether the tests run in CI, where integration
// prerequisites must be present: tests fail instead of skipping.
func InCI() bool { return os.Getenv("CI") != "" }

// Missing skips the test on a developer machine, or fails it in CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI: integration prerequisite missing: "+format, args...)
	}
	t.Skipf("integration prerequisite missing (run scripts/install-clis / scripts/lxd-setup): "+format, args...)
}

// ClaudeBinary returns the pinned Claude Code native binary that
// scripts/install-clis installed.
func ClaudeBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "build/npm/node_modules/@anthropic-ai/claude-code-linux-x64/claude")
}

// CodexBinary returns the pinned Codex CLI (static musl binary) that
// scripts/install-clis installed.
func CodexBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "build/npm/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
}

func binary(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(Root(), rel)
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		Missing(t, "%s not installed", rel)
	}
	return p
}
