package main

import (
	"os/exec"
	"strings"
	"testing"

	"remote/internal/testkit"
)

// TestMakeRunConfig: `make run` starts remoted exactly as the README says
// (embedded defaults, state under ./var, socket ./var/remoted.sock), and
// `make run CONFIG=file` passes -config file (quoted, so a path with a
// space stays one argument) with the same state directory and socket.
// make -n prints the recipe without building or starting anything.
func TestMakeRunConfig(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		testkit.Missing(t, "make")
	}
	last := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(mk, append([]string{"--no-print-directory", "-n", "run"}, args...)...)
		cmd.Dir = testkit.Root()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n run %v: %v\n%s", args, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "build/bin/remoted -state-dir ./var -socket ./var/remoted.sock"},
		{[]string{"CONFIG=/etc/remote/my remoted.toml"}, "build/bin/remoted -config '/etc/remote/my remoted.toml' -state-dir ./var -socket ./var/remoted.sock"},
	} {
		if got := last(tt.args...); got != tt.want {
			t.Errorf("make run %v starts\n%s\nwant\n%s", tt.args, got, tt.want)
		}
	}
}
