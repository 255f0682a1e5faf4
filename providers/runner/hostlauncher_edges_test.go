package runner

// The host launcher's edges: a UID or GID alone, the default grace and
// wait delay, what a cancel does to grandchildren (detached ones too), the
// run user's environment, and the bounds of the output and stderr a
// process error quotes, each with literal values.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
)

func needRootAndSh(t *testing.T) {
	t.Helper()
	testkit.NeedsRoot(t, "to switch user")
	for _, b := range []string{"sh", "id", "sleep"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("no %s binary", b)
		}
	}
}

func shCommand(script string) providers.Command {
	return providers.Command{Path: "sh", Args: []string{"-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"}
}

// A command naming only a UID (or only a GID) runs with it: the other
// stays the daemon's.
func TestHostLauncherUIDOrGIDAlone(t *testing.T) {
	t.Parallel()
	needRootAndSh(t)
	nobody := uint32(65534)
	for name, tc := range map[string]struct {
		uid, gid *uint32
		want     string
	}{
		"uid only": {uid: &nobody, want: "65534 0"},
		"gid only": {gid: &nobody, want: "0 65534"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := shCommand("echo $(id -u) $(id -g)")
			cmd.UID, cmd.GID = tc.uid, tc.gid
			var l HostLauncher
			p, err := l.Start(context.Background(), cmd)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := drain(t, p)
			if err != nil || strings.TrimSpace(out) != tc.want {
				t.Fatalf("id -u, id -g = %q, %v; want %q", out, err, tc.want)
			}
		})
	}
}

// With Grace unset a cancelled CLI gets 5 s to finish its SIGTERM
// handler: one that needs 300 ms exits with its own code, not SIGKILL.
func TestHostLauncherDefaultGraceLetsHandlerFinish(t *testing.T) {
	t.Parallel()
	needRootAndSh(t)
	rest, err := cancelWhenReady(t, context.Background(), &HostLauncher{}, shCommand(termHandler))
	var ee *providers.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || rest != "handled\n" {
		t.Fatalf("Wait = %v, rest %q; want exit 3 after the handler", err, rest)
	}
}

// With WaitDelay unset, output a grandchild writes 300 ms after the CLI
// exited still arrives (the default waits 2 s for the pipes).
func TestHostLauncherDefaultWaitDelayKeepsLateOutput(t *testing.T) {
	t.Parallel()
	needRootAndSh(t)
	var l HostLauncher
	p, err := l.Start(context.Background(), shCommand(`(sleep 0.3; echo late) & echo parent`))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := drain(t, p)
	if err != nil || out != "parent\nlate\n" {
		t.Fatalf("stdout %q, %v; want parent and late", out, err)
	}
}

// Cancelling sends SIGTERM to the whole process group: a grandchild runs
// its own handler.
func TestHostLauncherCancelTermsGrandchildren(t *testing.T) {
	t.Parallel()
	needRootAndSh(t)
	rest, _ := cancelWhenReady(t, context.Background(), &HostLauncher{Grace: time.Minute},
		shCommand(`(trap 'echo grandchild-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done); echo after`))
	if !strings.Contains(rest, "grandchild-term\n") {
		t.Fatalf("after cancel stdout %q; want the grandchild's SIGTERM handler", rest)
	}
}

// After the grace, SIGKILL goes to the whole group: a grandchild that
// ignores SIGTERM never runs on.
func TestHostLauncherGraceKillsGrandchildren(t *testing.T) {
	t.Parallel()
	needRootAndSh(t)
	rest, err := cancelWhenReady(t, context.Background(), &HostLauncher{Grace: 50 * time.Millisecond},
		shCommand(`trap '' TERM; (sleep 0.5; echo survived) & echo ready; while :; do sleep 0.05; done`))
	var ee *providers.ExitError
	if !errors.As(err, &ee) || ee.Code != 137 || len(rest) != 0 {
		t.Fatalf("Wait = %v, rest %q; want exit 137 and nothing after the kill", err, rest)
	}
}

// Cancelling kills even a grandchild that ignores SIGTERM and closed its
// stdio (nothing would otherwise stop it).
func TestHostLauncherCancelKillsDetachedGrandchild(t *testing.T) {
	t.Parallel()
	needRootAndSh(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := HostLauncher{Grace: time.Minute}
	// The grandchild announces (through a file: it has no stdio) that it
	// ignores SIGTERM before the parent says ready.
	ready := filepath.Join(t.TempDir(), "ignoring")
	p, err := l.Start(ctx, shCommand(`(trap '' TERM; : >`+ready+`; exec sleep 30) >/dev/null 2>&1 </dev/null & echo $!; while [ ! -e `+ready+` ]; do sleep 0.01; done; echo ready; wait`))
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	r := bufio.NewReader(p.Stdout())
	line, _ := r.ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("pid line %q", line)
	}
	waitReady(t, r)
	cancel()
	io.Copy(io.Discard, r)
	p.Wait()
	// It is SIGKILLed before Wait returns; the wait allows for /proc to catch up.
	testkit.Eventually(t, 10*time.Second, func() bool { return !alive(pid) },
		"grandchild %d ends with the cancelled process", pid)
}

// alive reports whether pid runs (a zombie counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// The host user's HOME/USER/LOGNAME are set even on an empty environment,
// and a value configured for the provider is kept wherever it stands.
func TestHostUserLauncherEnvEdges(t *testing.T) {
	var got providers.Command
	inner := launcherFunc(func(_ context.Context, cmd providers.Command) (providers.Process, error) {
		got = cmd
		return nil, nil
	})
	other := HostUser{Name: "agent", UID: 4242, GID: 4343, Home: "/home/agent"}
	HostUserLauncher(inner, other).Start(context.Background(), providers.Command{})
	if env := strings.Join(got.Env, " "); len(got.Env) != 3 || !strings.Contains(env, "HOME=/home/agent") || !strings.Contains(env, "USER=agent") || !strings.Contains(env, "LOGNAME=agent") {
		t.Fatalf("empty env became %q", env)
	}
	HostUserLauncher(inner, other).Start(context.Background(), providers.Command{Env: []string{"USER=custom", "PATH=/bin"}})
	if env := strings.Join(got.Env, " "); !strings.Contains(env, "USER=custom") || strings.Contains(env, "USER=agent") {
		t.Fatalf("configured USER (first entry) lost: %q", env)
	}
}

// Truncation never panics on output that is not UTF-8, even when every
// byte before the cut is a continuation byte.
func TestTruncateOutputContinuationBytesOnly(t *testing.T) {
	if got := TruncateOutput("\x80\x80\x80abc", 2); got != "\n…[truncated]" {
		t.Fatalf("TruncateOutput = %q", got)
	}
}

// A process error quotes stderr of exactly 2 KiB whole, without "…".
func TestProcessErrorQuotesTwoKiBWhole(t *testing.T) {
	detail := strings.Repeat("e", 2048)
	e := &ProcessError{Err: &providers.ExitError{Code: 1}, Stderr: detail}
	if got := e.Error(); got != "exit status 1: "+detail {
		t.Fatalf("Error() = %q…", got[:40])
	}
	e.Stderr = "x" + detail
	if got := e.Error(); got != "exit status 1: …"+detail {
		t.Fatalf("2049 bytes: Error() = %q…", got[:40])
	}
}

// Stderr kept for an error is exactly its first 64 KiB, however its lines
// fall (here 1001-byte lines, which do not divide 64 KiB).
func TestRunProcessKeepsFirst64KiBOfStderr(t *testing.T) {
	t.Parallel()
	needRootAndSh(t)
	_, emit := collect()
	cmd := shCommand(`i=0; while [ $i -lt 100 ]; do printf '%01000d\n' $i >&2; i=$((i+1)); done; exit 2`)
	err := RunProcess(context.Background(), &HostLauncher{}, cmd, lineParser, emit, ProcessOptions{})
	var pe *ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *ProcessError", err)
	}
	if len(pe.Stderr) != 65536 || !strings.HasPrefix(pe.Stderr, strings.Repeat("0", 1000)+"\n") {
		t.Fatalf("kept %d bytes of stderr, want 65536", len(pe.Stderr))
	}
}

// A stderr line of exactly 64 KiB is kept whole, without a newline that
// would make it 64 KiB + 1.
func TestRunProcessStderrLineOfExactly64KiB(t *testing.T) {
	t.Parallel()
	_, emit := collect()
	err := RunProcess(context.Background(), &HostLauncher{}, childCommand(t, "longerr", "CHILD_SIZE=65536"), lineParser, emit, ProcessOptions{})
	var pe *ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *ProcessError", err)
	}
	if len(pe.Stderr) != 65536 || strings.Contains(pe.Stderr, "\n") {
		t.Fatalf("kept %d bytes of stderr (newline: %v), want 65536 without newline", len(pe.Stderr), strings.Contains(pe.Stderr, "\n"))
	}
}

// Each event of a supervised run is positioned at the stdout byte offset
// of the line it came from: "a x\n" is 4 bytes, so the second line's
// event is at offset 4.
func TestRunProcessPositionsEventsByStdoutOffset(t *testing.T) {
	t.Parallel()
	slot := &providers.RunSlot{Cursor: providers.NewCursor(false, providers.Pos{}, false)}
	ctx := providers.WithRunSlot(context.Background(), slot)
	var got []providers.Pos
	emit := func(providers.Event) {
		p, _ := slot.Cursor.Next()
		got = append(got, p)
	}
	err := RunProcess(ctx, &HostLauncher{}, childCommand(t, "script", `CHILD_SCRIPT=a x\nb y\nrun.completed`), lineParser, emit, ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.Pos{{Line: 0}, {Line: 4}, {Line: 8}}
	if len(got) < 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("positions %v, want %v first", got, want)
	}
}
