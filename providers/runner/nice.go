package runner

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

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
	v, err := nicer(tid, n)
	if err != nil {
		return err
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, v); err != nil {
		return fmt.Errorf("set nice value %d: %w", v, err)
	}
	return nil
}

// unitNice is the absolute nice value of a run's unit: the daemon's own
// plus n, at most 19 (n itself when the daemon's cannot be read).
func unitNice(n int) int {
	v, err := nicer(0, n)
	if err != nil {
		return min(n, 19)
	}
	return v
}

// nicer is thread (0: the calling process's main thread) tid's nice value
// plus n, at most 19.
func nicer(tid, n int) (int, error) {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return 0, fmt.Errorf("read the nice value of thread %d: %w", tid, err)
	}
	return min(20-prio+n, 19), nil // the system call answers 20 - nice
}

// unitCPUWeight is the CPUWeight= of a run's unit n steps nicer than the
// daemon's (100, systemd's default): 100/1.25^n, at least 1.
func unitCPUWeight(n int) uint64 {
	return uint64(max(1, math.Round(100/math.Pow(1.25, float64(n)))))
}

// niceSession gives the session that process pid leads the nice value of
// the daemon's own session plus n, at most 19. With the kernel's
// autogroups (sched_autogroup_enabled, the default outside systemd's
// cgroups) each session is one scheduling entity weighed by its own
// nice value: twenty detached shims would each weigh as much as the
// whole daemon whatever their processes' nice values. A kernel without
// autogroups has nothing to set (nil).
func niceSession(pid, n int) error {
	own, err := os.ReadFile("/proc/self/autogroup")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the daemon's autogroup: %w", err)
	}
	cur := 0
	if _, after, ok := strings.Cut(strings.TrimSpace(string(own)), " nice "); ok {
		if cur, err = strconv.Atoi(after); err != nil {
			return fmt.Errorf("read the daemon's autogroup %q: %w", own, err)
		}
	}
	v := strconv.Itoa(min(cur+n, 19))
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", pid), []byte(v), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("set the autogroup nice value of session %d to %s: %w", pid, v, err)
	}
	return nil
}
