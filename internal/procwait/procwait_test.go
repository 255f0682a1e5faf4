package procwait

import (
	"os/exec"
	"runtime/metrics"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inSyscalls is how many goroutines are in a system call (or cgo) now.
func inSyscalls() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines/not-in-go:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestExitedHoldsNoP: while Exited waits for a running child, its
// goroutine is parked, not in a system call holding a P (a blocking
// waitid shows here as one more goroutine not in Go); when the child
// exits, Exited returns its status and leaves it unreaped.
func TestExitedHoldsNoP(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read x; exit 7")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	before := inSyscalls()
	type result struct {
		info unix.Siginfo
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := Exited(cmd.Process.Pid)
		done <- result{info, err}
	}()
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) { //nolint:forbidigo // samples the goroutines in syscalls for 500 ms: the subject
		if n := inSyscalls(); n > before {
			t.Fatalf("%d goroutines in system calls while Exited waits, %d before: it holds a P", n, before)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("Exited returned while the child runs: %+v, %v", r.info, r.err)
	default:
	}
	stdin.Close()
	r := <-done
	if r.err != nil || r.info.Signo != int32(unix.SIGCHLD) {
		t.Fatalf("Exited = %+v, %v", r.info, r.err)
	}
	// Unreaped: the pid is still the child's, and Wait reaps it now.
	if err := unix.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("the child was reaped by Exited: %v", err)
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("Wait after Exited: %v, code %d", err, cmd.ProcessState.ExitCode())
	}
}

// TestExitedOfANonChild fails as waitid does.
func TestExitedOfANonChild(t *testing.T) {
	if _, err := Exited(1); err == nil {
		t.Fatal("Exited(1) succeeded")
	}
}
