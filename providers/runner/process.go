package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
)

// The limits of S15.
const (
	MaxStdoutLine  = 16 << 20 // longest stdout line RunProcess accepts
	MaxStderrLine  = 1 << 20  // longest stderr line RunProcess reads
	MaxStderrKept  = 64 << 10 // stderr captured for ProcessError, then ignored
	maxErrorDetail = 2 << 10  // stderr tail quoted in ProcessError.Error
)

// DefaultExitGrace is how long a CLI that has emitted its terminal event
// may take to exit when ProcessOptions.ExitGrace is zero ([agent]
// exit_grace).
const DefaultExitGrace = 10 * time.Second

// ProcessOptions tunes RunProcess. The zero value uses the S15 limits and
// discards logs.
type ProcessOptions struct {
	// Stdin is written to the child's stdin, which is then closed. Empty
	// closes stdin at once.
	Stdin  string
	Logger hclog.Logger
	// Limits; zero means the S15 default.
	MaxStdoutLine, MaxStderrLine, MaxStderrKept int
	// ExitGrace is how long the child may run on after the parser emitted
	// a terminal event before it is stopped; zero means DefaultExitGrace.
	ExitGrace time.Duration
}

// ProcessError is a child that exited unsuccessfully, with the start of its
// stderr (bounded by MaxStderrKept).
type ProcessError struct {
	Err    error  // *providers.ExitError, possibly wrapped with providers.ErrRunFailed
	Stderr string // captured stderr, at most MaxStderrKept bytes
}

// Error says how the process ended and quotes the end of its captured stderr.
func (e *ProcessError) Error() string {
	detail := strings.TrimSpace(e.Stderr)
	if detail == "" {
		return e.Err.Error()
	}
	if len(detail) > maxErrorDetail {
		detail = "…" + strings.ToValidUTF8(detail[len(detail)-maxErrorDetail:], "")
	}
	return e.Err.Error() + ": " + detail
}

// Unwrap returns the exit error (and ErrRunFailed when it applies).
func (e *ProcessError) Unwrap() error { return e.Err }

// RunProcess runs cmd through launcher and turns every non-empty stdout
// line into events with parser, passing them to emit in order (S15).
//
// A line the parser rejects is logged and skipped; a last line without a
// newline is parsed like any other. A stdout line longer than the limit
// ends parsing with an error event "stdout: ..." (the rest of stdout is
// drained). Stderr is captured up to MaxStderrKept for errors.
//
// Once the parser has emitted a terminal event (run.completed, run.failed
// or run.interrupted) the child has opts.ExitGrace to exit; after that it
// is stopped the way a cancel stops it (the launcher's SIGTERM, then
// SIGKILL) and the run counts as exited 0: the turn it reported stands.
//
// It returns nil on exit 0 after a terminal event or when ctx was
// cancelled; an error wrapping providers.ErrUnfinishedTurn on exit 0
// without one (saying so when the output ended in the middle of a line);
// an error wrapping providers.ErrRunFailed (a *ProcessError) when the
// parser emitted run.failed and the process exited non-zero; another
// *ProcessError for any other non-zero exit; or the launcher's start error.
func RunProcess(ctx context.Context, launcher providers.Launcher, cmd providers.Command, parser providers.LineParser, emit func(providers.Event), opts ProcessOptions) error {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	maxOut := orDefault(opts.MaxStdoutLine, MaxStdoutLine)
	maxErrLine := orDefault(opts.MaxStderrLine, MaxStderrLine)
	maxKept := orDefault(opts.MaxStderrKept, MaxStderrKept)
	grace := opts.ExitGrace
	if grace <= 0 {
		grace = DefaultExitGrace
	}

	// procCtx stops the child without cancelling the run: the exit grace
	// uses it.
	procCtx, stop := context.WithCancel(ctx)
	defer stop()
	p, err := launcher.Start(providers.MainProcess(procCtx), cmd)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		writeStdin(p.Stdin(), opts.Stdin, log)
	}()
	var stderr []byte
	go func() {
		defer wg.Done()
		stderr = captureStderr(p.Stderr(), maxErrLine, maxKept, log)
	}()

	var (
		failed, terminal bool
		graceTimer       *time.Timer
		stoppedAfterTurn atomic.Bool
		cutLine          int // bytes of an unparsable last line without a newline
	)
	finished := func() {
		terminal = true
		if graceTimer == nil {
			graceTimer = time.AfterFunc(grace, func() {
				stoppedAfterTurn.Store(true)
				log.Warn("CLI did not exit after finishing its turn; stopping it", "command", cmd.Path, "exit_grace", grace)
				stop()
			})
		}
	}
	// The cursor of a supervised run positions each event by the stdout
	// offset of its line (providers.Pos).
	var cursor *providers.Cursor
	if slot := providers.RunSlotFrom(ctx); slot != nil {
		cursor = slot.Cursor
	}
	partial := false          // the token being parsed ended at EOF without a newline
	var lineStart, read int64 // offset of the token's line; bytes consumed
	sc := bufio.NewScanner(p.Stdout())
	sc.Buffer(make([]byte, 0, min(64<<10, maxOut)), maxOut)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		advance, token, err := bufio.ScanLines(data, atEOF)
		partial = atEOF && token != nil && advance == len(data) && bytes.IndexByte(data, '\n') < 0
		if advance > 0 {
			lineStart = read
			read += int64(advance)
		}
		return advance, token, err
	})
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		cursor.Line(lineStart)
		events, err := parser.ParseLine(line)
		if err != nil {
			if partial {
				cutLine = len(line)
			}
			log.Warn("skipping unparsable stdout line", "command", cmd.Path, "bytes", len(line), "error", err)
			continue
		}
		for _, ev := range events {
			switch ev.Type {
			case providers.EventRunFailed:
				failed = true
				finished()
			case providers.EventRunCompleted, providers.EventRunInterrupted:
				finished()
			}
			emit(ev)
		}
	}
	cursor.Line(read) // events after the output's end
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line longer than %d bytes: %w", maxOut, err)
		}
		// A lost shim is not reported here: Wait says so too, and the
		// daemon turns that into the run's one error (or, for a run
		// re-attached after a restart, daemon_restarted and its error).
		if ctx.Err() == nil && !errors.Is(err, providers.ErrShimGone) {
			emit(providers.Event{Type: providers.EventError, Message: "stdout: " + err.Error()})
			terminal = true // the error event ends the turn
		}
		_, _ = io.Copy(io.Discard, p.Stdout())
	}
	wg.Wait()
	waitErr := p.Wait()
	if graceTimer != nil {
		graceTimer.Stop()
	}

	if ctx.Err() != nil {
		return nil
	}
	if stoppedAfterTurn.Load() { // our stop, after the turn had ended
		if failed {
			return &ProcessError{Err: fmt.Errorf("%w: stopped %v after the failed turn", providers.ErrRunFailed, grace), Stderr: string(stderr)}
		}
		return nil
	}
	if waitErr == nil {
		switch {
		case terminal:
			return nil
		case cutLine > 0:
			return fmt.Errorf("%w: its output ended in the middle of a line (%d bytes that do not parse)", providers.ErrUnfinishedTurn, cutLine)
		default:
			return fmt.Errorf("%w", providers.ErrUnfinishedTurn)
		}
	}
	var exit *providers.ExitError
	if failed && errors.As(waitErr, &exit) {
		waitErr = fmt.Errorf("%w: %w", providers.ErrRunFailed, waitErr)
	}
	return &ProcessError{Err: waitErr, Stderr: string(stderr)}
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func writeStdin(w io.WriteCloser, content string, log hclog.Logger) {
	if content != "" {
		if _, err := io.WriteString(w, content); err != nil {
			log.Debug("writing stdin failed", "error", err)
		}
	}
	if err := w.Close(); err != nil {
		log.Debug("closing stdin failed", "error", err)
	}
}

// captureStderr keeps the first maxKept bytes of r (whole lines up to
// maxLine each), logs each line at debug level, and drains the rest.
func captureStderr(r io.Reader, maxLine, maxKept int, log hclog.Logger) []byte {
	var kept []byte
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(4<<10, maxLine)), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(kept) < maxKept {
			room := maxKept - len(kept)
			kept = append(kept, line[:min(len(line), room)]...)
			if len(line) < room {
				kept = append(kept, '\n')
			}
		}
		if log.IsDebug() {
			log.Debug("stderr", "line", string(line[:min(len(line), 512)]))
		}
	}
	if err := sc.Err(); err != nil {
		log.Debug("stderr line too long; ignoring the rest", "error", err)
	}
	_, _ = io.Copy(io.Discard, r)
	return kept
}
