package runner

// Re-attaching to a run's shim (host and container): stdin delivered once
// whether the re-attach comes before or after it, the release over a new
// connection, orphans released without a shim, the digest that names the
// shim binary, and the container launcher's edges.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/runner/runnertest"
	"remote/providers/shim"
)

// The shim's copy in a container is named by the first 16 hex digits of
// the binary's sha256, recomputed when the binary changes.
func TestShimDigestIsSHA256Prefix(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "remote-shim")
	if err := os.WriteFile(bin, []byte("abc"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &ShimConfig{Binary: bin}
	for range 2 { // the second answer comes from the cache
		if d, err := c.Digest(); err != nil || d != "ba7816bf8f01cfea" {
			t.Fatalf("Digest of %q = %q, %v; want ba7816bf8f01cfea", "abc", d, err)
		}
	}
	if err := os.WriteFile(bin, []byte("abcd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Digest(); err != nil || d != "88d4266fd4e6338d" {
		t.Fatalf("Digest of %q = %q, %v; want 88d4266fd4e6338d", "abcd", d, err)
	}
	if _, err := (&ShimConfig{Binary: filepath.Join(t.TempDir(), "none")}).Digest(); err == nil || !strings.Contains(err.Error(), "remote-shim binary: ") {
		t.Fatalf("Digest of a missing binary: %v", err)
	}
}

// A daemon without remote-shim (a nil ShimConfig) has no orphans to
// release at start-up, and asks about no run.
func TestReleaseOrphansWithoutShim(t *testing.T) {
	t.Parallel()
	keep := func(string) bool { t.Error("keep called without a shim"); return true }
	if n := (*ShimConfig)(nil).ReleaseOrphans(context.Background(), keep); n != 0 {
		t.Fatalf("nil ShimConfig released %d", n)
	}
	if n := (&ShimConfig{}).ReleaseOrphans(context.Background(), keep); n != 0 {
		t.Fatalf("ShimConfig without RunsDir released %d", n)
	}
}

// A run whose CLI had got no stdin when the daemon stopped gets its
// prompt from the next daemon: the stdin write after a re-attach is not
// dropped as one the CLI already had.
func TestShimReattachBeforeStdinDeliversIt(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	slot, handle := handleSlot(t)
	p, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)),
		providers.Command{Path: "cat", Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	slot.Detach() // the daemon stops before it wrote the prompt
	go io.Copy(io.Discard, p.Stderr())
	io.Copy(io.Discard, p.Stdout())
	// Detached, the run is not reported as one whose shim is gone.
	if err := p.Wait(); errors.Is(err, providers.ErrShimGone) || err == nil || !strings.HasPrefix(err.Error(), "detached from remote-shim: ") {
		t.Fatalf("Wait after Detach = %v", err)
	}

	slot2 := &providers.RunSlot{RunID: slot.RunID, Attach: handle, Cursor: providers.NewCursor(true, providers.Pos{Line: -1}, false)}
	p2, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot2)), providers.Command{})
	if err != nil {
		t.Fatal(err)
	}
	defer slot2.Release()
	if info := p2.(ShimProcess).ShimInfo(); info.StdinBytes != 0 || info.StdinClosed || info.Exited {
		t.Fatalf("info %+v; want no stdin yet, running", info)
	}
	if _, err := io.WriteString(p2.Stdin(), "prompt\n"); err != nil {
		t.Fatal(err)
	}
	p2.Stdin().Close()
	out, _, err := drain(t, p2)
	if err != nil || out != "prompt\n" {
		t.Fatalf("stdout after the re-attach %q, %v; want %q", out, err, "prompt\n")
	}
}

// termHandler is a CLI whose SIGTERM handler needs 300 ms and exits 3.
const termHandler = `trap 'sleep 0.3; echo handled; exit 3' TERM; echo ready; while :; do sleep 0.05; done`

// cancelDuringHandler starts termHandler, cancels it once ready and
// checks the handler finished (exit 3, "handled").
func cancelDuringHandler(t *testing.T, l providers.Launcher, path string) {
	t.Helper()
	rest, err := cancelWhenReady(t, shimmed(t)(context.Background()), l,
		providers.Command{Path: "sh", Args: []string{"-c", termHandler}, Env: []string{"PATH=" + path}, Dir: "/"})
	var ee *providers.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || rest != "handled\n" {
		t.Fatalf("Wait = %v, rest %q; want exit 3 after the handler", err, rest)
	}
}

// With Grace unset a cancelled CLI under the host shim gets 5 s to finish
// its SIGTERM handler, as one run directly does.
func TestShimHostDefaultGraceLetsHandlerFinish(t *testing.T) {
	t.Parallel()
	cancelDuringHandler(t, &HostLauncher{Shim: hostShim(t)}, os.Getenv("PATH"))
}

const containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TestShimContainerEdges: a shimmed project run, in one container.
func TestShimContainerEdges(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rshimedge")
	cfg := &ShimConfig{Binary: testkit.ShimBinary(t)}
	l := &LXDLauncher{Client: client, Instance: name, Shim: cfg}

	// run runs cmd to its end; its shim stays until the subtest ends.
	run := func(t *testing.T, cmd providers.Command) string {
		t.Helper()
		p, err := l.Start(shimmed(t)(context.Background()), cmd)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		p.Stdin().Close()
		out, _, err := drain(t, p)
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		return out
	}
	bin, err := l.shimPath()
	if err != nil {
		t.Fatal(err)
	}

	// The CLI gets what LXD's exec gives a command (PATH, LANG, and for
	// root HOME and USER) for the keys its environment leaves out.
	t.Run("default environment", func(t *testing.T) {
		env := `echo "$(id -u):$HOME:$USER:$LANG:$PATH"`
		root, other := uint32(0), uint32(1000)
		for _, tc := range []struct {
			name string
			uid  *uint32
			want string
		}{
			{"no uid", nil, "0:/root:root:C.UTF-8:" + containerPath + "\n"},
			{"uid 0", &root, "0:/root:root:C.UTF-8:" + containerPath + "\n"},
			{"uid 1000", &other, "1000:::C.UTF-8:" + containerPath + "\n"},
		} {
			if out := run(t, providers.Command{Path: "sh", Args: []string{"-c", env}, Dir: "/", UID: tc.uid}); out != tc.want {
				t.Errorf("%s: %q, want %q", tc.name, out, tc.want)
			}
		}
		cmd := providers.Command{Path: "sh", Args: []string{"-c", env}, Dir: "/", Env: []string{"PATH=/bin", "HOME=/h", "USER=u", "LANG=C"}}
		if out := run(t, cmd); out != "0:/h:u:C:/bin\n" {
			t.Errorf("the command's own environment: %q", out)
		}
	})

	// With KillGrace unset a cancelled CLI gets 3 s for its SIGTERM
	// handler.
	t.Run("default kill grace", func(t *testing.T) {
		cancelDuringHandler(t, l, containerPath)
	})

	// The shim is pushed once per version: a later run uses the copy
	// already there (its modification time stays) — pushing it again while
	// an earlier run's shim executes it fails ("text file busy").
	t.Run("pushed once", func(t *testing.T) {
		run(t, providers.Command{Path: "true", Env: []string{"PATH=" + containerPath}})
		containerExec(t, client, name, "touch", "-d", "2000-01-01 00:00:00", bin)
		before := containerExec(t, client, name, "stat", "-c", "%Y %a", bin)
		if before != "946684800 755" {
			t.Fatalf("stat %s = %q", bin, before)
		}
		if out := run(t, providers.Command{Path: "echo", Args: []string{"second"}, Env: []string{"PATH=" + containerPath}}); out != "second\n" {
			t.Fatalf("second run: %q", out)
		}
		if after := containerExec(t, client, name, "stat", "-c", "%Y %a", bin); after != before {
			t.Fatalf("the shim copy changed on a second run: %q, was %q", after, before)
		}
	})

	// A run whose attach stream was taken over (another client attached)
	// is still released when its end is stored: the release goes over a
	// new attach, and the shim removes the run directory.
	t.Run("release over a new attach", func(t *testing.T) {
		slot, handle := handleSlot(t)
		p, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)),
			providers.Command{Path: "echo", Args: []string{"done"}, Env: []string{"PATH=" + containerPath}})
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin().Close()
		if out, _, err := drain(t, p); err != nil || out != "done\n" {
			t.Fatalf("run: %q, %v", out, err)
		}
		other, conn, err := l.attachContainer(context.Background(), handle.Dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.drop()
		defer other.Close()
		// The run's own attach exec ends once the shim closed its socket.
		attaches := func() int { return strings.Count(containerExec(t, client, name, "ps"), "attach --dir "+handle.Dir) }
		testkit.Eventually(t, 30*time.Second, func() error {
			if n := attaches(); n != 1 {
				return fmt.Errorf("%d attach execs:\n%s", n, containerExec(t, client, name, "ps"))
			}
			return nil
		}, "the run's attach exec ends")
		slot.Release()
		testkit.Eventually(t, 30*time.Second, func() bool {
			return !strings.Contains(containerExec(t, client, name, "ls", "-A", ContainerRunsDir), slot.RunID)
		}, "run directory %s removed after the release", handle.Dir)
	})

	// A handle that names no container (as the host's do) re-attaches in
	// the launcher's container; one naming another container is refused,
	// even when this container has a run directory at the same path.
	t.Run("re-attach checks the handle's container", func(t *testing.T) {
		slot, handle := handleSlot(t)
		p, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)),
			providers.Command{Path: "echo", Args: []string{"abc"}, Dir: "/"})
		if err != nil {
			t.Fatal(err)
		}
		if out, _, err := drain(t, p); out != "abc\n" || err != nil {
			t.Fatalf("first run: %q, %v", out, err)
		}
		slot.Detach()
		if handle.Instance != name {
			t.Fatalf("handle %+v, want instance %s", handle, name)
		}
		attach := func(instance string) (providers.Process, *providers.RunSlot, error) {
			s := &providers.RunSlot{RunID: slot.RunID, Attach: &providers.ShimHandle{Dir: handle.Dir, Instance: instance},
				Cursor: providers.NewCursor(true, providers.Pos{}, false)}
			p, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), s)), providers.Command{})
			return p, s, err
		}
		_, _, err = attach("t-other")
		want := "the run's supervisor (remote-shim) is gone: the run's shim is in container t-other, not " + name
		if !errors.Is(err, providers.ErrShimGone) || err.Error() != want {
			t.Fatalf("attach with another container's handle = %v, want %q", err, want)
		}
		p2, slot2, err := attach("")
		if err != nil {
			t.Fatalf("attach with a handle naming no container: %v", err)
		}
		defer slot2.Release()
		if out, _, err := drain(t, p2); out != "abc\n" || err != nil {
			t.Fatalf("replay: %q, %v", out, err)
		}
	})

	// An attach that fails before the shim answers is quoted in the error
	// up to the first 4 KiB of its stderr: here exactly 4096 bytes, then
	// (after a pause, so in a later read) a line that is not quoted. The
	// stand-in shim has its own version, so its own path.
	t.Run("attach failure quotes 4 KiB of its stderr", func(t *testing.T) {
		fake := "#!/bin/sh\nhead -c 4096 /dev/zero | tr '\\0' x >&2; sleep 0.3; echo not-quoted >&2; exit 1\n"
		bin := filepath.Join(t.TempDir(), "remote-shim")
		if err := os.WriteFile(bin, []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		fl := &LXDLauncher{Client: client, Instance: name, Shim: &ShimConfig{Binary: bin}}
		inside, err := fl.shimPath()
		if err != nil {
			t.Fatal(err)
		}
		if err := client.PushFile(context.Background(), name, inside, strings.NewReader(fake), lxdexec.FileOptions{Mode: 0o755, MkdirParents: true}); err != nil {
			t.Fatal(err)
		}
		slot := &providers.RunSlot{RunID: "r1", Attach: &providers.ShimHandle{Dir: ContainerRunsDir + "/r1", Instance: name},
			Cursor: providers.NewCursor(true, providers.Pos{}, false)}
		_, err = fl.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), providers.Command{})
		want := "the run's supervisor (remote-shim) is gone: remote-shim attach in " + name + " ended (exit 1): " + strings.Repeat("x", 4096)
		if !errors.Is(err, providers.ErrShimGone) || err.Error() != want {
			t.Fatalf("attach error %.200q…%q, want %.200q… (%d bytes)", err, tail(err), want, len(want))
		}
	})
}

// A run whose connection to its shim was taken over (another client
// attached) is still released when its end is stored: the release goes
// over a new connection, and the shim removes the run directory.
func TestShimHostReleaseOverANewConnection(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	slot, handle := handleSlot(t)
	p, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)),
		providers.Command{Path: "/bin/echo", Args: []string{"done"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := drain(t, p); err != nil || out != "done\n" {
		t.Fatalf("run: %q, %v", out, err)
	}
	conn, err := shim.Dial(context.Background(), handle.Dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := shim.Attach(context.Background(), conn, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	slot.Release()
	testkit.Eventually(t, 30*time.Second, func() bool {
		_, err := os.Stat(handle.Dir)
		return os.IsNotExist(err)
	}, "run directory %s removed after the release", handle.Dir)
}

// A project run re-attached after a daemon restart runs on in the
// container its handle names, which is not prepared again (the CLI runs in
// it); a new run, or a handle without a container, is prepared.
func TestPrepareProjectSkipsAReattachedRun(t *testing.T) {
	t.Parallel()
	prepared := 0
	cfg := providers.AdapterConfig{Containers: fakeContainers, Preparer: runnertest.Preparer{
		PrepareFunc: func(context.Context, providers.PrepareRequest, func(providers.Event)) (providers.Target, error) {
			prepared++
			return providers.Target{ProjectID: "p1", Container: "fresh"}, nil
		}}}
	req := providers.RunRequest{ProjectID: "p1"}
	for _, tc := range []struct {
		name      string
		slot      *providers.RunSlot
		container string
		prepared  int
	}{
		{"no slot", nil, "fresh", 1},
		{"new run", &providers.RunSlot{RunID: "r1"}, "fresh", 1},
		{"re-attached", &providers.RunSlot{RunID: "r1", Attach: &providers.ShimHandle{Dir: ContainerRunsDir + "/r1", Instance: "c7"}}, "c7", 0},
		{"re-attached on the host", &providers.RunSlot{RunID: "r1", Attach: &providers.ShimHandle{Dir: "/state/runs/r1"}}, "fresh", 1},
	} {
		prepared = 0
		ctx := context.Background()
		if tc.slot != nil {
			ctx = providers.WithRunSlot(ctx, tc.slot)
		}
		target, l, err := PrepareProject(ctx, cfg, providers.Claude, errTestNotWired, req, func(providers.Event) {})
		if err != nil || target.ProjectID != "p1" || target.Container != tc.container || l != (namedLauncher{name: tc.container}) || prepared != tc.prepared {
			t.Errorf("%s: target %+v, launcher %v, %v, prepared %d times; want container %s, prepared %d times",
				tc.name, target, l, err, prepared, tc.container, tc.prepared)
		}
	}
}

// A run whose CLI had got its stdin when the daemon stopped does not get
// it twice, even when the daemon had not recorded sending it: the shim
// says it received stdin, and the next daemon's repeated write is dropped.
func TestShimReattachAfterStdinDropsTheRepeat(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	slot, handle := handleSlot(t)
	p, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)),
		providers.Command{Path: "cat", Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	if _, err := io.WriteString(p.Stdin(), "prompt\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || line != "prompt\n" {
		t.Fatalf("first read %q, %v", line, err)
	}
	slot.Detach()
	p.Wait()

	slot2 := &providers.RunSlot{RunID: slot.RunID, Attach: handle, Cursor: providers.NewCursor(true, providers.Pos{Line: -1}, false)}
	p2, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot2)), providers.Command{})
	if err != nil {
		t.Fatal(err)
	}
	defer slot2.Release()
	if info := p2.(ShimProcess).ShimInfo(); info.StdinBytes != 7 {
		t.Fatalf("info %+v; want 7 stdin bytes received", info)
	}
	if _, err := io.WriteString(p2.Stdin(), "prompt\n"); err != nil {
		t.Fatal(err)
	}
	p2.Stdin().Close()
	out, _, err := drain(t, p2)
	if err != nil || out != "prompt\n" {
		t.Fatalf("stdout after the re-attach %q, %v; want the prompt once", out, err)
	}
}
