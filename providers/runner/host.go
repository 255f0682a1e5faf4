package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"remote/internal/procwait"
	"remote/providers"
)

// DefaultGrace is how long a cancelled process gets between SIGTERM and
// SIGKILL when HostLauncher.Grace is zero.
const DefaultGrace = 5 * time.Second

// DefaultWaitDelay is how long, after the child exited, a HostLauncher
// process waits for its stdout and stderr to reach EOF (a grandchild may
// still hold them) before closing them, when HostLauncher.WaitDelay is zero.
const DefaultWaitDelay = 2 * time.Second

// ErrLaunch classifies a failure to start a child process (binary not
// found, bad working directory, bad credentials).
var ErrLaunch = errors.New("launch process")

// HostLauncher starts processes on the host with os/exec. Each child gets
// its own process group; cancelling the Start context sends SIGTERM to the
// group and SIGKILL after Grace. The zero value is ready to use.
//
// With Shim set, a run's main process (providers.ShimmedRun) runs under
// remote-shim instead, outside the daemon's process tree, so that it
// outlives the daemon; every other command runs directly.
type HostLauncher struct {
	Grace     time.Duration // SIGTERM → SIGKILL delay on cancel; DefaultGrace when zero
	WaitDelay time.Duration // bound on draining output after exit; DefaultWaitDelay when zero
	Shim      *ShimConfig   // nil: every process runs directly
	// Nice is added to the daemon's nice value for every process started
	// directly (startNice); 0 keeps the daemon's. Shimmed runs take
	// Shim.Nice.
	Nice int
}

var _ providers.Launcher = (*HostLauncher)(nil)

// Start starts cmd. A bare cmd.Path is looked up on the PATH of cmd.Env
// (the daemon's PATH when cmd.Env has none). With UID/GID set the child
// runs as that user with its supplementary groups cleared. The returned
// process must have Stdout and Stderr read to EOF before Wait.
func (l *HostLauncher) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	if slot := providers.ShimmedRun(ctx); slot != nil {
		if l.Shim != nil {
			return l.startShimmed(ctx, slot, cmd)
		}
		if slot.Attach != nil { // never start a second CLI for a run that has one
			return nil, noShimToAttach(slot.Attach)
		}
	}
	if cmd.Path == "" {
		return nil, fmt.Errorf("%w: empty command path", ErrLaunch)
	}
	path, err := lookPath(cmd.Path, cmd.Env)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrLaunch, cmd.Path, err)
	}
	c := &exec.Cmd{
		Path: path,
		Args: append([]string{cmd.Path}, cmd.Args...),
		Env:  cmd.Env,
		Dir:  cmd.Dir,
	}
	if c.Env == nil {
		c.Env = []string{} // never inherit the daemon's environment
	}
	// Pdeathsig: a child run directly (not under remote-shim) never
	// outlives the daemon, even one killed with SIGKILL; its run is
	// recorded as interrupted by the next daemon anyway.
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cmd.UID != nil || cmd.GID != nil {
		uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
		if cmd.UID != nil {
			uid = *cmd.UID
		}
		if cmd.GID != nil {
			gid = *cmd.GID
		}
		// Groups empty and NoSetGroups false: setgroups(0) clears the
		// daemon's supplementary groups in the child.
		attr.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
	}
	c.SysProcAttr = attr

	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%w %s: stdin pipe: %w", ErrLaunch, cmd.Path, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w %s: stdout pipe: %w", ErrLaunch, cmd.Path, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("%w %s: stderr pipe: %w", ErrLaunch, cmd.Path, err)
	}
	c.Stdout, c.Stderr = outW, errW
	// done is closed once the child is reaped: until then the thread that
	// forked it lives, or Pdeathsig would kill it (startNice).
	done := make(chan struct{})
	if err := startNice(c, l.Nice, done); err != nil {
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		return nil, fmt.Errorf("%w %s: %w", ErrLaunch, cmd.Path, err)
	}
	outW.Close()
	errW.Close()

	p := &hostProcess{
		cmd:    c,
		stdin:  stdin,
		stdout: newEOFReader(outR),
		stderr: newEOFReader(errR),
		done:   done,
	}
	grace, delay := l.Grace, l.WaitDelay
	if grace <= 0 {
		grace = DefaultGrace
	}
	if delay <= 0 {
		delay = DefaultWaitDelay
	}
	go p.supervise(ctx, grace, delay)
	return p, nil
}

// lookPath resolves a bare name on the PATH found in env, falling back to
// the daemon's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathEnv, found := "", false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv, found = v, true
		}
	}
	if !found {
		pathEnv = os.Getenv("PATH")
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %q not found on PATH: %w", ErrLaunch, name, exec.ErrNotFound)
}

type hostProcess struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *eofReader
	done           chan struct{}
	waitErr        error // set before done is closed
}

func (p *hostProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *hostProcess) Stdout() io.Reader     { return p.stdout }
func (p *hostProcess) Stderr() io.Reader     { return p.stderr }

// Signal sends sig to the child (not its group).
func (p *hostProcess) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return fmt.Errorf("signal %v: %w", sig, os.ErrProcessDone)
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, p.cmd.Process.Pid, err)
	}
	return nil
}

// Wait returns after the child exited and its output was delivered (or
// closed after the wait delay).
func (p *hostProcess) Wait() error {
	<-p.done
	return p.waitErr
}

// supervise learns of the child's exit without reaping it (waitExited):
// until it is reaped after the last kill of its group, its pid — the
// group id — cannot be reused, so no kill(-pgid) here reaches a group
// that took the number.
func (p *hostProcess) supervise(ctx context.Context, grace, delay time.Duration) {
	pgid := p.cmd.Process.Pid
	exited := make(chan struct{})
	go func() { waitExited(pgid); close(exited) }()

	select {
	case <-exited:
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-exited:
			t.Stop()
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		}
	}

	// The child has exited; a grandchild may still hold the pipes.
	expired := make(chan struct{})
	t := time.AfterFunc(delay, func() { close(expired) })
	select {
	case <-p.stdout.eof:
	case <-expired:
	}
	select {
	case <-p.stderr.eof:
	case <-expired:
	}
	t.Stop()
	if !p.stdout.done() || !p.stderr.done() || ctx.Err() != nil {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	err := p.cmd.Wait() // the last group kill is behind: reap
	p.stdout.f.Close()
	p.stderr.f.Close()

	p.waitErr = exitError(err)
	close(p.done)
}

// waitExited blocks until child pid has exited and leaves it unreaped: a
// zombie keeps its pid, hence its process group id, from being reused. It
// parks its goroutine rather than hold a P in waitid (procwait).
func waitExited(pid int) { _, _ = procwait.Exited(pid) }

func exitError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &providers.ExitError{Code: 128 + int(ws.Signal())}
		}
		return &providers.ExitError{Code: ee.ExitCode()}
	}
	return fmt.Errorf("wait for process: %w", err)
}

// eofReader closes eof once its file returned EOF or any error.
type eofReader struct {
	f    *os.File
	eof  chan struct{}
	once sync.Once
}

func newEOFReader(f *os.File) *eofReader { return &eofReader{f: f, eof: make(chan struct{})} }

func (r *eofReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if err != nil {
		r.once.Do(func() { close(r.eof) })
		if errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
	}
	return n, err
}

func (r *eofReader) done() bool {
	select {
	case <-r.eof:
		return true
	default:
		return false
	}
}

// LookPath resolves a bare binary name on the PATH in env (the daemon's
// PATH when env has none), as HostLauncher does; a name with a slash is
// returned as it is.
func LookPath(name string, env []string) (string, error) { return lookPath(name, env) }
