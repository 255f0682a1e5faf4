package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"

	"remote/internal/lazyre"
	"remote/providers"
	"remote/providers/runner"
)

// LoginParser reads one line of a CLI login's output (stdout or stderr,
// ANSI escapes removed) and updates st: the URL, the user code, whether
// the CLI waits for a pasted code, a failure line. partial is true for
// the unterminated tail of the output (a prompt waiting for input); it may
// be seen again once complete.
type LoginParser interface {
	Line(line string, partial bool, st *providers.LoginStatus)
}

// LoginSpec is one CLI login to run as the host user.
type LoginSpec struct {
	Launcher providers.Launcher
	Command  providers.Command
	Method   string
	Parser   LoginParser
	// Timeout ends the login (cancelled); providers.LoginTimeout when zero.
	Timeout time.Duration
	// OnDone runs once when the login has ended (e.g. to drop a cached
	// readiness).
	OnDone func(providers.LoginStatus)
}

// Login is a running CLI login (providers.LoginSession). Its output is
// parsed, never kept: only the URL, the user code and a redacted
// one-line message survive.
type Login struct {
	mu        sync.Mutex
	st        providers.LoginStatus
	stdin     io.WriteCloser
	cancel    context.CancelFunc
	cancelled bool
	done      chan struct{}
}

var _ providers.LoginSession = (*Login)(nil)

// StartLogin starts spec's command and follows it in the background.
func StartLogin(spec LoginSpec) (*Login, error) {
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = providers.LoginTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	proc, err := spec.Launcher.Start(ctx, spec.Command)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start %s login: %w", spec.Command.Path, err)
	}
	l := &Login{
		st:     providers.LoginStatus{State: providers.LoginStarting, Method: spec.Method, StartedAt: time.Now().UTC()},
		stdin:  proc.Stdin(),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	var wg sync.WaitGroup
	var last lastLine
	for _, r := range []io.Reader{proc.Stdout(), proc.Stderr()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.follow(r, spec.Parser, &last)
		}()
	}
	go func() {
		wg.Wait()
		werr := proc.Wait()
		l.finish(ctx, werr, last.get(), timeout)
		cancel()
		if spec.OnDone != nil {
			spec.OnDone(l.Status())
		}
		close(l.done)
	}()
	return l, nil
}

// follow splits r into lines for the parser; the unterminated tail is
// offered too (prompts end without a newline).
func (l *Login) follow(r io.Reader, p LoginParser, last *lastLine) {
	buf := make([]byte, 4096)
	var pending string
	for {
		n, err := r.Read(buf)
		if n > 0 {
			pending += string(buf[:n])
			for {
				i := strings.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				line := cleanLine(pending[:i])
				pending = pending[i+1:]
				l.parse(p, line, false)
				last.set(line)
			}
			if len(pending) > 8<<10 { // a line that never ends: drop it
				pending = ""
			}
			if pending != "" {
				l.parse(p, cleanLine(pending), true)
			}
		}
		if err != nil {
			if pending != "" {
				line := cleanLine(pending)
				l.parse(p, line, false)
				last.set(line)
			}
			return
		}
	}
}

func (l *Login) parse(p LoginParser, line string, partial bool) {
	if line == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.Done() {
		return
	}
	before := l.st.Message
	p.Line(line, partial, &l.st)
	if l.st.Message != before {
		l.st.Message = RedactLoginMessage(l.st.Message)
	}
	if l.st.State == providers.LoginStarting && (l.st.URL != "" || l.st.UserCode != "") {
		l.st.State = providers.LoginWaiting
	}
}

func (l *Login) finish(ctx context.Context, werr error, last string, timeout time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.NeedsCode = false
	l.st.EndedAt = time.Now().UTC()
	switch {
	case l.cancelled:
		l.st.State, l.st.Message = providers.LoginCancelled, "login cancelled"
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		l.st.State, l.st.Message = providers.LoginCancelled, fmt.Sprintf("login timed out after %s", timeout)
	case werr == nil:
		l.st.State, l.st.Message = providers.LoginSucceeded, "logged in"
	default:
		msg := l.st.Message
		if msg == "" {
			msg = last
		}
		if msg == "" {
			msg = "the CLI's login ended without a message"
		}
		l.st.State, l.st.Message = providers.LoginFailed, RedactLoginMessage(fmt.Sprintf("%s (%v)", msg, werr))
	}
}

// Status returns the login's current state.
func (l *Login) Status() providers.LoginStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// SubmitCode writes the pasted code to the CLI's input.
func (l *Login) SubmitCode(code string) error {
	code = strings.TrimSpace(code)
	if code == "" {
		return errors.New("code: empty; paste the code the sign-in page showed")
	}
	if len(code) > 1024 {
		return fmt.Errorf("code: %d bytes, more than 1024: not a sign-in code", len(code))
	}
	if strings.IndexFunc(code, unicode.IsControl) >= 0 || strings.ContainsRune(code, ' ') {
		return errors.New("code: contains spaces or control characters: paste only the code")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.Done() {
		return fmt.Errorf("the login has already ended (%s)", l.st.State)
	}
	if !l.st.NeedsCode {
		return errors.New("this login does not wait for a code")
	}
	if _, err := io.WriteString(l.stdin, code+"\n"); err != nil {
		return fmt.Errorf("hand the code to the CLI: %w", err)
	}
	l.st.NeedsCode = false
	l.st.Message = "code submitted; the CLI is finishing the sign-in"
	return nil
}

// Cancel stops the CLI.
func (l *Login) Cancel() {
	l.mu.Lock()
	if !l.st.Done() {
		l.cancelled = true
	}
	l.mu.Unlock()
	l.cancel()
}

// Done is closed when the login has ended.
func (l *Login) Done() <-chan struct{} { return l.done }

type lastLine struct {
	mu sync.Mutex
	s  string
}

func (l *lastLine) set(s string) {
	if s == "" {
		return
	}
	l.mu.Lock()
	l.s = s
	l.mu.Unlock()
}

func (l *lastLine) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s
}

var ansiEscape = lazyre.New(`\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07`)

func cleanLine(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// tokenLike matches long runs of token characters (JWTs, API keys, OAuth
// codes); a message keeps none of them.
var tokenLike = lazyre.New(`[A-Za-z0-9_\-.+=]{32,}`)

// RedactLoginMessage bounds a login message to one line of 300 bytes with
// anything token-like replaced by "[redacted]".
func RedactLoginMessage(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = tokenLike.ReplaceAllString(s, "[redacted]")
	return runner.TruncateOutput(s, 300)
}

// RunLogout runs a CLI's logout command (bounded by DefaultProbeTimeout)
// and returns its last output line, redacted.
func RunLogout(ctx context.Context, launcher providers.Launcher, cmd providers.Command) (string, error) {
	p := &Probe{Launcher: launcher}
	out, stderr, err := p.run(ctx, cmd.Path, cmd.Env, cmd.Args)
	line := ""
	for _, s := range strings.Split(out+"\n"+stderr, "\n") {
		if s = cleanLine(s); s != "" && !strings.HasPrefix(s, "WARNING:") {
			line = s
		}
	}
	line = RedactLoginMessage(line)
	if err != nil {
		if line == "" {
			line = "no output"
		}
		return "", fmt.Errorf("%s logout failed as the host user: %v: %s", cmd.Path, err, line)
	}
	return line, nil
}
