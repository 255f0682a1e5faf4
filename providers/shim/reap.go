package shim

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The shim is a child subreaper (PR_SET_CHILD_SUBREAPER): a process the
// CLI started and left behind (a tool command in a session of its own,
// `setsid cmd &`) is re-parented to the shim, not to init. When the run is
// cancelled, whatever the CLI left is killed once the CLI has exited, so
// nothing a cancelled run started outlives it. After a normal end they are
// left alone (a dev server an agent started for a preview keeps serving).

// becomeSubreaper makes the calling process a child subreaper.
func becomeSubreaper() error {
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

// killDescendants kills every process re-parented to the shim, and theirs
// as each dies, until none is left or about five seconds passed. cli, the
// CLI's unreaped pid, is left alone: server.reap reaps it after the last
// group kill.
func killDescendants(cli int, logf func(string, ...any)) {
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
