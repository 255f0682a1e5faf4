package testkit

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// TestMain removes the binaries built for this package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBinaries()
	os.Exit(code)
}

func TestBuildCmd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds remotectl")
	}
	first, err := buildCmd("remotectl", "remotectl", nil)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(first)
	if err != nil {
		t.Fatalf("built binary: %v", err)
	}
	if got := Binaries(t, "remotectl"); len(got) != 1 || got[0] != first {
		t.Fatalf("Binaries(remotectl) = %q, want [%q]", got, first)
	}
	after, err := os.Stat(first)
	if err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("second request rebuilt or lost %s: %v", first, err)
	}

	_, err = buildCmd("no-such-command", "no-such-command", nil)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("building a missing command: err = %v, want an *exec.ExitError", err)
	}
	if _, again := buildCmd("no-such-command", "no-such-command", nil); again != err { //nolint:errorlint // the cached error itself, not a new one
		t.Fatalf("failed build retried: %v, then %v", err, again)
	}
}
