package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrVersion marks a hello refused for its protocol version: the shim is
// older than the daemon (a run started before an upgrade).
var ErrVersion = errors.New("remote-shim speaks an older protocol")

// StartSpool starts spec as a spool run (spool.go) of the shim of run
// directory dir, on conn, which must be the unix socket Dial returns: the
// client holds the run's spooling and reads the output from the spool
// files. The connection is closed when StartSpool fails.
func StartSpool(ctx context.Context, conn io.ReadWriteCloser, dir string, spec Spec) (*Client, error) {
	spec.Spool = true
	c, err := handshake(ctx, conn, Hello{Version: ProtocolVersion, Spec: &spec})
	if err != nil {
		return nil, err
	}
	if !c.info.Spool {
		c.Close()
		return nil, fmt.Errorf("%w: remote-shim did not start a spool run", ErrProtocol)
	}
	return c.openSpools(dir, 0, 0)
}

// AttachSpool attaches to the run of the shim of run directory dir, on
// conn, from the given offsets, as a client of protocol version 2: a
// spool run's output is read from its spool files (the client holds its
// spooling until the run ended), another run's arrives in frames. An
// error wraps ErrVersion when the shim is older: Attach, on a new
// connection, then attaches. The connection is closed when AttachSpool
// fails.
func AttachSpool(ctx context.Context, conn io.ReadWriteCloser, dir string, stdoutOff, stderrOff int64) (*Client, error) {
	c, err := handshake(ctx, conn, Hello{Version: ProtocolVersion, Stdout: stdoutOff, Stderr: stderrOff})
	if err != nil || !c.info.Spool {
		return c, err
	}
	return c.openSpools(dir, stdoutOff, stderrOff)
}

// readAnswer reads the shim's answer to a version 2 hello on a unix
// socket: the line, the bytes read after it, and the descriptors passed
// with it (a spool run's pipes).
func readAnswer(uc *net.UnixConn) (line, rest []byte, fds []int, err error) {
	var acc []byte
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(2*4))
	defer func() {
		if err != nil {
			closeFDs(fds)
			fds = nil
		}
	}()
	for {
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				if got, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, got...)
				}
			}
			if perr != nil || flags&unix.MSG_CTRUNC != 0 {
				return nil, nil, fds, fmt.Errorf("%w: answer: malformed or truncated passed descriptors", ErrProtocol)
			}
		}
		acc = append(acc, buf[:n]...)
		if i := bytes.IndexByte(acc, '\n'); i >= 0 {
			return acc[:i], acc[i+1:], fds, nil
		}
		if len(acc) > MaxHello {
			return nil, nil, fds, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, MaxHello)
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(acc) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, fds, err
		}
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// openSpools opens the spool files of dir for the readers, with the
// pipes the shim passed if this client holds the spooling, and starts
// waiting for the exit frame; on failure the client is closed.
func (c *Client) openSpools(dir string, off0, off1 int64) (*Client, error) {
	fds := c.passed
	c.passed = nil
	if len(fds) != 0 && len(fds) != 2 {
		closeFDs(fds)
		c.Close()
		return nil, fmt.Errorf("%w: remote-shim passed %d descriptors, want the 2 pipes", ErrProtocol, len(fds))
	}
	for i, name := range []string{StdoutName, StderrName} {
		sp, err := openSpool(filepath.Join(dir, name))
		if err == nil && fds != nil {
			err = sp.takePipe(fds[i])
			fds[i] = -1
		}
		if err != nil {
			closeFDs(fds[i:])
			if sp != nil {
				sp.close()
			}
			c.Close()
			return nil, err
		}
		sp.off = []int64{off0, off1}[i]
		c.spools[i] = sp
	}
	go c.awaitExit()
	return c, nil
}

// awaitExit reads the spool run's only frame, the exit frame. A
// connection that ends first makes the client let go of the spooling.
func (c *Client) awaitExit() {
	f, err := ReadFrame(c.r)
	if err == nil && f.Type != FrameExit {
		err = fmt.Errorf("%w: remote-shim sent a frame of type %q in a spool run", ErrProtocol, f.Type)
	}
	if err != nil {
		c.mu.Lock()
		c.end(err)
		c.mu.Unlock()
		c.letGo()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status, _ = DecodeExit(f.Payload) // ReadFrame checked it
	c.end(nil)
}

// spoolReader reads one stream of a spool run from its spool file, and
// splices more into it from the CLI's pipe while the client holds the
// spooling.
type spoolReader struct {
	name string
	f    *os.File // the spool
	fd   int      // f's descriptor, for splice
	pipe *os.File // the pipe's read end, or nil
	rc   syscall.RawConn
	off  int64 // bytes read
	end  int64 // the spool's size: bytes spliced
	eof  bool  // the pipe ended
	// unspooled: a splice failed (a full disk): the rest is read from the
	// pipe straight, as a run with frames goes on when its spool cannot
	// be written; a re-attach then misses what was not spooled.
	unspooled bool

	mu      sync.Mutex // held around each splice, and by stop
	stopped bool       // no more splices: the client let go
	done    bool       // the reader returned its last answer
	err     error      // that answer
}

// openSpool opens a spool file. It must be a regular file of the
// daemon's own user: the run directory is the daemon's, and a symbolic
// link or a FIFO planted there is refused, never followed or waited on.
func openSpool(path string) (*spoolReader, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open spool %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat spool %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: spool %s is not a regular file of uid %d (mode %#o, uid %d)", ErrProtocol, path, os.Geteuid(), st.Mode, st.Uid)
	}
	return &spoolReader{name: filepath.Base(path), f: os.NewFile(uintptr(fd), path), fd: fd, end: st.Size}, nil
}

// takePipe takes the passed descriptor fd as the pipe to splice from.
func (sp *spoolReader) takePipe(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		unix.Close(fd)
		return fmt.Errorf("%w: remote-shim passed a descriptor for %s that is not a pipe", ErrProtocol, sp.name)
	}
	// The shim's pipes are non-blocking: the runtime's poller waits on it.
	sp.pipe = os.NewFile(uintptr(fd), sp.name+" pipe")
	rc, err := sp.pipe.SyscallConn()
	if err != nil {
		sp.pipe.Close()
		sp.pipe = nil
		return err
	}
	sp.rc = rc
	return nil
}

// stop ends the client's splicing for good: a splice in progress ends
// first.
func (sp *spoolReader) stop() {
	sp.mu.Lock()
	sp.stopped = true
	sp.mu.Unlock()
}

// wake makes a reader waiting on the pipe look again; c.mu is held.
func (sp *spoolReader) wake() {
	if sp.pipe != nil {
		_ = sp.pipe.SetReadDeadline(time.Unix(1, 0))
	}
}

// close lets the files go; only after stop.
func (sp *spoolReader) close() {
	sp.f.Close()
	if sp.pipe != nil {
		sp.pipe.Close()
	}
}

// finish records the reader's last answer and lets the files go.
func (sp *spoolReader) finish(err error) (int, error) {
	sp.stop()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.done {
		sp.done, sp.err = true, err
		sp.close()
	}
	return 0, sp.err
}

// splice moves what the pipe holds (up to max bytes) to the spool's end,
// waiting for some; 0 bytes and no error: every writer closed the pipe.
func (sp *spoolReader) splice(max int) (int64, error) {
	var n int64
	var serr error
	err := sp.rc.Read(func(pipe uintptr) bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		if sp.stopped {
			serr = net.ErrClosed
			return true
		}
		off := sp.end
		n, serr = unix.Splice(int(pipe), nil, sp.fd, &off, max, unix.SPLICE_F_NONBLOCK)
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	return n, err
}

// readSpool reads stream i: from the spool what was spliced and not read
// yet, else it splices more from the pipe; once the pipe ended, it waits
// for the exit frame, whose final size it reads up to.
func (c *Client) readSpool(sp *spoolReader, i int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	sp.mu.Lock()
	done, doneErr := sp.done, sp.err
	sp.mu.Unlock()
	if done {
		return 0, doneErr
	}
	for {
		c.mu.Lock()
		ended, err := c.ended, c.err
		final := [2]int64{c.status.Stdout, c.status.Stderr}[i]
		c.mu.Unlock()
		if ended && err != nil {
			return sp.finish(err)
		}
		limit := sp.end
		if ended {
			if sp.off > final {
				return sp.finish(fmt.Errorf("%w: %d bytes of spool %s were read, past its final size %d", ErrProtocol, sp.off, sp.name, final))
			}
			if sp.off == final {
				return sp.finish(io.EOF)
			}
			limit = final
		}
		if sp.off < limit {
			n, rerr := sp.f.ReadAt(p[:min(int64(len(p)), limit-sp.off)], sp.off)
			sp.off += int64(n)
			if n > 0 {
				return n, nil
			}
			if ended {
				if rerr == nil || errors.Is(rerr, io.EOF) {
					rerr = fmt.Errorf("it ends at %d bytes, short of its final size %d", sp.off, final)
				}
				return sp.finish(fmt.Errorf("read spool %s: %w", sp.name, rerr))
			}
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				return sp.finish(fmt.Errorf("read spool %s: %w", sp.name, rerr))
			}
		}
		if ended {
			continue
		}
		if sp.eof {
			// Every writer closed the pipe and all it held is read: the
			// stream is complete, whatever the other one does.
			return sp.finish(io.EOF)
		}
		if sp.pipe == nil {
			<-c.done // the exit frame, or the end of the connection
			continue
		}
		if sp.unspooled {
			n, rerr := sp.pipe.Read(p)
			switch {
			case n > 0:
				return n, nil
			case errors.Is(rerr, io.EOF):
				sp.eof = true
				_ = c.send(Frame{Type: FrameDrained, Payload: []byte{byte(i)}})
			case rerr != nil && !lostPipe(rerr):
				return sp.finish(fmt.Errorf("read %s: %w", sp.name, rerr))
			}
			continue
		}
		n, serr := sp.splice(max(len(p), 64<<10))
		switch {
		case serr != nil:
			if lostPipe(serr) {
				continue // woken for the end, or closed by Close
			}
			// The spool cannot take it (ENOSPC, EIO): the output must
			// still reach the daemon, or the CLI blocks on a full pipe.
			sp.unspooled = true
		case n == 0:
			sp.eof = true
			if err := c.send(Frame{Type: FrameDrained, Payload: []byte{byte(i)}}); err != nil {
				continue // the connection ended: the shim splices again
			}
		default:
			sp.end += n
		}
	}
}

// lostPipe reports whether err is the pipe's wait ended by the client's
// end (a deadline) or Close.
func lostPipe(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) || errors.Is(err, unix.EINTR)
}
