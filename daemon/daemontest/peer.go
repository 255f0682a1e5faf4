package daemontest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// HTTPAs returns an HTTP client of the daemon whose connections are made
// with uid and gid as the kernel reports them (SO_PEERCRED): each connect
// runs on an OS thread of its own that first takes uid and gid (the
// thread, never the process) and then dies with them. The socket's
// directory is opened for traversal and the socket given group gid, so
// that uid may connect; whether the daemon admits it is the daemon's
// access list's decision (Options.Configure: daemon.Options.Access). The
// test process must be root; HTTPAs skips the test otherwise.
func (d *Daemon) HTTPAs(uid, gid uint32) *http.Client {
	d.t.Helper()
	if os.Getuid() != 0 {
		d.t.Skip("connecting as another uid needs root")
	}
	if err := os.Chmod(filepath.Dir(d.Socket), 0o711); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Chown(d.Socket, 0, int(gid)); err != nil {
		d.t.Fatal(err)
	}
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return dialAs(d.Socket, uid, gid)
	}}
	d.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// dialAs connects to the Unix socket path as uid and gid.
func dialAs(path string, uid, gid uint32) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is given back only with its credentials restored
		// (only the effective ids change: the real and saved ones stay
		// root's). A thread that ends takes its children's Pdeathsig
		// with it: the daemon under test may have started a CLI from
		// this very thread a moment before (a host login was SIGKILLed
		// 1 ms after its start when this goroutine ended locked).
		runtime.LockOSThread()
		const keep = ^uintptr(0)
		defer func() {
			_, _, eu := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep)
			_, _, eg := unix.RawSyscall(unix.SYS_SETRESGID, keep, 0, keep)
			if eu == 0 && eg == 0 && unix.Geteuid() == 0 && unix.Getegid() == 0 {
				runtime.UnlockOSThread()
			} // else: never unlocked, the thread ends with the goroutine
		}()
		ch <- func() result {
			// setresgid/setresuid as raw system calls change this thread
			// only (Go's syscall.Setuid would change every thread).
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(gid), keep); e != 0 {
				return result{err: fmt.Errorf("setresgid %d: %w", gid, e)}
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
				return result{err: fmt.Errorf("setresuid %d: %w", uid, e)}
			}
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return result{err: fmt.Errorf("socket: %w", err)}
			}
			if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
				unix.Close(fd)
				return result{err: fmt.Errorf("connect %s as uid %d: %w", path, uid, err)}
			}
			f := os.NewFile(uintptr(fd), path)
			defer f.Close()
			c, err := net.FileConn(f)
			return result{c: c, err: err}
		}()
	}()
	r := <-ch
	return r.c, r.err
}
