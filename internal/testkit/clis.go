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

// Missing skips the test on a developer machine, or fails it in CI. In a
// -short run (make test-short) it skips, CI or not.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: integration prerequisite missing: "+format, args...)
	}
	if InCI() {
		t.Fatalf("CI: integration prerequisite missing: "+format, args...)
	}
	t.Skipf("integration prerequisite missing (run scripts/install-clis / scripts/lxd-setup): "+format, args...)
}

// The environment that selects the CLIs the real-CLI tests run (CONTRIBUTING.md,
// "Testing against the newest CLIs").
const (
	// CLIVersionsEnv: unset or "pinned" runs the pinned CLIs
	// scripts/install-clis installs into build/npm; "latest" runs the newest
	// published ones, which `scripts/install-clis latest` installs into
	// build/npm-latest (make test-latest).
	CLIVersionsEnv = "REMOTE_CLI_VERSIONS"
	// ClaudeBinaryEnv and CodexBinaryEnv name a binary (absolute path) to
	// run instead, whatever CLIVersionsEnv says.
	ClaudeBinaryEnv = "REMOTE_CLAUDE_BINARY"
	CodexBinaryEnv  = "REMOTE_CODEX_BINARY"
	// CLIRootEnv names the directory holding build/npm (default: the
	// module root). make mutate sets it: gremlins tests each mutant in a
	// copy of the module without symlinks, so a worktree's build/npm
	// symlink would be missing there and every real-CLI test would fail.
	CLIRootEnv = "REMOTE_CLI_ROOT"
)

// ClaudeBinary returns the Claude Code native binary the tests run: the
// pinned one scripts/install-clis installed, unless the environment
// selects another (CLIVersionsEnv, ClaudeBinaryEnv).
func ClaudeBinary(t testing.TB) string {
	t.Helper()
	return binary(t, ClaudeBinaryEnv, "node_modules/@anthropic-ai/claude-code-linux-x64/claude")
}

// CodexBinary returns the Codex CLI (static musl binary) the tests run:
// the pinned one scripts/install-clis installed, unless the environment
// selects another (CLIVersionsEnv, CodexBinaryEnv).
func CodexBinary(t testing.TB) string {
	t.Helper()
	return binary(t, CodexBinaryEnv, "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
}

// PinnedCLIs reports whether the tests run the pinned CLIs (the tested
// versions), so tests may assert those versions.
func PinnedCLIs() bool {
	v := os.Getenv(CLIVersionsEnv)
	return (v == "" || v == "pinned") && os.Getenv(ClaudeBinaryEnv) == "" && os.Getenv(CodexBinaryEnv) == ""
}

func binary(t testing.TB, override, rel string) string {
	t.Helper()
	Short(t, "an agent CLI")
	if p := os.Getenv(override); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 || !filepath.IsAbs(p) {
			t.Fatalf("%s=%q: not an executable absolute path", override, p)
		}
		return p
	}
	dir := "build/npm"
	switch v := os.Getenv(CLIVersionsEnv); v {
	case "", "pinned":
	case "latest":
		dir = "build/npm-latest"
	default:
		t.Fatalf("%s=%q: want pinned or latest", CLIVersionsEnv, v)
	}
	root := Root()
	if r := os.Getenv(CLIRootEnv); r != "" {
		root = r
	}
	p := filepath.Join(root, dir, rel)
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		Missing(t, "%s/%s not installed (scripts/install-clis %s)", dir, rel, map[bool]string{true: "latest", false: ""}[dir != "build/npm"])
	}
	return p
}
