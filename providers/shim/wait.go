package shim

import (
	"unsafe"

	"remote/internal/procwait"
)

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
// after the last group kill (server.reap). A pidfd would not do: it
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

// waitExited blocks until child pid has exited and returns its status,
// leaving it unreaped (a zombie that keeps its pid, hence its group id,
// taken).
func waitExited(pid int) (ExitStatus, error) {
	info, err := procwait.Exited(pid) // parked, not holding a P in waitid
	if err != nil {
		return ExitStatus{Code: 255}, err
	}
	c := (*sigchld)(unsafe.Pointer(&info))
	switch c.code {
	case cldKilled, cldDumped:
		return ExitStatus{Code: 128 + int(c.status), Signal: int(c.status)}, nil
	default: // CLD_EXITED
		return ExitStatus{Code: int(c.status) & 0xff}, nil
	}
}
