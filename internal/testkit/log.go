package testkit

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// LogLevelEnv names the environment variable that sets the level of the
// loggers Logger returns (trace, debug, info, warn, error, off).
const LogLevelEnv = "REMOTE_TEST_LOG_LEVEL"

// DefaultLogLevel is the level when LogLevelEnv is unset or empty. A
// failing test shows every warning and error the code under test logged
// (`go test` prints a test's t.Log output only when it fails or with -v);
// info would add a line per request, which benchmarks, whose b.Log output
// is always printed, would pay for in time and noise. Set
// REMOTE_TEST_LOG_LEVEL=debug to see everything while chasing a failure.
const DefaultLogLevel = "warn"

// LogLevel returns the level LogLevelEnv asks for, DefaultLogLevel when it
// is unset. An unknown name fails the test, naming the variable.
func LogLevel(t testing.TB) hclog.Level {
	t.Helper()
	name := strings.TrimSpace(os.Getenv(LogLevelEnv))
	if name == "" {
		name = DefaultLogLevel
	}
	lvl := hclog.LevelFromString(name)
	if lvl == hclog.NoLevel {
		t.Fatalf("%s=%q: want trace, debug, info, warn, error or off", LogLevelEnv, name)
	}
	return lvl
}

// Logger returns a logger named name that writes each line through t.Log
// at LogLevel(t), so a failing test shows what the code under test logged.
// Lines logged after the test has ended (by a goroutine that outlived it)
// are dropped: t.Log then would panic.
func Logger(t testing.TB, name string) hclog.InterceptLogger {
	t.Helper()
	return hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:   name,
		Level:  LogLevel(t),
		Output: LogWriter(t),
	})
}

// LogWriter returns a writer that passes each write, without its trailing
// newline, to t.Log until the test ends, and drops writes after that.
func LogWriter(t testing.TB) *TestWriter {
	w := &TestWriter{t: t}
	t.Cleanup(w.stop)
	return w
}

// TestWriter is the io.Writer LogWriter returns.
type TestWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

// Write logs p through t.Log; it never fails.
func (w *TestWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *TestWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
