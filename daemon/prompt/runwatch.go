package prompt

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"remote/providers"
)

// errIdleTimeout is the cause a run's context is cancelled with when its
// provider produced no output for the idle timeout.
var errIdleTimeout = errors.New("no output for the idle timeout")

// idleMessage is the terminal error of a run stopped for silence.
func idleMessage(provider providers.ProviderID, idle time.Duration) string {
	return fmt.Sprintf("%s: no output for %s; stopped", provider, idle)
}

// unfinishedMessage is the terminal error of a run whose provider returned
// without a terminal event (detail from a providers.ErrUnfinishedTurn, or
// nothing).
func unfinishedMessage(provider providers.ProviderID, err error) string {
	if err != nil {
		return fmt.Sprintf("%s %v", provider, err)
	}
	return fmt.Sprintf("%s %v", provider, providers.ErrUnfinishedTurn)
}

// runWatch follows one run's agent events: whether the turn reached a
// terminal event (run.completed, run.failed or run.interrupted), and, with
// an idle timeout, when the provider last produced anything. A run silent
// for the idle timeout is cancelled with errIdleTimeout, except while an
// interaction waits for the user (that silence is the user's) and once the
// turn has finished (the runner's exit grace takes over then).
type runWatch struct {
	idle   time.Duration // 0: no idle timeout
	cancel func(error)

	mu       sync.Mutex
	last     time.Time
	finished bool
	pending  map[string]bool // interaction ids awaiting an answer
	timer    *time.Timer
	closed   bool
}

// newRunWatch starts watching; cancel stops the run with a cause.
func newRunWatch(idle time.Duration, cancel func(error)) *runWatch {
	w := &runWatch{idle: idle, cancel: cancel, last: time.Now(), pending: map[string]bool{}}
	if idle > 0 {
		w.mu.Lock() // check may run before AfterFunc returns
		w.timer = time.AfterFunc(idle, w.check)
		w.mu.Unlock()
	}
	return w
}

// saw records one agent event of the run; a nil watch ignores it.
func (w *runWatch) saw(ev providers.Event) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = time.Now()
	switch ev.Type {
	case providers.EventRunCompleted, providers.EventRunFailed, providers.EventRunInterrupted:
		w.finished = true
	case providers.EventInteractionRequest:
		w.pending[ev.InteractionID] = true
	case providers.EventInteractionResolved:
		delete(w.pending, ev.InteractionID)
	}
}

// check runs when the idle timer fires: it cancels a silent run or re-arms.
func (w *runWatch) check() {
	w.mu.Lock()
	if w.closed || w.finished {
		w.mu.Unlock()
		return
	}
	if len(w.pending) > 0 {
		w.timer.Reset(w.idle)
		w.mu.Unlock()
		return
	}
	if quiet := time.Since(w.last); quiet < w.idle {
		w.timer.Reset(w.idle - quiet)
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	w.cancel(errIdleTimeout)
}

// finishedTurn reports whether a terminal event was seen.
func (w *runWatch) finishedTurn() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.finished
}

// retry forgets the terminal state before a provider is run again for the
// same turn (session recovery, S28).
func (w *runWatch) retry() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished = false
}

// stop ends the watch once the provider returned.
func (w *runWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
