package probe

// Probe tests moved with readiness.go from providers/runner/mutants3_test.go.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/providers"
	"remote/providers/runner"
)

// fakeCLI writes an executable script named fake-cli into a new directory
// and returns the directory and the script's path.
func fakeCLI(t *testing.T, script string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "fake-cli")
	// Written by a child: a write descriptor held in this process could
	// leak into a parallel test's fork and make the exec fail (ETXTBSY).
	write := exec.Command("sh", "-c", `cat > "$0" && chmod 755 "$0"`, path)
	write.Stdin = strings.NewReader("#!/bin/sh\n" + script)
	if out, err := write.CombinedOutput(); err != nil {
		t.Fatalf("write %s: %v %s", path, err, out)
	}
	return dir, path
}

func probeFor(dir string) *Probe {
	return &Probe{Launcher: &runner.HostLauncher{}, Binary: "fake-cli", Install: "npm i fake-cli",
		Env:          func() []string { return []string{"PATH=" + dir + ":/usr/bin:/bin"} },
		ParseVersion: func(out string) string { return strings.TrimPrefix(strings.TrimSpace(out), "fake ") }}
}

// A provider's readiness (its CLI found on the host user's PATH, its
// --version, its login): a ready answer is reused for 30 s, anything else
// is checked again on the next call; the version is asked once per binary
// file.
func TestProbeReadinessCachesReadyOnly(t *testing.T) {
	t.Parallel()
	dir, path := fakeCLI(t, `echo x >> "$0.calls"; echo "fake 1.2.3"`+"\n")
	versions := func() int { b, _ := os.ReadFile(path + ".calls"); return strings.Count(string(b), "x") }
	logins := 0
	loggedIn := false
	p := probeFor(dir)
	p.Tested = "1.2.3"
	p.Auth = func(ctx context.Context, h Host) AuthStatus {
		logins++
		if loggedIn {
			return AuthStatus{LoggedIn: true, Auth: providers.AuthSubscription}
		}
		return AuthStatus{Auth: providers.AuthNone, Action: "run fake-cli login"}
	}
	r := p.Readiness(context.Background())
	if r.Ready || r.Action != "run fake-cli login" || r.Binary != path || !r.BinaryFound || r.Version != "1.2.3" || !r.Tested || r.Auth != "none" {
		t.Fatalf("not logged in: %+v", r)
	}
	loggedIn = true
	r = p.Readiness(context.Background()) // not ready: checked again
	if !r.Ready || r.Action != "" || !r.LoggedIn || r.Auth != "subscription" || logins != 2 {
		t.Fatalf("logged in: %+v after %d login checks", r, logins)
	}
	loggedIn = false
	if r := p.Readiness(context.Background()); !r.Ready || logins != 2 { // ready: reused
		t.Fatalf("within 30 s: %+v after %d login checks, want the cached ready answer", r, logins)
	}
	if versions() != 1 {
		t.Fatalf("--version ran %d times for one binary file, want 1", versions())
	}
	p.Invalidate()
	if r := p.Readiness(context.Background()); r.Ready || logins != 3 {
		t.Fatalf("after Invalidate: %+v after %d login checks", r, logins)
	}
	// A TTL of its own: 1 ns is always stale.
	p.TTL = time.Nanosecond
	loggedIn = true
	p.Readiness(context.Background())
	p.Readiness(context.Background())
	if logins != 5 || versions() != 1 {
		t.Fatalf("TTL 1ns: %d login checks, %d --version runs; want 5 and 1", logins, versions())
	}
}

// What a probe says when the CLI cannot be used: not on the PATH (the
// install line), a failing --version (its exit and first stderr line), an
// untested version (a warning; still ready), a login the CLI cannot tell
// (ready).
func TestProbeReadinessActions(t *testing.T) {
	t.Parallel()
	t.Run("not on the PATH", func(t *testing.T) {
		p := probeFor(t.TempDir())
		r := p.Readiness(context.Background())
		if r.Ready || r.BinaryFound || r.Binary != "fake-cli" || r.Action != `"fake-cli" not found on the host user's PATH: npm i fake-cli` {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("--version fails", func(t *testing.T) {
		dir, path := fakeCLI(t, "echo '  first line' >&2; echo second >&2; exit 3\n")
		r := probeFor(dir).Readiness(context.Background())
		if r.Ready || r.Action != path+" --version failed as the host user: exit status 3 first line" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("--version cancelled is asked again", func(t *testing.T) {
		dir, _ := fakeCLI(t, "echo 'fake 1.2.3'\n")
		p := probeFor(dir)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if r := p.Readiness(ctx); r.Ready {
			t.Fatalf("with a cancelled context: %+v", r)
		}
		if r := p.Readiness(context.Background()); !r.Ready || r.Version != "1.2.3" || r.Auth != "unknown" {
			t.Fatalf("next call: %+v", r)
		}
	})
	t.Run("--version times out", func(t *testing.T) {
		dir, path := fakeCLI(t, "exec sleep 10\n")
		p := probeFor(dir)
		p.Timeout = 200 * time.Millisecond
		r := p.Readiness(context.Background())
		if r.Ready || r.Action != path+" --version failed as the host user: timed out after 200ms: context deadline exceeded" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("untested version", func(t *testing.T) {
		dir, _ := fakeCLI(t, "echo 'fake 1.2.4'\n")
		p := probeFor(dir)
		p.Tested = "1.2.3"
		r := p.Readiness(context.Background())
		if !r.Ready || r.Tested || r.TestedVersion != "1.2.3" || r.Action != `warning: version "1.2.4" is not the tested 1.2.3; it may not match the contract (scripts/install-clis pins the tested one)` {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("no tested version", func(t *testing.T) {
		dir, _ := fakeCLI(t, "exit 0\n") // no version either
		r := probeFor(dir).Readiness(context.Background())
		if !r.Ready || r.Tested || r.Version != "" || r.Action != "" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("stdin closed", func(t *testing.T) {
		dir, _ := fakeCLI(t, "cat; echo 'fake 1.2.3'\n") // reads stdin to its end
		p := probeFor(dir)
		p.Timeout = 5 * time.Second
		if r := p.Readiness(context.Background()); !r.Ready || r.Version != "1.2.3" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("login unknown", func(t *testing.T) {
		dir, _ := fakeCLI(t, "echo 'fake 1.2.3'\n")
		p := probeFor(dir)
		p.Auth = func(context.Context, Host) AuthStatus {
			return AuthStatus{Auth: providers.AuthUnknown, Action: "unused"}
		}
		if r := p.Readiness(context.Background()); !r.Ready || r.LoggedIn || r.Auth != "unknown" || r.Action != "" {
			t.Fatalf("%+v", r)
		}
	})
}

// A login check runs the CLI and reads files as the host user, keeping at
// most 64 KiB of what it gets.
func TestProbeHostKeeps64KiB(t *testing.T) {
	t.Parallel()
	dir, _ := fakeCLI(t, `if [ "$1" = --version ]; then echo 'fake 1.2.3'; exit 0; fi; head -c 70000 /dev/zero | tr '\0' o; head -c 70000 /dev/zero | tr '\0' e >&2`+"\n")
	file := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(file, []byte(strings.Repeat("f", 70000)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := probeFor(dir)
	var out, errOut string
	var content []byte
	var runErr, readErr error
	p.Auth = func(ctx context.Context, h Host) AuthStatus {
		out, errOut, runErr = h.Run(ctx, "status")
		content, readErr = h.ReadFile(ctx, file)
		return AuthStatus{LoggedIn: true, Auth: providers.AuthSubscription}
	}
	if r := p.Readiness(context.Background()); !r.Ready {
		t.Fatalf("%+v", r)
	}
	if runErr != nil || out != strings.Repeat("o", 65536) || errOut != strings.Repeat("e", 65536) {
		t.Fatalf("Run kept %d stdout, %d stderr bytes, %v; want 65536 each", len(out), len(errOut), runErr)
	}
	if readErr != nil || string(content) != strings.Repeat("f", 65536) {
		t.Fatalf("ReadFile kept %d bytes, %v; want 65536", len(content), readErr)
	}
}
