package shim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"remote/internal/reaper"
	"remote/providers/shim/live"
)

// Defaults of ServeOptions.
const (
	DefaultStartTimeout = 60 * time.Second
	DefaultLinger       = 24 * time.Hour
	DefaultWaitDelay    = 2 * time.Second
)

// maxStdinQueued bounds the stdin bytes the shim holds for a CLI that does
// not read them; a daemon writing more waits.
const maxStdinQueued = 16 << 20

// helloTimeout bounds how long a connection may take to send its hello.
const helloTimeout = 30 * time.Second

// defaultPath resolves a bare command name when the spec has no PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ServeOptions configures Serve.
type ServeOptions struct {
	Dir string // the run directory; created by Serve, must not exist
	// StartTimeout bounds the wait for the start request; Linger how long
	// the shim waits for a release after the CLI exited; WaitDelay how long
	// after the CLI exited its pipes may stay open (a grandchild holding
	// them) before the group is killed. Zero means the defaults.
	StartTimeout, Linger, WaitDelay time.Duration
	// Subreaper makes the shim a child subreaper that kills what a
	// cancelled CLI left behind (see reap.go). Only for a shim that is a
	// process of its own: cmd/remote-shim sets it.
	Subreaper bool
	// Ready is called once the socket accepts connections.
	Ready func()
	// Logf logs what the shim does (never the spec's environment).
	Logf func(format string, args ...any)
}

// server is one shim's state.
type server struct {
	opts ServeOptions
	dir  string
	ln   net.Listener

	mu   sync.Mutex
	cond *sync.Cond // stdin queue changes
	gen  chan struct{}

	started     bool
	pgid        int
	cli         *os.Process // reaped by reap, after the last group kill
	signalled   bool        // a client signalled the CLI: the run was cancelled
	stdinQ      [][]byte
	stdinQueued int
	stdinBytes  int64
	stdinClose  bool
	sizes       [2]int64       // bytes spooled to stdout, stderr
	live        [2]live.Window // recent output (providers/shim/live)
	final       bool           // the CLI exited and both spools are complete
	status      ExitStatus
	conn        net.Conn // the current client

	// A spool run (spool.go): whoever holds the spooling splices the
	// CLI's pipes into the spool files, the shim or its holder.
	spoolRun    bool
	spoolFiles  [2]*os.File // the spools, for splicing into and their sizes
	pipes       [2]int      // the CLI's stdout and stderr, read ends (raw: spool.go)
	holder      net.Conn    // the client holding the spooling, or nil
	holderGone  chan struct{}
	holderReady chan struct{} // closed once the holder has its answer
	splicing    [2]sync.Mutex // held around each splice(2) of the shim's
	spoolers    sync.WaitGroup
	drained     [2]bool
	drainedCh   [2]chan struct{}
	abandoned   bool // the spools' last writers are no longer waited for

	startedCh chan struct{}
	finalCh   chan struct{}
	released  chan struct{}
	relOnce   sync.Once
}

// Serve runs a shim in opts.Dir until it is released, its linger ends, or
// no start request came within the start timeout; it then removes the
// directory. Its error is for the shim's own log.
func Serve(opts ServeOptions) error {
	if opts.Dir == "" || !filepath.IsAbs(opts.Dir) {
		return fmt.Errorf("run directory %q must be an absolute path", opts.Dir)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.WaitDelay <= 0 {
		opts.WaitDelay = DefaultWaitDelay
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	dir := filepath.Clean(opts.Dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("create the parent of run directory %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("run directory %s already exists", dir)
		}
		return fmt.Errorf("create run directory %s: %w", dir, err)
	}
	s := &server{opts: opts, dir: dir, gen: make(chan struct{}),
		startedCh: make(chan struct{}), finalCh: make(chan struct{}), released: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	err := s.run()
	s.closeSpools()
	if rmErr := os.RemoveAll(dir); rmErr != nil && err == nil {
		err = fmt.Errorf("remove run directory: %w", rmErr)
	}
	return err
}

func (s *server) run() error {
	if err := os.WriteFile(filepath.Join(s.dir, PIDName), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	sock := filepath.Join(s.dir, SocketName)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sock, err)
	}
	s.ln = ln
	defer ln.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		return fmt.Errorf("chmod %s: %w", sock, err)
	}
	go s.accept()
	if s.opts.Ready != nil {
		s.opts.Ready()
	}

	startTimer := time.NewTimer(s.opts.StartTimeout)
	defer startTimer.Stop()
	select {
	case <-s.startedCh:
		startTimer.Stop()
	case <-startTimer.C:
		return fmt.Errorf("no start request within %v", s.opts.StartTimeout)
	case <-s.released:
		return nil
	}
	select {
	case <-s.finalCh:
		linger := time.NewTimer(s.opts.Linger)
		defer linger.Stop()
		select {
		case <-s.released:
		case <-linger.C:
			s.opts.Logf("not released within %v of the CLI's exit; cleaning up", s.opts.Linger)
		}
	case <-s.released:
	}
	// Nothing the run started outlives it.
	s.killGroup(syscall.SIGKILL)
	select {
	case <-s.finalCh:
		s.reap()
	case <-time.After(s.opts.WaitDelay + 3*time.Second):
	}
	s.mu.Lock()
	if s.conn != nil {
		s.conn.Close()
	}
	s.mu.Unlock()
	return nil
}

// killGroup signals the CLI's process group. Until reap the CLI is at
// least a zombie, so its pid — the group id — cannot have been reused
// (wait.go); after reap it is never signalled again.
func (s *server) killGroup(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pgid > 0 {
		_ = syscall.Kill(-s.pgid, sig)
	}
}

// reap reaps the exited CLI after the last group kill; from then on its
// pid may be reused, so killGroup no longer signals.
func (s *server) reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cli != nil {
		_, _ = s.cli.Wait()
		s.cli, s.pgid = nil, 0
	}
}

func (s *server) release() { s.relOnce.Do(func() { close(s.released) }) }

// changed wakes every streamer; s.mu is held.
func (s *server) changed() {
	close(s.gen)
	s.gen = make(chan struct{})
}

func (s *server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(c)
	}
}

// handle serves one client: its hello, then the output stream one way and
// its frames the other, until either side ends or a newer client
// replaces it.
func (s *server) handle(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	r := bufio.NewReaderSize(c, 64<<10)
	line, err := readLine(r)
	if err != nil {
		s.opts.Logf("reading a hello: %v", err)
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	h, err := DecodeHello(line)
	if err != nil {
		_ = writeJSONLine(c, Info{Version: ProtocolVersion, Error: err.Error()})
		c.Close()
		return
	}
	if h.Spec != nil {
		if err := s.start(*h.Spec); err != nil {
			s.opts.Logf("start: %v", err)
			_ = writeJSONLine(c, Info{Version: ProtocolVersion, Error: err.Error()})
			c.Close()
			if !errors.Is(err, errAlreadyStarted) {
				s.release() // nothing runs: clean up
			}
			return
		}
	}
	var info Info
	var refuse string
	hold := false
	for {
		s.mu.Lock()
		info = Info{Version: ProtocolVersion, PID: s.pgid, StdinBytes: s.stdinBytes, StdinClosed: s.stdinClose, Exited: s.final, Spool: s.spoolRun}
		sizes := s.sizes
		if s.spoolRun {
			sizes = s.spoolSizes()
		}
		switch {
		case !s.started:
			refuse = "the CLI was not started yet"
		case h.Stdout > sizes[0] || h.Stderr > sizes[1]:
			refuse = fmt.Sprintf("offsets stdout %d, stderr %d are past the spools' ends (%d, %d)", h.Stdout, h.Stderr, sizes[0], sizes[1])
		}
		if refuse != "" || s.holder == nil || s.final {
			break // s.mu stays locked
		}
		// A client holds a spool run's spooling: it lets go first
		// (spool.go), whatever this one is.
		s.mu.Unlock()
		s.takeOver()
	}
	if refuse == "" {
		hold = info.Spool && h.Version >= 2 && !s.final
		if s.conn != nil {
			s.conn.Close() // a newer client replaces the old one
		}
		s.conn = c
		if hold {
			s.holder, s.holderGone, s.holderReady = c, make(chan struct{}), make(chan struct{})
		}
	}
	s.mu.Unlock()
	if refuse != "" {
		_ = writeJSONLine(c, Info{Version: ProtocolVersion, Error: refuse})
		c.Close()
		return
	}
	defer s.letGo(c)
	if hold {
		err = s.handOver(c, info)
		close(s.holderReady)
	} else {
		err = writeJSONLine(c, info)
	}
	if err != nil {
		c.Close()
		return
	}
	stop := make(chan struct{})
	go func() {
		if info.Spool && h.Version >= 2 {
			s.streamExit(c, stop) // it reads the spool files itself
		} else {
			s.stream(c, h.Stdout, h.Stderr, stop)
		}
	}()
	s.readFrames(c, r)
	close(stop)
	c.Close()
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	s.mu.Unlock()
}

// readFrames applies the client's frames until its connection ends.
func (s *server) readFrames(c net.Conn, r io.Reader) {
	for {
		f, err := ReadFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.opts.Logf("client: %v", err)
			}
			return
		}
		switch f.Type {
		case FrameStdin:
			s.mu.Lock()
			for s.stdinQueued >= maxStdinQueued && !s.stdinClose && !s.final {
				s.cond.Wait()
			}
			if !s.stdinClose {
				s.stdinQ = append(s.stdinQ, f.Payload)
				s.stdinQueued += len(f.Payload)
				s.stdinBytes += int64(len(f.Payload))
				s.cond.Broadcast()
			}
			s.mu.Unlock()
		case FrameStdinClose:
			s.mu.Lock()
			s.stdinClose = true
			s.cond.Broadcast()
			s.mu.Unlock()
		case FrameSignal:
			s.mu.Lock()
			s.signalled = true
			s.mu.Unlock()
			s.killGroup(syscall.Signal(f.Signal()))
		case FrameRelease:
			s.release()
			return
		case FrameDrained:
			s.holderDrained(c, int(f.Payload[0]))
		default:
			s.opts.Logf("client sent a frame of type %q, which only the shim sends", f.Type)
			return
		}
	}
}

// maxBatch bounds the bytes of one stream a streamer sends from the live
// window in one write, so that the other stream gets its turn.
const maxBatch = 256 << 10

// stream sends the output from the given offsets on, follows it, and ends
// with the exit frame. What the live window holds is sent from memory,
// older bytes from the spool files (providers/shim/live).
func (s *server) stream(c net.Conn, off0, off1 int64, stop <-chan struct{}) {
	var files [2]*os.File
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	offs := [2]int64{off0, off1}
	types := [2]byte{FrameStdout, FrameStderr}
	var hdrs []byte
	var out net.Buffers
	// The blocks out was sent from, held until the next lock (providers/shim/live).
	var pinned [2][]*live.Block
	unpin := func() {
		for i := range pinned {
			for _, blk := range pinned[i] {
				s.live[i].Release(blk)
			}
			clear(pinned[i])
			pinned[i] = pinned[i][:0]
		}
	}
	defer func() {
		s.mu.Lock()
		unpin()
		s.mu.Unlock()
	}()
	for {
		hdrs, out = hdrs[:0], out[:0]
		// Bytes older than the window are sent from the file, up to the
		// window's start (written: providers/shim/live).
		var behind [2]int64
		s.mu.Lock()
		unpin()
		sizes, final, status, gen := s.sizes, s.final, s.status, s.gen
		for i := range offs {
			for sent := 0; offs[i] < sizes[i] && sent < maxBatch; {
				b, blk := s.live[i].At(offs[i])
				if b == nil {
					behind[i] = s.live[i].Base
					if s.spoolRun {
						// No window: what the shim spliced is all in
						// the file (version 1 clients of a spool run).
						behind[i] = sizes[i]
					}
					break
				}
				blk.Refs++
				pinned[i] = append(pinned[i], blk)
				hdrs = appendHeader(hdrs, types[i], len(b))
				out = append(out, hdrs[len(hdrs)-5:], b)
				offs[i] += int64(len(b))
				sent += len(b)
			}
		}
		s.mu.Unlock()
		if len(out) > 0 {
			// One writev; WriteTo consumes (and clears) its copy of out.
			bufs := out
			if _, err := bufs.WriteTo(c); err != nil {
				return
			}
		}
		for i := range offs {
			if behind[i] == 0 {
				continue
			}
			if files[i] == nil {
				f, err := os.Open(filepath.Join(s.dir, []string{StdoutName, StderrName}[i]))
				if err != nil {
					s.opts.Logf("open spool: %v", err)
					endStream(c)
					return
				}
				files[i] = f
			}
			n := min(int64(chunk), behind[i]-offs[i])
			if err := sendSpool(c, files[i], types[i], offs[i], n); err != nil {
				if !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.EPIPE) {
					s.opts.Logf("send spool: %v", err)
				}
				endStream(c)
				return
			}
			offs[i] += n
		}
		if len(out) > 0 || behind[0] > 0 || behind[1] > 0 {
			continue
		}
		if final {
			b, _ := jsonMarshal(status)
			_ = WriteFrame(c, Frame{Type: FrameExit, Payload: b})
			return
		}
		select {
		case <-gen:
		case <-stop:
			return
		}
	}
}

// endStream ends the output stream of a client the streamer cannot go
// on sending to: the client reads its end; its frames are still read. A
// daemon that sent a release and closed makes the send fail, and closing
// the connection here would lose the release frame that waits to be read
// (the shim would then linger for a day).
func endStream(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

// appendHeader appends a frame header for n payload bytes of type typ.
func appendHeader(b []byte, typ byte, n int) []byte {
	return append(b, typ, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// sendSpool sends the n spooled bytes of f at offset off as one frame,
// the bytes with sendfile(2): they go from the page cache to the socket.
func sendSpool(c net.Conn, f *os.File, typ byte, off, n int64) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return fmt.Errorf("%T has no file descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	if _, err := c.Write(appendHeader(nil, typ, int(n))); err != nil {
		return err
	}
	src := int(f.Fd())
	var sendErr error
	err = rc.Write(func(fd uintptr) bool {
		for n > 0 {
			m, err := unix.Sendfile(int(fd), src, &off, int(n))
			n -= int64(max(m, 0))
			switch {
			case err == unix.EAGAIN:
				return false // wait until the socket takes more
			case err == unix.EINTR:
			case err != nil:
				sendErr = err
				return true
			case m == 0:
				sendErr = fmt.Errorf("spool ends %d bytes short of its size", n)
				return true
			}
		}
		return true
	})
	if err == nil {
		err = sendErr
	}
	return err
}

// errAlreadyStarted refuses a second start request: the first one runs
// (or ran) the shim's only CLI.
var errAlreadyStarted = errors.New("the CLI was already started")

// start starts the CLI of spec.
func (s *server) start(spec Spec) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errAlreadyStarted
	}
	s.started = true // one start only, even a failed one
	s.spoolRun = spec.Spool
	s.mu.Unlock()
	if spec.Spool {
		return s.startSpool(spec)
	}

	cmd, err := command(spec)
	if err != nil {
		return err
	}
	spools, err := s.createSpools(os.O_APPEND)
	if err != nil {
		return err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
	waited, err := s.launch(cmd)
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		errR.Close()
		return err
	}
	var drained [2]chan struct{}
	for i, r := range []*os.File{outR, errR} {
		drained[i] = make(chan struct{})
		go s.spool(i, r, spools[i], drained[i])
	}
	go s.feedStdin(stdinW)
	go s.supervise(waited, [2]*os.File{outR, errR}, drained)
	return nil
}

// command is the exec.Cmd of spec, its standard files not set yet.
func command(spec Spec) (*exec.Cmd, error) {
	path, err := lookPath(spec.Path, spec.Env)
	if err != nil {
		return nil, err
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	cmd := &exec.Cmd{Path: path, Args: append([]string{spec.Path}, spec.Args...), Env: env, Dir: spec.Dir}
	// Pdeathsig: a killed shim takes its CLI along.
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.UID != nil || spec.GID != nil {
		uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
		if spec.UID != nil {
			uid = *spec.UID
		}
		if spec.GID != nil {
			gid = *spec.GID
		}
		// Groups empty: setgroups(0) clears the shim's supplementary groups.
		attr.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
	}
	cmd.SysProcAttr = attr
	return cmd, nil
}

// createSpools creates the stdout and stderr spool files, for writing
// (flag: os.O_APPEND, or 0 for splice(2), which refuses appending files).
func (s *server) createSpools(flag int) ([2]*os.File, error) {
	var spools [2]*os.File
	for i, name := range []string{StdoutName, StderrName} {
		f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL|flag, 0o600)
		if err != nil {
			if i == 1 {
				spools[0].Close()
			}
			return spools, fmt.Errorf("create spool: %w", err)
		}
		spools[i] = f
	}
	return spools, nil
}

// launch starts cmd, its files set, and returns where its exit status
// arrives; the caller closes the CLI's ends of its files.
func (s *server) launch(cmd *exec.Cmd) (<-chan ExitStatus, error) {
	if s.opts.Subreaper {
		if err := reaper.Become(); err != nil {
			s.opts.Logf("cannot become a child subreaper (a cancel may leave detached processes of the CLI): %v", err)
		}
	}
	startErr := make(chan error, 1)
	waited := make(chan ExitStatus, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child ends: keep
		// this goroutine on its thread until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		// Not cmd.Wait: the CLI stays unreaped, holding its group id,
		// until the last group kill (wait.go).
		st, err := waitExited(cmd.Process.Pid)
		if err != nil {
			s.opts.Logf("wait for the CLI: %v", err)
		}
		waited <- st
	}()
	if err := <-startErr; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	s.mu.Lock()
	s.pgid, s.cli = cmd.Process.Pid, cmd.Process
	s.mu.Unlock()
	s.opts.Logf("started %s, pid %d", cmd.Args[0], cmd.Process.Pid)
	close(s.startedCh)
	return waited, nil
}

// spool copies one pipe of the CLI to its spool file and publishes each
// read in the live window (providers/shim/live). The file is written in pieces of at
// least live.FlushAt bytes, and whenever the pipe ends: the window holds what
// is not written yet.
func (s *server) spool(i int, r, f *os.File, drained chan struct{}) {
	defer close(drained)
	defer f.Close()
	var blk *live.Block // held while buf reads into it
	var buf []byte      // blk's bytes read so far
	var flushed int     // bytes of buf in the file
	var written int64   // the file's size
	flush := func() {
		if flushed == len(buf) {
			return
		}
		if _, err := f.Write(buf[flushed:]); err != nil {
			s.opts.Logf("write spool: %v", err)
		}
		written += int64(len(buf) - flushed)
		flushed = len(buf)
		s.mu.Lock()
		s.live[i].Wrote(written)
		s.mu.Unlock()
	}
	defer func() {
		flush()
		s.mu.Lock()
		if blk != nil {
			s.live[i].Release(blk)
		}
		s.mu.Unlock()
	}()
	for {
		next := len(buf) > 0
		if cap(buf)-len(buf) < live.MinRead {
			flush()
			s.mu.Lock()
			if blk != nil {
				s.live[i].Release(blk)
			}
			blk = s.live[i].Take()
			s.mu.Unlock()
			if blk == nil {
				blk = &live.Block{B: make([]byte, live.BlockSize), Refs: 1}
			}
			buf, flushed, next = blk.B[:0], 0, false
		}
		start := len(buf)
		n, err := r.Read(buf[start:min(start+chunk, cap(buf))])
		if n > 0 {
			buf = buf[:start+n]
			s.mu.Lock()
			s.live[i].Add(s.sizes[i], blk, buf[start:start+n:cap(buf)], next)
			s.sizes[i] += int64(n)
			s.changed()
			s.mu.Unlock()
			if len(buf)-flushed >= live.FlushAt {
				flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// feedStdin writes the queued stdin to the CLI and closes it when asked.
func (s *server) feedStdin(w *os.File) {
	defer w.Close()
	broken := false
	for {
		s.mu.Lock()
		for len(s.stdinQ) == 0 && !s.stdinClose && !s.final {
			s.cond.Wait()
		}
		if len(s.stdinQ) == 0 {
			s.mu.Unlock()
			return // closed, or the CLI is gone
		}
		b := s.stdinQ[0]
		s.stdinQ = s.stdinQ[1:]
		s.stdinQueued -= len(b)
		s.cond.Broadcast()
		s.mu.Unlock()
		if !broken {
			if _, err := w.Write(b); err != nil {
				broken = true // the CLI closed its stdin: drop the rest
			}
		}
	}
}

// supervise waits for the CLI, then for its output (at most WaitDelay),
// and records the exit.
func (s *server) supervise(waited <-chan ExitStatus, pipes [2]*os.File, drained [2]chan struct{}) {
	st := <-waited
	// Closed, not sent: both pipes' waits below must see it.
	expired := make(chan struct{})
	timer := time.AfterFunc(s.opts.WaitDelay, func() { close(expired) })
	defer func() { timer.Stop() }()
	complete := true
	for _, d := range drained {
		for waiting := true; waiting; {
			select {
			case <-d:
				waiting = false
			case <-expired:
				if s.lagging() {
					// The holder of a spool run has yet to read what
					// the CLI left in its pipes: wait on.
					expired = make(chan struct{})
					exp := expired
					timer = time.AfterFunc(s.opts.WaitDelay, func() { close(exp) })
					continue
				}
				complete, waiting = false, false
			}
		}
	}
	if !complete {
		// A process of the group still holds the pipes.
		s.killGroup(syscall.SIGKILL)
		for _, p := range pipes {
			if p != nil {
				p.Close()
			}
		}
		if s.spoolRun {
			s.abandon(drained)
		}
	}
	for _, d := range drained {
		<-d
	}
	for _, p := range pipes {
		if p != nil {
			p.Close()
		}
	}
	s.mu.Lock()
	cancelled := s.signalled
	s.mu.Unlock()
	if cancelled && s.opts.Subreaper {
		reaper.KillDescendants(s.cliPID(), s.opts.Logf)
	}
	b, _ := jsonMarshal(st)
	tmp := filepath.Join(s.dir, ExitName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		_ = os.Rename(tmp, filepath.Join(s.dir, ExitName))
	}
	s.opts.Logf("the CLI exited: code %d", st.Code)
	s.mu.Lock()
	if s.spoolRun {
		s.sizes = s.spoolSizes()
	}
	s.final, s.status = true, st
	s.changed()
	s.cond.Broadcast() // the stdin queue's waiters too
	s.mu.Unlock()
	close(s.finalCh)
}

// cliPID is the CLI's pid while it is unreaped, else 0.
func (s *server) cliPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pgid
}

// lookPath resolves a bare name on the spec's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathEnv := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
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
	return "", fmt.Errorf("%q not found on PATH: %w", name, exec.ErrNotFound)
}
