// Package reaper is what remote-shim does as the parent of a run's CLI:
// it makes the shim a child subreaper and kills what a cancelled CLI left
// behind (KillDescendants), and it learns of the CLI's exit without
// reaping it (WaitExited), so the CLI's pid, its group id, stays taken
// until the shim's last group kill.
//
// It imports the standard library, golang.org/x/sys and internal/procwait
// only.
package reaper

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"remote/internal/procwait"
)

// The shim is a child subreaper (PR_SET_CHILD_SUBREAPER): a process the
// CLI started and left behind (a tool command in a session of its own,
// `setsid cmd &`) is re-parented to the shim, not to init. When the run is
// cancelled, whatever the CLI left is killed once the CLI has exited, so
// nothing a cancelled run started outlives it. After a normal end they are
// left alone (a dev server an agent started for a preview keeps serving).

// Become makes the calling process a child subreaper.
func Become() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// children returns the pids whose parent is this process.
func children() []int {
	self := os.Getpid()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok && ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// parentOf reads the parent pid from /proc/PID/stat (the field after the
// parenthesised command, which may itself hold spaces and parentheses).
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// KillDescendants kills every process re-parented to the caller, and
// theirs as each dies, until none is left or about five seconds passed.
// cli, the CLI's unreaped pid, is left alone: its caller reaps it after
// the last group kill. logf says how many were killed.
func KillDescendants(cli int, logf func(string, ...any)) {
	deadline := time.Now().Add(5 * time.Second)
	killed := 0
	for time.Now().Before(deadline) {
		kids := slices.DeleteFunc(children(), func(pid int) bool { return pid == cli })
		if len(kids) == 0 {
			break
		}
		for _, pid := range kids {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // its group, when it leads one
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			if p, _ := syscall.Wait4(pid, &ws, 0, nil); p == pid {
				killed++
			}
		}
	}
	if killed > 0 {
		logf("killed %d processes the cancelled run left behind", killed)
	}
}

// The CLI leads the process group the shim kills (on a cancel, when the
// CLI's pipes stay open, on release and at the end of the linger). A
// group id is the leader's pid, and a pid is free for reuse once nothing
// refers to it: after the leader is reaped and the group's last member is
// gone, the kernel may hand the number to an unrelated process, which may
// make it a group id of its own (setsid, setpgid). `kill(-pgid)` would then
// kill that group — as root on the host. So the shim learns of the CLI's
// exit with waitid(WNOWAIT), which leaves the CLI a zombie: a zombie's pid
// stays taken, no new process or group can get the number, and every
// `kill(-pgid)` reaches only the CLI's own group. The zombie is reaped
// after the last group kill (the shim's server.reap). A pidfd would not do: it
// signals one process, never a group.

// sigchld is the part of siginfo_t waitid fills for a child: three ints,
// then the union, aligned as the kernel aligns it (it holds pointers).
type sigchld struct {
	signo, errno, code int32
	_                  [0]uintptr
	pid                int32
	uid                uint32
	status             int32
}

// si_code values of a child's exit (<asm-generic/siginfo.h>).
const (
	cldKilled = 2
	cldDumped = 3
)

// WaitExited blocks until child pid has exited and returns its exit
// code, 128+N when signal N killed it (and N), leaving it unreaped (a
// zombie that keeps its pid, hence its group id, taken).
func WaitExited(pid int) (code, signal int, err error) {
	info, err := procwait.Exited(pid) // parked, not holding a P in waitid
	if err != nil {
		return 255, 0, err
	}
	c := (*sigchld)(unsafe.Pointer(&info))
	switch c.code {
	case cldKilled, cldDumped:
		return 128 + int(c.status), int(c.status), nil
	default: // CLD_EXITED
		return int(c.status) & 0xff, 0, nil
	}
}
