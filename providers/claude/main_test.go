package claude

import (
	"os"
	"testing"

	"remote/internal/testkit"
)

// TestMain removes the binaries the tests built (testkit.ShimBinary),
// which would otherwise stay in a temporary directory after every run.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinaries()
	os.Exit(code)
}
