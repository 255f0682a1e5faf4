package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"remote/providers"
)

// spliceLauncher is BenchmarkShimOverhead's measure of a spool run with
// no shim process at all: the CLI is the daemon's own child, and the
// reader splices its pipe into a spool file and reads it back, as a
// spool run's holder does (providers/shim/spool.go). What is left
// between it and the shim's figure is the shim's process and session,
// not the copy. Test-only: stdin and stderr are empty.
type spliceLauncher struct{ dir string }

func (l spliceLauncher) Start(ctx context.Context, c providers.Command) (providers.Process, error) {
	f, err := os.OpenFile(filepath.Join(l.dir, "stdout"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env, cmd.Stdout = c.Env, pw
	if err := cmd.Start(); err != nil {
		f.Close()
		pr.Close()
		pw.Close()
		return nil, err
	}
	pw.Close()
	p := &spliceProcess{cmd: cmd, done: make(chan struct{}), out: &spliceReader{pipe: pr, f: f}}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

type spliceProcess struct {
	cmd  *exec.Cmd
	out  *spliceReader
	done chan struct{}
	err  error
}

func (p *spliceProcess) Stdin() io.WriteCloser           { return nopWriteCloser{} }
func (p *spliceProcess) Stdout() io.Reader               { return p.out }
func (p *spliceProcess) Stderr() io.Reader               { return strings.NewReader("") }
func (p *spliceProcess) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }
func (p *spliceProcess) Wait() error {
	<-p.done
	p.out.pipe.Close()
	p.out.f.Close()
	return p.err
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriteCloser) Close() error                { return nil }

// spliceReader splices what the pipe holds to the file's end, then
// reads it back.
type spliceReader struct {
	pipe *os.File
	f    *os.File
	off  int64
}

func (r *spliceReader) Read(b []byte) (int, error) {
	rc, err := r.pipe.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int64
	var serr error
	err = rc.Read(func(fd uintptr) bool {
		off := r.off
		n, serr = unix.Splice(int(fd), nil, int(r.f.Fd()), &off, len(b), unix.SPLICE_F_NONBLOCK)
		return !errors.Is(serr, unix.EAGAIN)
	})
	switch {
	case err != nil:
		return 0, err
	case serr != nil:
		return 0, serr
	case n == 0:
		return 0, io.EOF
	}
	m, err := r.f.ReadAt(b[:n], r.off)
	r.off += int64(m)
	return m, err
}
