package antigravity

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// TailSize is how much of the combined stdout and stderr is kept for
// error messages.
const TailSize = 4 << 10

// chunker turns raw reads into text chunks that never split a UTF-8
// sequence: an incomplete sequence at the end of a read is held back
// until the next read completes it.
type chunker struct {
	carry []byte
}

// push returns the text of b (with any held-back prefix) up to the last
// complete rune; the rest is held back.
func (c *chunker) push(b []byte) string {
	if len(c.carry) > 0 {
		b = append(c.carry, b...)
		c.carry = nil
	}
	cut := len(b)
	// Look back at most UTFMax-1 bytes for the start of a last rune.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	if cut < len(b) {
		c.carry = append([]byte(nil), b[cut:]...)
	}
	return string(b[:cut])
}

// flush returns whatever is held back (an incomplete sequence at EOF).
func (c *chunker) flush() string {
	s := string(c.carry)
	c.carry = nil
	return s
}

// tail keeps the last TailSize bytes written to it, from any goroutine.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= TailSize {
		t.buf = append(t.buf[:0], p[len(p)-TailSize:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - TailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// String returns the tail as valid UTF-8, trimmed.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(t.buf), ""))
}

// signInMarkers are what agy prints when it has no usable login.
var signInMarkers = []string{"sign in", "sign-in", "signed out", "not signed in", "not authenticated", "login required"}

// SignInInstruction is the run.failed message for a sign-in failure.
const SignInInstruction = "Antigravity is not signed in. Run `agy` once in a terminal on the host (or in the project container for a project chat), sign in, then send the prompt again."

func needsSignIn(output string) bool {
	lower := strings.ToLower(output)
	for _, m := range signInMarkers {
		if strings.Contains(lower, m) {
			return true
		}
	}
	return false
}

// combine joins the stdout and stderr tails and keeps the last TailSize
// bytes, cut on a UTF-8 boundary.
func combine(stdout, stderr string) string {
	s := strings.TrimSpace(stdout + "\n" + stderr)
	if len(s) <= TailSize {
		return s
	}
	s = s[len(s)-TailSize:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
