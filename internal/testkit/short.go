package testkit

import (
	"os"
	"testing"
)

// Short skips the test in a -short run (make test-short), CI or not: it
// needs what, one of the components that run leaves out (root, LXD, an
// agent CLI, Chromium). The helpers that reach those components (LXD,
// ClaudeBinary, CodexBinary, DevImageTarball, RequirePool, Tmpfs,
// NeedsRoot, Missing) call it first, so a -short run skips before any
// probe, quickly; a test reaching one of them without a helper calls it
// itself.
func Short(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: needs %s (make test runs it)", what)
	}
}

// NeedsRoot skips the test unless it runs as root (uid 0), and in a
// -short run: why says what root is for.
func NeedsRoot(t testing.TB, why string) {
	t.Helper()
	Short(t, "root")
	if os.Getuid() != 0 {
		t.Skipf("needs root: %s", why)
	}
}
