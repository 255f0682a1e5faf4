package daemontest

import (
	"path/filepath"
	"testing"

	"remote/internal/testkit"
	"remote/providers/runner"
)

// Shim returns the ShimConfig a test wires into its launchers the way
// cmd/remoted does ([agent] shim_binary): the static remote-shim built
// once per test process, run directories under stateDir/runs, started
// detached (these machines have no systemd as PID 1).
func Shim(t testing.TB, stateDir string) *runner.ShimConfig {
	t.Helper()
	return &runner.ShimConfig{Binary: testkit.ShimBinary(t), RunsDir: filepath.Join(stateDir, "runs"), Systemd: runner.SystemdNever,
		Logger: testkit.Logger(t, "shim")}
}
