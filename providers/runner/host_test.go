package runner

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
)

// drain reads stdout and stderr of p to EOF concurrently and waits.
func drain(t *testing.T, p providers.Process) (stdout, stderr string, err error) {
	t.Helper()
	errc := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(p.Stderr())
		errc <- b
	}()
	out, _ := io.ReadAll(p.Stdout())
	e := <-errc
	return string(out), string(e), p.Wait()
}

func TestHostLauncherStdio(t *testing.T) {
	t.Parallel()
	var l HostLauncher
	p, err := l.Start(context.Background(), childCommand(t, "cat"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(p.Stdin(), "hello\nworld\n")
		p.Stdin().Close()
	}()
	out, errOut, err := drain(t, p)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if out != "hello\nworld\n" || errOut != "cat done\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
}

func TestHostLauncherExitCode(t *testing.T) {
	t.Parallel()
	var l HostLauncher
	p, err := l.Start(context.Background(), childCommand(t, "exit", "CHILD_CODE=7", "CHILD_STDERR=boom"))
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	_, errOut, err := drain(t, p)
	var ee *providers.ExitError
	if !errors.As(err, &ee) || ee.Code != 7 {
		t.Fatalf("Wait = %v, want ExitError{7}", err)
	}
	if errOut != "boom" {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestHostLauncherEnvAndDir(t *testing.T) {
	t.Parallel()
	var l HostLauncher
	dir := t.TempDir()
	cmd := childCommand(t, "env", "ONLY_THIS=1")
	p, err := l.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := drain(t, p)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) != len(cmd.Env) {
		t.Fatalf("child env = %q, want exactly %q (nothing inherited)", got, cmd.Env)
	}

	cmd = childCommand(t, "pwd")
	cmd.Dir = dir
	p, err = l.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = drain(t, p)
	if err != nil || strings.TrimSpace(out) != dir {
		t.Fatalf("pwd = %q, %v; want %q", out, err, dir)
	}
}

func TestHostLauncherLookPath(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, bin+"/fakecli"); err != nil {
		t.Fatal(err)
	}
	var l HostLauncher
	p, err := l.Start(context.Background(), providers.Command{
		Path: "fakecli", Args: []string{"-test.run=^$"},
		Env: []string{"PATH=" + bin, childEnv + "=exit", "CHILD_STDOUT=found"},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := drain(t, p)
	if err != nil || out != "found" {
		t.Fatalf("stdout %q, %v", out, err)
	}

	_, err = l.Start(context.Background(), providers.Command{Path: "no-such-cli-xyz", Env: []string{"PATH=" + bin}})
	if !errors.Is(err, ErrLaunch) || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("missing binary: %v, want ErrLaunch and exec.ErrNotFound", err)
	}
	_, err = l.Start(context.Background(), providers.Command{})
	if !errors.Is(err, ErrLaunch) {
		t.Fatalf("empty path: %v", err)
	}
}

func TestHostLauncherCredential(t *testing.T) {
	t.Parallel()
	testkit.NeedsRoot(t, "to switch user")
	if _, err := exec.LookPath("id"); err != nil {
		t.Skip("no id binary")
	}
	// The test binary lives in a 0700 build directory, so use id(1).
	uid, gid := uint32(65534), uint32(65534)
	cmd := providers.Command{
		Path: "sh", Args: []string{"-c", "echo $(id -u) $(id -g) $(id -G)"},
		Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/",
		UID: &uid, GID: &gid,
	}
	var l HostLauncher
	p, err := l.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := drain(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "65534 65534 65534" {
		t.Fatalf("id = %q, want uid/gid 65534 and no supplementary groups", got)
	}
}

// waitReady reads the child's "ready" line from r.
func waitReady(t *testing.T, r *bufio.Reader) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("ready line %q, %v", line, err)
	}
}

// cancelWhenReady starts cmd with l, cancels its context once the command
// printed "ready" and returns what it printed after that and Wait's error.
func cancelWhenReady(t *testing.T, ctx context.Context, l providers.Launcher, cmd providers.Command) (rest string, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := l.Start(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	r := bufio.NewReader(p.Stdout())
	waitReady(t, r)
	cancel()
	b, _ := io.ReadAll(r)
	return string(b), p.Wait()
}

func TestHostLauncherCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode     string
		grace    time.Duration
		wantCode int
	}{
		{"term-exit", time.Minute, 3},                      // handles SIGTERM itself
		{"sleep", time.Minute, 128 + int(syscall.SIGTERM)}, // killed by SIGTERM
		{"stubborn", 50 * time.Millisecond, 128 + int(syscall.SIGKILL)},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			_, err := cancelWhenReady(t, context.Background(), &HostLauncher{Grace: tt.grace}, childCommand(t, tt.mode))
			var ee *providers.ExitError
			if !errors.As(err, &ee) || ee.Code != tt.wantCode {
				t.Fatalf("Wait = %v, want exit %d", err, tt.wantCode)
			}
		})
	}
}

func TestHostLauncherSignal(t *testing.T) {
	t.Parallel()
	var l HostLauncher
	p, err := l.Start(context.Background(), childCommand(t, "term-exit"))
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	r := bufio.NewReader(p.Stdout())
	waitReady(t, r)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	var ee *providers.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.Code != 3 || string(rest) != "terminated\n" {
		t.Fatalf("Wait = %v, rest %q", err, rest)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("signal after exit: %v", err)
	}
}

// A grandchild that keeps stdout open must not block Wait forever.
func TestHostLauncherOrphanHoldsPipe(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	l := HostLauncher{WaitDelay: 100 * time.Millisecond}
	p, err := l.Start(context.Background(), providers.Command{
		Path: "sh", Args: []string{"-c", "sleep 60 & echo parent"},
		Env: []string{"PATH=" + os.Getenv("PATH")},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := drain(t, p)
	if err != nil || out != "parent\n" {
		t.Fatalf("stdout %q, %v", out, err)
	}
}
