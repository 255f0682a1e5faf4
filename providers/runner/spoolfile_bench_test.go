package runner

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"remote/providers"
)

// spoolFileLauncher is BenchmarkShimOverhead's measure of a shim that
// never copies: no process between the CLI and the reader at all. The
// CLI's stdout is the spool file itself (the kernel writes every byte
// there), and the reader follows the file with inotify, as a daemon
// reading a run's spool directly would. Test-only: stdin and stderr are
// empty, and nothing bounds the file or survives a full disk.
type spoolFileLauncher struct{ dir string }

func (l spoolFileLauncher) Start(ctx context.Context, c providers.Command) (providers.Process, error) {
	path := filepath.Join(l.dir, "stdout")
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(in, path, unix.IN_MODIFY|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(in)
		return nil, err
	}
	r, err := os.Open(path)
	if err != nil {
		unix.Close(in)
		return nil, err
	}
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env, cmd.Stdout = c.Env, w
	if err := cmd.Start(); err != nil {
		unix.Close(in)
		r.Close()
		return nil, err
	}
	p := &spoolFileProcess{cmd: cmd, done: make(chan struct{})}
	p.out = &followReader{f: r, in: in, done: p.done}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

type spoolFileProcess struct {
	cmd  *exec.Cmd
	out  *followReader
	done chan struct{}
	err  error
}

func (p *spoolFileProcess) Stdin() io.WriteCloser           { return nopWriteCloser{} }
func (p *spoolFileProcess) Stdout() io.Reader               { return p.out }
func (p *spoolFileProcess) Stderr() io.Reader               { return strings.NewReader("") }
func (p *spoolFileProcess) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }
func (p *spoolFileProcess) Wait() error                     { <-p.done; p.out.close(); return p.err }

type nopWriteCloser struct{}

func (nopWriteCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriteCloser) Close() error                { return nil }

// followReader reads the spool file to its end, then waits for inotify to
// say it grew; EOF once the CLI exited and the file is read to its end.
type followReader struct {
	f     *os.File
	in    int
	done  chan struct{}
	ended bool
	ev    [4096]byte
}

func (r *followReader) Read(b []byte) (int, error) {
	for {
		n, err := r.f.Read(b)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		if r.ended {
			return 0, io.EOF
		}
		select {
		case <-r.done:
			r.ended = true // read once more: the last writes came before the exit
			continue
		default:
		}
		// A write or the last writer's close; the timeout covers an exit
		// with nothing more written.
		pfd := []unix.PollFd{{Fd: int32(r.in), Events: unix.POLLIN}}
		if k, _ := unix.Poll(pfd, 20); k > 0 {
			_, _ = unix.Read(r.in, r.ev[:])
		}
	}
}

func (r *followReader) close() { r.f.Close(); unix.Close(r.in) }
