// Package procwait waits for a child process to exit, leaving it unreaped,
// without holding one of the Go scheduler's Ps while it waits.
//
// A blocking waitid(2) (what os.Process.Wait and exec.Cmd.Wait do) keeps
// its goroutine in a system call for the child's whole life, and the P it
// ran on with it until the runtime's monitor takes the P back: 10 to 20 ms
// in a quiet process, whose monitor sleeps 10 ms between looks. A daemon
// on two cores that starts two CLIs at once (a prompt's and a readiness
// check's) then runs nothing else for those milliseconds: no request is
// answered, no event is sent. Exited waits on a pidfd through the
// runtime's network poller instead, as a socket read waits: the goroutine
// parks and its P runs other work at once.
//
// It imports the standard library and golang.org/x/sys only: nothing of
// ours.
package procwait

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Exited blocks until child pid has exited and returns what waitid(2)
// reports of it, leaving the child a zombie (WNOWAIT): its pid, hence its
// process group id, stays taken until the caller reaps it. Where the
// kernel gives no pollable pidfd (before Linux 5.10) it falls back to a
// blocking waitid.
func Exited(pid int) (unix.Siginfo, error) {
	var info unix.Siginfo
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return info, blocking(pid, &info)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return info, blocking(pid, &info)
	}
	var werr error
	// A nonblocking pidfd answers EAGAIN while the child runs; the pidfd
	// turns readable when it exits, and the poller wakes this goroutine.
	err = rc.Read(func(fd uintptr) bool {
		for {
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(werr, unix.EINTR) {
				return !errors.Is(werr, unix.EAGAIN)
			}
		}
	})
	if err != nil { // not pollable after all
		return info, blocking(pid, &info)
	}
	return info, werr
}

// blocking is Exited with a blocking waitid on the pid.
func blocking(pid int, info *unix.Siginfo) error {
	for {
		err := unix.Waitid(unix.P_PID, pid, info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
