package probe

// Probe tests moved with readiness.go from providers/runner/shim_lifecycle_test.go.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/internal/testkit"
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
// --version, its login): a ready answer is reused, anything else is
// checked again on the next call, Invalidate drops the answer; the version
// is asked once per binary file.
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
	p.Invalidate() // drops the answer; checks again in the background
	if r := p.Readiness(context.Background()); r.Ready || logins < 3 {
		t.Fatalf("after Invalidate: %+v after %d login checks", r, logins)
	}
	settle(p)
	if versions() != 1 {
		t.Fatalf("--version ran %d times for one binary file, want 1", versions())
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
	t.Run("--version timed out is asked again", func(t *testing.T) {
		dir, path := fakeCLI(t, `if [ -e "$0.slow" ]; then rm "$0.slow"; exec sleep 10; fi; echo 'fake 1.2.3'`+"\n")
		if err := os.WriteFile(path+".slow", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		p := probeFor(dir)
		p.Timeout = 200 * time.Millisecond
		if r := p.Readiness(context.Background()); r.Ready {
			t.Fatalf("timed out: %+v", r)
		}
		p.Timeout = 0
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

// gate is a login check that blocks, while held, until released: calls
// counts the checks begun; entered receives one value as each begins.
type gate struct {
	mu       sync.Mutex
	calls    int
	held     bool
	loggedIn bool
	entered  chan int
	release  chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan int, 100), release: make(chan struct{}), loggedIn: true}
}

func (g *gate) auth(ctx context.Context, _ Host) AuthStatus {
	g.mu.Lock()
	g.calls++
	n, held, loggedIn := g.calls, g.held, g.loggedIn
	release := g.release
	g.mu.Unlock()
	g.entered <- n
	if held {
		<-release
	}
	if loggedIn {
		return AuthStatus{LoggedIn: true, Auth: providers.AuthSubscription}
	}
	return AuthStatus{Auth: providers.AuthNone, Action: "run fake-cli login"}
}

func (g *gate) set(held, loggedIn bool) {
	g.mu.Lock()
	g.held, g.loggedIn = held, loggedIn
	g.mu.Unlock()
}

func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// settle waits for the probe's check under way, if any, to end.
func settle(p *Probe) {
	p.mu.Lock()
	f := p.flight
	p.mu.Unlock()
	if f != nil {
		<-f.done
	}
}

// waitForWaiter returns once a caller waits for a check.
func waitForWaiter(t *testing.T, p *Probe) {
	t.Helper()
	testkit.Eventually(t, time.Minute, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.waiting > 0
	}, "a caller waiting for the check")
}

// A prompt never waits for the probe of a provider known ready: once the
// ready answer is older than the TTL, Readiness still answers it at once
// while one check runs in the background (here blocked in the login
// check until released), and the next call after that check sees its
// answer. The answers served say when they were checked.
func TestProbeReadyNeverWaitsForRefresh(t *testing.T) {
	t.Parallel()
	dir, _ := fakeCLI(t, "echo 'fake 1.2.3'\n")
	p := probeFor(dir)
	g := newGate()
	p.Auth = g.auth
	first := p.Readiness(context.Background())
	if !first.Ready || g.count() != 1 {
		t.Fatalf("first answer %+v after %d login checks", first, g.count())
	}
	<-g.entered
	p.TTL = time.Nanosecond // every answer is stale from now on
	g.set(true, false)      // the next check blocks, then finds the login gone

	answered := make(chan providers.Readiness, 1)
	go func() { answered <- p.Readiness(context.Background()) }()
	var r providers.Readiness
	select {
	case r = <-answered:
	case <-g.entered:
		// The refresh is blocked: the stale answer must come without
		// releasing it. (Failsafe: the old synchronous probe would wait
		// here for ever.)
		select {
		case r = <-answered:
		case <-time.After(30 * time.Second):
			close(g.release)
			t.Fatal("Readiness waited for the blocked probe of a provider known ready")
		}
	}
	if !r.Ready || !r.CheckedAt.Equal(first.CheckedAt) {
		t.Fatalf("while the refresh runs: %+v, want the stale ready answer checked at %s", r, first.CheckedAt)
	}
	close(g.release)
	settle(p)
	if g.count() != 2 {
		t.Fatalf("%d login checks, want 2 (the first, one refresh)", g.count())
	}
	g.set(false, false)
	if r := p.Readiness(context.Background()); r.Ready || r.Action != "run fake-cli login" {
		t.Fatalf("after the refresh found the login gone: %+v", r)
	}
}

// Single flight: while a stale ready answer is served, however many
// callers ask, one check runs; callers with no answer yet all wait for
// the one check under way.
func TestProbeRefreshSingleFlight(t *testing.T) {
	t.Parallel()
	dir, _ := fakeCLI(t, "echo 'fake 1.2.3'\n")
	p := probeFor(dir)
	g := newGate()
	p.Auth = g.auth
	g.set(true, true)

	const callers = 20
	answers := make(chan providers.Readiness, callers)
	for range callers {
		go func() { answers <- p.Readiness(context.Background()) }()
	}
	<-g.entered // the one check, blocked until released
	close(g.release)
	for range callers {
		if r := <-answers; !r.Ready {
			t.Fatalf("cold callers: %+v", r)
		}
	}
	if n := g.count(); n != 1 {
		t.Fatalf("%d cold callers ran %d login checks, want 1", callers, n)
	}

	p.TTL = time.Nanosecond
	g.mu.Lock()
	g.release = make(chan struct{})
	g.mu.Unlock()
	for range callers {
		if r := p.Readiness(context.Background()); !r.Ready {
			t.Fatalf("stale ready: %+v", r)
		}
	}
	<-g.entered // the refresh, blocked
	for range callers {
		p.Readiness(context.Background())
	}
	close(g.release)
	settle(p)
	if n := g.count(); n != 2 {
		t.Fatalf("%d calls on a stale answer ran %d login checks, want 2 (the first, one refresh)", 2*callers, n)
	}
}

// A "not ready" answer is checked again before it is given, even when a
// check is under way: one begun before the caller asked (perhaps before
// the fix) is not enough. Here a check blocks, the login is fixed, a
// caller asks, the old check ends "not logged in": the caller gets the
// ready answer of a check of its own.
func TestProbeNotReadyCheckedAgain(t *testing.T) {
	t.Parallel()
	dir, _ := fakeCLI(t, "echo 'fake 1.2.3'\n")
	p := probeFor(dir)
	g := newGate()
	p.Auth = g.auth
	g.set(false, false)
	if r := p.Readiness(context.Background()); r.Ready {
		t.Fatalf("logged out: %+v", r)
	}
	<-g.entered
	g.set(true, false) // a check that began before the fix...
	p.Refresh()
	<-g.entered
	answered := make(chan providers.Readiness, 1)
	go func() { answered <- p.Readiness(context.Background()) }()
	waitForWaiter(t, p) // the caller waits for the old check
	g.set(false, true)  // ...the fix; the next check is not held
	close(g.release)
	if r := <-answered; !r.Ready || !r.LoggedIn {
		t.Fatalf("after the fix: %+v, want ready (a check begun after the call)", r)
	}
	settle(p)
}

// A caller whose context ends first gets a not-ready answer saying the
// check did not finish; the check goes on and its answer is kept.
func TestProbeCallerGivesUp(t *testing.T) {
	t.Parallel()
	dir, _ := fakeCLI(t, "echo 'fake 1.2.3'\n")
	p := probeFor(dir)
	g := newGate()
	p.Auth = g.auth
	g.set(true, true)
	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan providers.Readiness, 1)
	go func() { answered <- p.Readiness(ctx) }()
	<-g.entered
	cancel()
	if r := <-answered; r.Ready || r.Action != `the readiness check of "fake-cli" did not finish: context canceled` {
		t.Fatalf("cancelled caller: %+v", r)
	}
	close(g.release)
	settle(p)
	if r := p.Readiness(context.Background()); !r.Ready || g.count() != 1 {
		t.Fatalf("next call: %+v after %d login checks, want the kept answer of the one check", r, g.count())
	}
}
