package providers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// A run's CLI is supervised by remote-shim so that it outlives the daemon
// (docs/architecture.md, "Runs that outlive the daemon"). The daemon hands
// the provider a RunSlot in the run's context; the launcher that starts the
// run's main process (the one RunProcess or the codex harness starts, marked
// by MainProcess) starts it under a shim, or re-attaches to the shim named
// by RunSlot.Attach after a daemon restart. Every other command of the run
// (credential sync, readiness probes) runs directly.
//
// Exactly once: every event a provider emits has a Pos, the stdout line it
// came from and its index among that line's events. The daemon stores the
// newest stored Pos of a run in the transaction that stores the event. On
// re-attach the shim's spool is read again from its first byte through a
// fresh parser (parsers are deterministic, so their state is rebuilt) and
// every event before the stored Pos is dropped; stdin writes made while
// replaying are dropped too, since the CLI already got them.

// ErrShimGone means the supervisor of a run is gone (host reboot, container
// deleted or restarted, the shim killed): the run cannot be re-attached.
var ErrShimGone = errors.New("the run's supervisor (remote-shim) is gone")

// ShimHandle names a run's shim: where its run directory is and, for a
// project run, the container it runs in.
type ShimHandle struct {
	Dir      string `json:"dir"`                // run directory (host path, or path inside the container)
	Instance string `json:"instance,omitempty"` // container; empty on the host
}

// RunSlot is what the daemon gives a run's launcher through the context.
type RunSlot struct {
	RunID string
	// Attach, when set, names the shim of a run started before a daemon
	// restart: the launcher attaches to it instead of starting a process.
	Attach *ShimHandle
	// Started is called with the new shim's handle before the CLI starts,
	// so the daemon can find it after a crash. An error aborts the start.
	Started func(ShimHandle) error
	// Cursor positions the run's events (see Pos); never nil.
	Cursor *Cursor

	mu               sync.Mutex
	release, detach  func()
	detached, closed bool
}

// ErrDetached is the cause of a run context cancelled because the daemon
// stops while the run goes on under its shim: the launcher must then leave
// the shim and its CLI alone (no signal), and the daemon stores nothing
// more of the run; the next daemon re-attaches.
var ErrDetached = errors.New("the daemon is stopping; the run goes on under its shim")

// SetControl is called by the launcher once the shim runs: release lets
// the shim clean up and exit (the run's end is stored), detach drops the
// daemon's connections to it without signalling anything.
func (s *RunSlot) SetControl(release, detach func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release, s.detach = release, detach
	if s.detached && detach != nil {
		go detach()
	}
}

// Release tells the shim the run's end is stored: it removes the run
// directory and exits. Called once by the daemon; a no-op without a shim
// or after Detach.
func (s *RunSlot) Release() {
	s.mu.Lock()
	f := s.release
	if s.detached || s.closed {
		f = nil
	}
	s.closed = true
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

// Detach drops the daemon's connections to the shim and leaves the run
// going (daemon shutdown). Reading the run's output then ends with an
// error; the daemon ignores how the provider returns.
func (s *RunSlot) Detach() {
	s.mu.Lock()
	f := s.detach
	already := s.detached
	s.detached = true
	s.mu.Unlock()
	if f != nil && !already {
		f()
	}
}

// Detached reports whether Detach was called.
func (s *RunSlot) Detached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detached
}

type runSlotKey struct{}
type mainProcessKey struct{}

// WithRunSlot returns ctx carrying slot.
func WithRunSlot(ctx context.Context, slot *RunSlot) context.Context {
	return context.WithValue(ctx, runSlotKey{}, slot)
}

// RunSlotFrom returns the slot of ctx, or nil.
func RunSlotFrom(ctx context.Context) *RunSlot {
	s, _ := ctx.Value(runSlotKey{}).(*RunSlot)
	return s
}

// MainProcess marks ctx as the start of the run's CLI itself.
func MainProcess(ctx context.Context) context.Context {
	return context.WithValue(ctx, mainProcessKey{}, true)
}

// IsMainProcess reports whether ctx was marked by MainProcess.
func IsMainProcess(ctx context.Context) bool {
	v, _ := ctx.Value(mainProcessKey{}).(bool)
	return v
}

// ShimmedRun returns the slot when ctx starts a run's main process under a
// shim (a RunSlot is present and ctx is marked MainProcess), else nil.
func ShimmedRun(ctx context.Context) *RunSlot {
	if !IsMainProcess(ctx) {
		return nil
	}
	return RunSlotFrom(ctx)
}

// Pos is the position of one event in a run: the byte offset in the CLI's
// stdout of the line it came from (-1 before the first line; the stdout's
// length after its end) and its index among the events of that line.
type Pos struct {
	Line  int64 `json:"line"`
	Index int64 `json:"index"`
}

// Less orders positions.
func (p Pos) Less(q Pos) bool {
	return p.Line < q.Line || (p.Line == q.Line && p.Index < q.Index)
}

// Cursor tracks the position of a run's events as its stdout is parsed.
// The process reader calls Line before the events of each line; the
// daemon's emitter calls Next for each event. A Cursor made by NewCursor
// with a stored position replays: events before it are dropped.
type Cursor struct {
	// line is the start of the line being parsed: Line, called once per
	// stdout line, only stores it (a lock there costs the reader a few
	// per cent of a flood: docs/benchmarks.md, "remote-shim"); Next starts a new index when it
	// changed. Line starts only grow.
	line    atomic.Int64
	mu      sync.Mutex
	cur     Pos  // the last event's line, and the next event's index in it
	skip    Pos  // events before skip were stored before a restart
	replay  bool // skip is meaningful
	written bool // the shim got stdin before the restart
}

// NewCursor returns a cursor for a fresh run (replay false), or for a run
// re-attached after a restart whose newest stored event was just before
// next (replay true); stdinSent says the shim had received stdin bytes.
func NewCursor(replay bool, next Pos, stdinSent bool) *Cursor {
	c := &Cursor{cur: Pos{Line: -1}, skip: next, replay: replay, written: stdinSent}
	c.line.Store(-1)
	return c
}

// StdinSent tells a re-attached run's cursor that its shim had received
// stdin before the restart (the launcher learns it when it attaches).
func (c *Cursor) StdinSent() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.written = true
	c.mu.Unlock()
}

// Line starts the events of the stdout line that begins at byte offset
// start (or, at the end of stdout, at its length).
func (c *Cursor) Line(start int64) {
	if c == nil {
		return
	}
	c.line.Store(start)
}

// Next returns the position of the next event and whether it was already
// stored before a restart (the event must then be dropped).
func (c *Cursor) Next() (Pos, bool) {
	if c == nil {
		return Pos{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.line.Load(); l != c.cur.Line {
		c.cur = Pos{Line: l}
	}
	p := c.cur
	c.cur.Index++
	return p, c.replay && p.Less(c.skip)
}

// DropWrite reports whether a stdin write made now is one the CLI got
// before the restart: while the lines before the stored position are
// replayed, and before the first line when the shim had received stdin.
func (c *Cursor) DropWrite() bool {
	if c == nil || !c.replay {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.line.Load(); l >= 0 {
		return l < c.skip.Line
	}
	return c.written || c.skip.Line >= 0
}
