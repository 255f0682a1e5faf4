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

// ProcessOptions tunes RunProcess. The zero value uses the S15 limits and
// discards logs.
type ProcessOptions struct {
	// Stdin is written to the child's stdin, which is then closed. Empty
	// closes stdin at once.
	Stdin  string
	Logger hclog.Logger
	// Limits; zero means the S15 default.
	MaxStdoutLine, MaxStderrLine, MaxStderrKept int
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
// A line the parser rejects is logged and skipped. A stdout line longer
// than the limit ends parsing with an error event "stdout: ..." (the rest of
// stdout is drained). Stderr is captured up to MaxStderrKept for errors.
// It returns nil on exit 0 or when ctx was cancelled; an error wrapping
// providers.ErrRunFailed (a *ProcessError) when the parser emitted
// run.failed and the process exited non-zero; another *ProcessError for
// any other non-zero exit; or the launcher's start error.
func RunProcess(ctx context.Context, launcher providers.Launcher, cmd providers.Command, parser providers.LineParser, emit func(providers.Event), opts ProcessOptions) error {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	maxOut := orDefault(opts.MaxStdoutLine, MaxStdoutLine)
	maxErrLine := orDefault(opts.MaxStderrLine, MaxStderrLine)
	maxKept := orDefault(opts.MaxStderrKept, MaxStderrKept)

	p, err := launcher.Start(ctx, cmd)
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

	failed := false
	sc := bufio.NewScanner(p.Stdout())
	sc.Buffer(make([]byte, 0, min(64<<10, maxOut)), maxOut)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		events, err := parser.ParseLine(line)
		if err != nil {
			log.Warn("skipping unparsable stdout line", "command", cmd.Path, "bytes", len(line), "error", err)
			continue
		}
		for _, ev := range events {
			if ev.Type == providers.EventRunFailed {
				failed = true
			}
			emit(ev)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line longer than %d bytes: %w", maxOut, err)
		}
		if ctx.Err() == nil {
			emit(providers.Event{Type: providers.EventError, Message: "stdout: " + err.Error()})
		}
		_, _ = io.Copy(io.Discard, p.Stdout())
	}
	wg.Wait()
	waitErr := p.Wait()

	if ctx.Err() != nil || waitErr == nil {
		return nil
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
