package runner

// A run shim's life in the launchers (lxdshim.go, shim.go) and process.go:
// the release after the attach is gone, the digest following the binary,
// stdin written once on re-attach, an unfinished turn saying why, and a
// wait after detach that is not a lost shim.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
		testkit.Eventually(t, 30*time.Second, func() error {
			if pids := attaches(); pids != "" {
				return fmt.Errorf("attach processes %s left", pids)
			}
			return nil
		}, "the attach processes end")
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
