package runner

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startNice starts c with its nice value nice above the daemon's (0: as
// c.Start), so that a host busy with agent CLIs still runs the daemon's
// threads first. The child is forked from an OS thread of its own whose
// nice value is raised beforehand: the child, every thread it makes and
// every process it starts inherit the value from their first instruction
// (renicing the child after it started would miss the threads it made
// meanwhile), and no other thread of the daemon changes. Raising a nice
// value needs no privilege.
//
// That thread is never given back to the Go scheduler: it ends when its
// goroutine returns, after hold is closed (nil: at once); were it the
// main thread, Go parks it for good instead, running nothing. A child with
// Pdeathsig set must pass a hold that outlives it, because the kernel
// sends the signal when the thread that forked it ends, not the process.
func startNice(c *exec.Cmd, nice int, hold <-chan struct{}) error {
	if nice == 0 {
		return c.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
		if err := raiseNice(nice); err != nil {
			errc <- err
			return
		}
		err := c.Start()
		errc <- err
		if err == nil && hold != nil {
			<-hold
		}
	}()
	return <-errc
}

// raiseNice adds n to the calling thread's nice value (capped at 19).
// On Linux a nice value belongs to a thread: PRIO_PROCESS with a thread
// id changes only that thread.
func raiseNice(n int) error {
	tid := unix.Gettid()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return fmt.Errorf("read the nice value of thread %d: %w", tid, err)
	}
	cur := 20 - prio // the system call answers 20 - nice
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, min(cur+n, 19)); err != nil {
		return fmt.Errorf("set nice value %d: %w", min(cur+n, 19), err)
	}
	return nil
}

// unitNice is the absolute nice value of a run's unit: the daemon's own
// plus n, at most 19.
func unitNice(n int) int {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return min(n, 19)
	}
	return min(20-prio+n, 19)
}
