package runner

// Tests that kill the mutants gremlins found living in the run shim's
// launchers (lxdshim.go, shim.go) and process.go (make mutate
// PKGS=./providers/runner; docs/testing.md, "providers/runner: the run
// shim launchers and process.go"): each asserts a behaviour a user relies
// on, with literal values.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/internal/testkit"
	"remote/providers"
)

// TestShimContainerReleaseAfterAttachGone: the run's end is stored after
// its attach exec is gone (killed in the container): the release goes
// over a new attach, and the shim removes the run directory. When that
// new attach fails too, the daemon logs a warning naming the run.
func TestShimContainerReleaseAfterAttachGone(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rshimrel")
	var logged lockedBuffer
	cfg := &ShimConfig{Binary: testkit.ShimBinary(t), Logger: hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Warn})}
	l := (&LXDLauncher{Client: client, Shim: cfg}).Container(name)
	inside, err := l.(*LXDLauncher).shimPath()
	if err != nil {
		t.Fatal(err)
	}
	// runAndKillAttach runs a CLI to its end, then kills the run's
	// attach exec in the container.
	runAndKillAttach := func() *providers.RunSlot {
		slot := &providers.RunSlot{RunID: newRunID(t), Cursor: providers.NewCursor(false, providers.Pos{}, false)}
		p, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), providers.Command{Path: "echo", Args: []string{"abc"}, Dir: "/"})
		if err != nil {
			t.Fatal(err)
		}
		if out, _, err := drain(t, p); out != "abc\n" || err != nil {
			t.Fatalf("run: %q, %v", out, err)
		}
		attaches := func() string {
			return containerExec(t, client, name, "sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^"+inside+" attach ' && echo ${p#/proc/}; done")
		}
		pids := attaches()
		if pids == "" {
			t.Fatal("no attach process in the container")
		}
		containerExec(t, client, name, "sh", "-c", "kill -9 "+strings.ReplaceAll(pids, "\n", " "))
		if !eventually(func() bool { return attaches() == "" }) {
			t.Fatalf("attach processes %s left", attaches())
		}
		return slot
	}
	runDirs := func() string { return containerExec(t, client, name, "ls", "-A", ContainerRunsDir) }

	runAndKillAttach().Release()
	// The shim removes its directory as it exits, at once (10 s bound).
	gone := false
	for deadline := time.Now().Add(10 * time.Second); !gone && time.Now().Before(deadline); {
		gone = runDirs() == ""
	}
	if !gone {
		t.Fatalf("run directory left after the release: %q", runDirs())
	}
	if logged.String() != "" {
		t.Fatalf("logged: %s", logged.String())
	}

	// Now the new attach fails: the shim's path is a directory (a
	// stand-in for remote-shim would be replaced, not executed).
	slot := runAndKillAttach()
	containerExec(t, client, name, "sh", "-c", `rm "$0" && mkdir "$0"`, inside)
	slot.Release()
	if got := logged.String(); !strings.Contains(got, "[WARN]  release remote-shim: container="+name+" dir="+ContainerRunsDir+"/"+slot.RunID+" error=\""+inside+" in the container is a directory") {
		t.Fatalf("logged %q, want the release's warning", got)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func tail(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	return s[max(0, len(s)-60):]
}

// A container gets remote-shim as remote-shim-<the first 16 hex digits of
// its sha256>: a daemon whose shim binary was replaced (an upgrade)
// pushes the new one under a new name.
func TestShimDigestFollowsTheBinary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "remote-shim")
	cfg := &ShimConfig{Binary: bin}
	for _, c := range []struct{ content, want string }{
		{"shim v1\n", "ac97d72e0d821757"},
		{"shim v1\n", "ac97d72e0d821757"}, // unchanged: the cached digest
		{"shim v2, longer\n", "0a4ccd9fcdb1305c"},
	} {
		if err := os.WriteFile(bin, []byte(c.content), 0o755); err != nil {
			t.Fatal(err)
		}
		d, err := cfg.Digest()
		if err != nil || d != c.want {
			t.Fatalf("Digest of %q = %q, %v; want %s", c.content, d, err, c.want)
		}
		l := &LXDLauncher{Instance: "c1", Shim: cfg}
		if p, err := l.shimPath(); err != nil || p != "/usr/local/lib/remote/remote-shim-"+c.want {
			t.Fatalf("shim path %q, %v", p, err)
		}
	}
}

// After a daemon restart the re-attached run's prompt (written again by
// the next daemon, which does not know whether the CLI got it) reaches
// the CLI exactly once: dropped when the shim says the CLI had received
// stdin, forwarded when it had received none.
func TestShimReattachWritesStdinOnce(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	script := `read a; echo "a:$a"; read b; echo "b:$b"`
	for _, c := range []struct {
		name, before, want string
	}{
		{"CLI got stdin before the restart", "once\n", "a:once\nb:\n"},
		{"CLI got no stdin before the restart", "", "a:again\nb:\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			slot, handle := handleSlot(t)
			cmd := providers.Command{Path: "sh", Args: []string{"-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"}
			p, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), cmd)
			if err != nil {
				t.Fatal(err)
			}
			go io.Copy(io.Discard, p.Stderr())
			if c.before != "" {
				if _, err := io.WriteString(p.Stdin(), c.before); err != nil {
					t.Fatal(err)
				}
				if line, _ := bufio.NewReader(p.Stdout()).ReadString('\n'); line != "a:"+c.before {
					t.Fatalf("first line %q", line)
				}
			}
			slot.Detach()

			// The next daemon: its cursor replays from the start (no
			// event stored) and knows nothing of stdin.
			slot2 := &providers.RunSlot{RunID: slot.RunID, Attach: handle, Cursor: providers.NewCursor(true, providers.Pos{Line: -1}, false)}
			p2, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot2)), cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer slot2.Release()
			io.WriteString(p2.Stdin(), "again\n")
			p2.Stdin().Close()
			if out, _, err := drain(t, p2); out != c.want || err != nil {
				t.Fatalf("output after the re-attach %q, %v; want %q", out, err, c.want)
			}
		})
	}
}

// A CLI that exits 0 without finishing its turn is an error that says
// so; when its output ended in the middle of a line that does not parse,
// the error adds how many bytes were cut. A whole line that does not
// parse is no cut line.
func TestRunProcessUnfinishedTurnSaysWhy(t *testing.T) {
	t.Parallel()
	for script, want := range map[string]string{
		`printf 'text.delta hi\n'`:               "exited without finishing the turn",
		`printf 'text.delta hi\nbad line\n'`:     "exited without finishing the turn",
		`printf 'text.delta hi\nbad json cut'`:   "exited without finishing the turn: its output ended in the middle of a line (12 bytes that do not parse)",
		`printf 'bad json cut\ntext.delta hi\n'`: "exited without finishing the turn",
	} {
		_, emit := collect()
		err := RunProcess(context.Background(), &HostLauncher{}, shCommand(script), lineParser, emit, ProcessOptions{})
		if !errors.Is(err, providers.ErrUnfinishedTurn) || err.Error() != want {
			t.Errorf("%s: %v; want %q", script, err, want)
		}
	}
}

// A run the daemon detached from as it stops is not lost: Wait says the
// daemon detached, not that the shim is gone (the next daemon re-attaches
// to the run, which goes on).
func TestShimWaitAfterDetachIsNoLostShim(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	slot, handle := handleSlot(t)
	cmd := providers.Command{Path: "sh", Args: []string{"-c", "read line; echo got:$line"}, Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"}
	p, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), cmd)
	if err != nil {
		t.Fatal(err)
	}
	slot.Detach()
	err = p.Wait()
	if err == nil || errors.Is(err, providers.ErrShimGone) || !strings.HasPrefix(err.Error(), "detached from remote-shim: ") {
		t.Fatalf("Wait after the detach = %v", err)
	}

	// The run went on: the next daemon re-attaches and finishes it.
	slot2 := &providers.RunSlot{RunID: slot.RunID, Attach: handle, Cursor: providers.NewCursor(true, providers.Pos{Line: -1}, false)}
	p2, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot2)), cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer slot2.Release()
	io.WriteString(p2.Stdin(), "later\n")
	p2.Stdin().Close()
	if out, _, err := drain(t, p2); out != "got:later\n" || err != nil {
		t.Fatalf("after the re-attach: %q, %v", out, err)
	}
}

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
	return &Probe{Launcher: &HostLauncher{}, Binary: "fake-cli", Install: "npm i fake-cli",
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
	p.Auth = func(ctx context.Context, h ProbeHost) AuthStatus {
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
		p.Auth = func(context.Context, ProbeHost) AuthStatus {
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
	p.Auth = func(ctx context.Context, h ProbeHost) AuthStatus {
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
