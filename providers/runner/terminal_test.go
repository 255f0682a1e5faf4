package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"remote/internal/testkit"
	"remote/providers"
)

// TestAttackRunReachesTheOperatorsTerminal: remoted started from a
// terminal (make run) starts each host run's shim without systemd in a
// session of its own. The agent CLI of a run (hostile model output) must
// not reach the operator's terminal: it has no controlling terminal
// (tty_nr 0) and /dev/tty does not open, so it can neither read the
// operator's keys nor write to their screen. And the terminal's own
// signals, a Ctrl-C (SIGINT) or a hang-up (SIGHUP) to its foreground
// process group, which is the daemon's, do not reach the run, which
// outlives the daemon.
func TestAttackRunReachesTheOperatorsTerminal(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no pseudo-terminal to start the daemon on: %v", err)
		}
		t.Skipf("no pseudo-terminal to start the daemon on: %v", err)
	}
	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	child := childCommand(t, "terminal-daemon", "CHILD_SHIM="+testkit.ShimBinary(t), "CHILD_DIR="+t.TempDir())
	cmd := exec.Command(child.Path, child.Args...)
	cmd.Env = child.Env
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &errb
	// The daemon leads a session whose controlling terminal is tty, and
	// its process group is the terminal's foreground group, as a shell
	// runs `make run`.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	tty.Close()
	if err != nil {
		t.Fatalf("the daemon on a terminal: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	const want = "system[tty_nr=0];system[/dev/tty refused];run.completed[survived];"
	if got := strings.TrimSpace(out.String()); got != want {
		t.Fatalf("the run on the daemon's terminal: %s\nwant %s\nstderr: %s", got, want, errb.String())
	}
}

// openPTY opens a pseudo-terminal: its master and its terminal.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		ptmx.Close()
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		ptmx.Close()
		t.Fatalf("number of the pseudo-terminal: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		t.Fatal(err)
	}
	return ptmx, tty
}

// terminalScript reports the CLI's controlling terminal (tty_nr in its
// stat line) and whether /dev/tty opens, then waits for $1/go (the
// daemon's terminal has been sent its signals) and completes.
const terminalScript = `dir=$1; read -r s < /proc/$$/stat; set -- ${s#*) }; echo "system tty_nr=$5"; ` +
	`if (: > /dev/tty) 2>/dev/null; then echo "system /dev/tty opened"; else echo "system /dev/tty refused"; fi; ` +
	`i=0; while [ ! -e "$dir/go" ]; do i=$((i+1)); [ $i -lt 6000 ] || exit 9; sleep 0.01; done; echo "run.completed survived"`

// terminalDaemon is the daemon of TestAttackRunReachesTheOperatorsTerminal:
// started on a terminal, it runs a CLI under the shim, sends its terminal's
// foreground group (its own) SIGINT and SIGHUP once the CLI has reported,
// and prints the run's events.
func terminalDaemon() int {
	if tty, err := terminalOfSelf(); err != nil || tty == 0 {
		fmt.Fprintf(os.Stderr, "the daemon has no controlling terminal to pass on (%d, %v)\n", tty, err)
		return 3
	}
	// The daemon catches its own, as remoted does (signal.Notify). Not
	// ignored: what a process ignores, what it starts ignores too.
	signal.Notify(make(chan os.Signal, 4), syscall.SIGINT, syscall.SIGHUP)
	fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil || fg != syscall.Getpgrp() {
		fmt.Fprintf(os.Stderr, "the terminal's foreground group is %d (%v), not the daemon's %d\n", fg, err, syscall.Getpgrp())
		return 3
	}
	dir := os.Getenv("CHILD_DIR")
	cfg := &ShimConfig{Binary: os.Getenv("CHILD_SHIM"), RunsDir: filepath.Join(dir, "runs"), Systemd: SystemdNever}
	slot := &providers.RunSlot{RunID: newRunID(nil), Cursor: providers.NewCursor(false, providers.Pos{}, false)}
	defer slot.Release()
	ctx := providers.WithRunSlot(context.Background(), slot)
	var evs []providers.Event
	reported := 0
	emit := func(e providers.Event) {
		evs = append(evs, e)
		if e.Type == providers.EventSystem {
			if reported++; reported == 2 {
				// What a Ctrl-C and a hang-up of the terminal send.
				_ = syscall.Kill(-fg, syscall.SIGINT)
				_ = syscall.Kill(-fg, syscall.SIGHUP)
				_ = os.WriteFile(filepath.Join(dir, "go"), nil, 0o600)
			}
		}
	}
	err = RunProcess(ctx, &HostLauncher{Shim: cfg}, providers.Command{Path: "sh", Args: []string{"-c", terminalScript, "sh", dir},
		Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"}, lineParser, emit, ProcessOptions{})
	fmt.Println(summary(evs))
	if err != nil {
		fmt.Fprintf(os.Stderr, "the run: %v\n", err)
		return 1
	}
	return 0
}

// terminalOfSelf is this process's controlling terminal (tty_nr).
func terminalOfSelf() (int, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var tty int
	_, err = fmt.Sscan(f[4], &tty)
	return tty, err
}
