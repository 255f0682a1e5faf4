package shim

import (
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A spool run (Spec.Spool, protocol version 2) is a host run whose
// output no process copies on its way to the daemon (docs/benchmarks.md, "remote-shim": the shim
// as a relay cost 12-40 % of the daemon's events/s). The CLI writes its
// pipes as ever; whoever holds the spooling moves what they hold into the
// spool files with splice(2), in the kernel, and the daemon reads the
// files. A version 2 client of a spool run holds the spooling while it is
// connected: it gets the pipes' read ends with the shim's answer
// (SCM_RIGHTS), splices, reads what it spliced back from the page cache
// (pread), and says when a pipe ended (FrameDrained). Otherwise (no
// client, or one of version 1, which gets frames sent from the files)
// the shim splices.
//
// Exactly one party splices at a time, at the file's end, so the spool
// stays every byte of output once, in order, whoever wrote it, and a
// re-attach from any offset reads the same bytes. The shim stops (a lock
// around each of its splices) before it hands the pipes over, and takes
// them back only once the holder let go: its connection ended, which a
// client's Close does after its last splice, as its process' end does.
// A newer client replacing a holder waits for that: the shim ends the
// holder's stream (it reads the end, stops, closes), up to
// takeOverTimeout.
//
// The output ends when both pipes ended (every writer closed them), as
// for a run with frames; WaitDelay after the CLI's exit the group is
// killed, unless the holder is still reading what is in the pipes. A
// writer the kill did not reach gets WaitDelay more; then the output ends
// at the spools' sizes, and the holder reads up to those (the exit frame
// carries them).

// takeOverTimeout bounds the wait for a holder to let go.
const takeOverTimeout = 30 * time.Second

// spliceMax bounds the bytes of one splice(2).
const spliceMax = 1 << 20

// startSpool starts spec as a spool run.
func (s *server) startSpool(spec Spec) error {
	cmd, err := command(spec)
	if err != nil {
		return err
	}
	spools, err := s.createSpools(0)
	if err != nil {
		return err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		spools[0].Close()
		spools[1].Close()
		return fmt.Errorf("stdin pipe: %w", err)
	}
	// The read ends stay raw descriptors, out of the runtime's poller:
	// a pipe in this process' epoll would wake the shim at every write
	// of the CLI's, the very cost a spool run saves, while its holder
	// reads. The shim waits with poll(2) only while it splices itself.
	// They are closed when Serve ends (closeSpools), never before, so a
	// descriptor number is never reused under a splice or a hand-over.
	pipes := [2]int{-1, -1}
	var ends [2]*os.File
	for i := range pipes {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			closeFDs(pipes[:i])
			if i == 1 {
				ends[0].Close()
			}
			stdinR.Close()
			stdinW.Close()
			return fmt.Errorf("output pipe: %w", err)
		}
		// Non-blocking for the holder's poller; the CLI's end blocks.
		_ = unix.SetNonblock(p[0], true)
		pipes[i], ends[i] = p[0], os.NewFile(uintptr(p[1]), "output")
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, ends[0], ends[1]
	s.mu.Lock()
	s.spoolFiles, s.pipes = spools, pipes
	s.drainedCh = [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	s.mu.Unlock()
	waited, err := s.launch(cmd)
	stdinR.Close()
	ends[0].Close()
	ends[1].Close()
	if err != nil {
		stdinW.Close()
		return err
	}
	s.spoolers.Add(len(pipes))
	for i := range pipes {
		go s.spliceSpool(i)
	}
	go s.feedStdin(stdinW)
	go s.supervise(waited, [2]*os.File{}, s.drainedCh)
	return nil
}

// spoolPoll is how long the shim's splicer waits in poll(2) before it
// looks whether it should stop.
const spoolPoll = 100 * time.Millisecond

// spliceSpool splices pipe i into spool i while no client holds the
// spooling, until the pipe ends or is abandoned.
func (s *server) spliceSpool(i int) {
	defer s.spoolers.Done()
	defer s.markDrained(i)
	pipe, file := s.pipes[i], int(s.spoolFiles[i].Fd())
	for {
		s.mu.Lock()
		for s.holder != nil && !s.drained[i] && !s.abandoned {
			s.cond.Wait()
		}
		stop := s.drained[i] || s.abandoned
		s.mu.Unlock()
		if stop {
			return
		}
		pfd := []unix.PollFd{{Fd: int32(pipe), Events: unix.POLLIN}}
		if k, err := unix.Poll(pfd, int(spoolPoll/time.Millisecond)); k <= 0 || err != nil {
			continue
		}
		var n int64
		var serr error
		s.splicing[i].Lock()
		s.mu.Lock()
		held := s.holder != nil
		off := s.sizes[i]
		s.mu.Unlock()
		if !held {
			n, serr = unix.Splice(pipe, nil, file, &off, spliceMax, unix.SPLICE_F_NONBLOCK)
		}
		s.splicing[i].Unlock()
		switch {
		case held || serr == unix.EINTR || serr == unix.EAGAIN:
			continue
		case serr != nil:
			s.opts.Logf("spool %d: %v", i, serr)
			return
		case n == 0: // every writer closed the pipe
			return
		}
		s.mu.Lock()
		s.sizes[i] += n
		s.changed()
		s.mu.Unlock()
	}
}

// markDrained records that stream i's output ended.
func (s *server) markDrained(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.drained[i] {
		s.drained[i] = true
		close(s.drainedCh[i])
	}
}

// holderDrained takes in the holder's word that pipe i ended.
func (s *server) holderDrained(c net.Conn, i int) {
	s.mu.Lock()
	holds := s.holder == c
	s.mu.Unlock()
	if !holds {
		s.opts.Logf("a client that holds no spooling said a pipe ended")
		return
	}
	s.markDrained(i)
}

// lagging reports whether the output has not ended only because the
// holder has yet to read what the pipes hold: every writer closed them,
// or they hold bytes.
func (s *server) lagging() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.spoolRun || s.holder == nil {
		return false
	}
	for i, p := range s.pipes {
		if s.drained[i] {
			continue
		}
		pfd := []unix.PollFd{{Fd: int32(p), Events: unix.POLLIN}}
		if k, err := unix.Poll(pfd, 0); err == nil && k > 0 {
			return true
		}
	}
	return false
}

// abandon stops waiting for the pipes' last writers, a while after the
// group kill: the output ends at the spools' sizes.
func (s *server) abandon(drained [2]chan struct{}) {
	expired := make(chan struct{})
	t := time.AfterFunc(s.opts.WaitDelay, func() { close(expired) })
	defer t.Stop()
	for _, c := range drained {
		select {
		case <-c:
		case <-expired:
		}
	}
	s.mu.Lock()
	s.abandoned = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.markDrained(0)
	s.markDrained(1)
}

// takeOver waits for the client holding the spooling, if any, to let go:
// its stream is ended, so it stops splicing and closes its connection.
func (s *server) takeOver() {
	s.mu.Lock()
	h, gone, ready, final := s.holder, s.holderGone, s.holderReady, s.final
	s.mu.Unlock()
	if h == nil || final {
		return // after the end nobody splices
	}
	timeout := time.After(takeOverTimeout)
	select {
	case <-ready: // ended before its answer, it would not know to let go
	case <-timeout:
	}
	endStream(h)
	select {
	case <-gone:
	case <-timeout:
		s.opts.Logf("the client holding the spooling did not let go within %v; taking it back", takeOverTimeout)
		h.Close()
		s.letGo(h)
	}
}

// handOver makes c, a version 2 client of a spool run, the holder: once
// the shim's splices stopped, it sends info with the pipes' read ends.
func (s *server) handOver(c net.Conn, info Info) error {
	for i := range s.splicing {
		s.splicing[i].Lock()
		s.splicing[i].Unlock() //nolint:staticcheck // a barrier: the shim's splice in progress ended
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("%T cannot pass file descriptors", c)
	}
	b, err := jsonMarshal(info)
	if err != nil {
		return err
	}
	_, _, err = uc.WriteMsgUnix(append(b, '\n'), unix.UnixRights(s.pipes[0], s.pipes[1]), nil)
	return err
}

// letGo ends c's hold of the spooling, if it has it: the shim splices
// again, from the spools' ends.
func (s *server) letGo(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder != c {
		return
	}
	s.holder = nil
	close(s.holderGone)
	s.sizes = s.spoolSizes()
	s.changed()
	s.cond.Broadcast()
}

// spoolSizes returns the spool files' sizes now; s.mu is held.
func (s *server) spoolSizes() [2]int64 {
	sz := s.sizes
	for i, f := range s.spoolFiles {
		if f == nil {
			continue
		}
		if fi, err := f.Stat(); err == nil {
			sz[i] = fi.Size()
		}
	}
	return sz
}

// closeSpools lets the spool files and pipes go, once the shim's
// splicers stopped.
func (s *server) closeSpools() {
	s.mu.Lock()
	s.abandoned = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.spoolers.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.spoolFiles {
		if f != nil {
			f.Close()
			s.spoolFiles[i] = nil
		}
	}
	if s.spoolRun {
		closeFDs(s.pipes[:])
		s.pipes = [2]int{-1, -1}
	}
}

// streamExit serves the holder of a spool run: the exit frame, with the
// spools' final sizes, once the output ended.
func (s *server) streamExit(c net.Conn, stop <-chan struct{}) {
	for {
		s.mu.Lock()
		final, st, sizes, gen := s.final, s.status, s.sizes, s.gen
		s.mu.Unlock()
		if final {
			st.Stdout, st.Stderr = sizes[0], sizes[1]
			b, _ := jsonMarshal(st)
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
