package probe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"remote/providers"
	"remote/providers/runner"
)

// Readiness probe defaults.
const (
	// DefaultReadyTTL is how long a "ready" answer is reused; a "not
	// ready" answer is always checked again.
	DefaultReadyTTL = 30 * time.Second
	// DefaultProbeTimeout bounds each command a probe runs.
	DefaultProbeTimeout = 10 * time.Second
	// maxProbeOutput bounds what a probe keeps of a command's output.
	maxProbeOutput = 64 << 10
)

// Run runs the probed binary with args (as the host user, with the
// adapter's host environment) and returns its stdout, stderr and error
// (*providers.ExitError for a non-zero exit).
type Run func(ctx context.Context, args ...string) (stdout, stderr string, err error)

// Host is what a login check may do on the host, as the host user:
// run the probed binary, or read a file (through cat, so the host user's
// permissions apply; at most 64 KiB).
type Host struct {
	Run      Run
	ReadFile func(ctx context.Context, path string) ([]byte, error)
}

// AuthStatus is what a provider's login check found. Action is the line
// to show when LoggedIn is false.
type AuthStatus struct {
	LoggedIn bool
	Auth     string // providers.Auth*
	Action   string
}

// Probe reports a host CLI's readiness (providers.Readiness): the binary
// resolved on the run's PATH, its `--version` (cached per binary file),
// whether that is the tested version, and its login through Auth. A ready
// answer is reused for TTL; anything else is checked again on every call,
// so a fix (install, login) shows at once.
type Probe struct {
	Launcher providers.Launcher
	Binary   string
	// Env returns the environment the CLI's host runs get (HostEnv of the
	// adapter's env); nil: runner.HostEnv(nil).
	Env func() []string
	// Tested is the version the contract tests ran (providers.Tested*).
	Tested string
	// ParseVersion extracts the version from `--version` output.
	ParseVersion func(out string) string
	// Auth checks the login; nil reports providers.AuthUnknown as ready.
	Auth func(ctx context.Context, host Host) AuthStatus
	// Install is the action line when the binary is missing.
	Install string
	TTL     time.Duration // DefaultReadyTTL when zero
	Timeout time.Duration // DefaultProbeTimeout when zero

	mu         sync.Mutex
	cached     providers.Readiness
	versionKey string
	version    string
	versionErr string
}

// Readiness returns the probe's answer, cached while ready.
func (p *Probe) Readiness(ctx context.Context) providers.Readiness {
	p.mu.Lock()
	defer p.mu.Unlock()
	ttl := p.TTL
	if ttl <= 0 {
		ttl = DefaultReadyTTL
	}
	if p.cached.Ready && time.Since(p.cached.CheckedAt) < ttl {
		return p.cached
	}
	p.cached = p.check(ctx)
	return p.cached
}

// Invalidate drops the cached answer (after a login or logout).
func (p *Probe) Invalidate() {
	p.mu.Lock()
	p.cached = providers.Readiness{}
	p.mu.Unlock()
}

func (p *Probe) env() []string {
	if p.Env != nil {
		return p.Env()
	}
	return runner.HostEnv(nil)
}

func (p *Probe) check(ctx context.Context) providers.Readiness {
	r := providers.Readiness{Binary: p.Binary, TestedVersion: p.Tested, Auth: providers.AuthUnknown, CheckedAt: time.Now()}
	env := p.env()
	path, err := runner.LookPath(p.Binary, env)
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(path)
	}
	if err != nil {
		r.Action = fmt.Sprintf("%q not found on the host user's PATH: %s", p.Binary, p.Install)
		return r
	}
	r.BinaryFound, r.Binary = true, path
	run := func(ctx context.Context, args ...string) (string, string, error) {
		return p.run(ctx, path, env, args)
	}
	key := fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano())
	if key != p.versionKey {
		out, stderr, err := run(ctx, "--version")
		p.versionKey, p.version, p.versionErr = key, "", ""
		if err != nil {
			p.versionErr = fmt.Sprintf("%s --version failed as the host user: %v %s", path, err, firstLine(stderr))
			if ctx.Err() != nil {
				p.versionKey = "" // not the binary's fault: try again next time
			}
		} else if p.ParseVersion != nil {
			p.version = p.ParseVersion(out)
		}
	}
	if p.versionErr != "" {
		r.Action = strings.TrimSpace(p.versionErr)
		return r
	}
	r.Version = p.version
	r.Tested = p.Tested != "" && r.Version == p.Tested
	if p.Auth == nil {
		r.Ready = true
	} else {
		st := p.Auth(ctx, Host{Run: run, ReadFile: func(ctx context.Context, file string) ([]byte, error) {
			out, _, err := p.run(ctx, "cat", env, []string{"--", file})
			return []byte(out), err
		}})
		r.LoggedIn, r.Auth = st.LoggedIn, st.Auth
		r.Ready = st.LoggedIn || st.Auth == providers.AuthUnknown
		if !r.Ready {
			r.Action = st.Action
		}
	}
	if r.Ready && !r.Tested && p.Tested != "" {
		r.Action = fmt.Sprintf("warning: version %q is not the tested %s; it may not match the contract (scripts/install-clis pins the tested one)",
			r.Version, p.Tested)
	}
	return r
}

// run runs the binary once through the launcher, bounded by the timeout.
func (p *Probe) run(ctx context.Context, path string, env, args []string) (string, string, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// "/" as the working directory: every host user can enter it.
	proc, err := p.Launcher.Start(ctx, providers.Command{Path: path, Args: args, Env: env, Dir: "/"})
	if err != nil {
		return "", "", err
	}
	if in := proc.Stdin(); in != nil {
		_ = in.Close()
	}
	var stdout, stderr bytes.Buffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(&limitWriter{w: &stderr, n: maxProbeOutput}, proc.Stderr())
		close(done)
	}()
	_, _ = io.Copy(&limitWriter{w: &stdout, n: maxProbeOutput}, proc.Stdout())
	<-done
	err = proc.Wait()
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("timed out after %s: %w", timeout, ctx.Err())
	}
	return stdout.String(), stderr.String(), err
}

type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		_, _ = l.w.Write(b[:k])
		l.n -= k
	}
	return len(b), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return runner.TruncateOutput(s, 200)
}
