package probe

import (
	"bytes"
	"context"
	"errors"
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
	// DefaultReadyTTL is how old a "ready" answer may get before a check
	// runs again in the background (the answer is still served meanwhile);
	// a "not ready" answer is always checked again.
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
// whether that is the tested version, and its login through Auth.
//
// Checks run one at a time, each in a goroutine of its own that outlives
// the caller that started it. A ready answer is served at once, however
// old: once older than TTL it starts one check in the background (stale
// while revalidate), so a prompt never waits for the CLI of a provider
// known ready. Without a ready answer (none yet, or not ready) a caller
// waits for a check that began after it asked, so a fix (install, login)
// shows at once.
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

	mu      sync.Mutex
	cached  providers.Readiness
	gen     uint64  // bumped by Invalidate: a check begun before is not kept
	started uint64  // checks begun
	flight  *flight // the latest check begun, until it ends
	waiting int     // callers waiting for a check (tests watch it)

	checkMu    sync.Mutex // one check at a time; guards the version cache
	versionKey string
	version    string
	versionErr string
}

// flight is one check: r is set before done closes.
type flight struct {
	id, gen uint64
	done    chan struct{}
	r       providers.Readiness
}

// Readiness returns the probe's answer: the last ready one at once
// (refreshed in the background once older than TTL), else the answer of a
// check begun after this call. When ctx ends first it returns a not-ready
// answer saying so; the check goes on and its answer is kept.
func (p *Probe) Readiness(ctx context.Context) providers.Readiness {
	p.mu.Lock()
	asked := p.started
	p.mu.Unlock()
	for {
		p.mu.Lock()
		if c := p.cached; c.Ready {
			if time.Since(c.CheckedAt) >= p.ttl() {
				p.startLocked()
			}
			p.mu.Unlock()
			return c
		}
		f := p.startLocked()
		p.waiting++
		p.mu.Unlock()
		select {
		case <-f.done:
			p.wait(-1)
		case <-ctx.Done():
			p.wait(-1)
			return providers.Readiness{Binary: p.Binary, TestedVersion: p.Tested, Auth: providers.AuthUnknown, CheckedAt: time.Now(),
				Action: fmt.Sprintf("the readiness check of %q did not finish: %v", p.Binary, ctx.Err())}
		}
		if f.r.Ready || f.id > asked {
			return f.r
		}
		// Not ready, from a check begun before this call (perhaps before
		// a fix): ask again.
	}
}

// Refresh starts a check in the background unless one is under way, and
// returns at once.
func (p *Probe) Refresh() {
	p.mu.Lock()
	p.startLocked()
	p.mu.Unlock()
}

// Invalidate drops the cached answer (after a login or logout) and starts
// a check in the background; a check already under way is not kept.
func (p *Probe) Invalidate() {
	p.mu.Lock()
	p.cached = providers.Readiness{}
	p.gen++
	p.startLocked()
	p.mu.Unlock()
}

func (p *Probe) wait(n int) {
	p.mu.Lock()
	p.waiting += n
	p.mu.Unlock()
}

func (p *Probe) ttl() time.Duration {
	if p.TTL > 0 {
		return p.TTL
	}
	return DefaultReadyTTL
}

// startLocked returns the check under way, or begins one (single flight).
func (p *Probe) startLocked() *flight {
	if f := p.flight; f != nil && f.gen == p.gen {
		return f
	}
	p.started++
	f := &flight{id: p.started, gen: p.gen, done: make(chan struct{})}
	p.flight = f
	go func() {
		p.checkMu.Lock()
		r := p.check(context.Background())
		p.checkMu.Unlock()
		p.mu.Lock()
		f.r = r
		if f.gen == p.gen {
			p.cached = r
		}
		if p.flight == f {
			p.flight = nil
		}
		p.mu.Unlock()
		close(f.done)
	}()
	return f
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
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				p.versionKey = "" // perhaps not the binary's fault: try again next time
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

// Warm asks every provider for its readiness (those that report one) and
// its capabilities (Codex's model list), all at once, so the first prompt
// finds both answered; it returns when they are, or when ctx ends (the
// checks go on). The daemon runs it at start-up and after a reload.
func Warm(ctx context.Context, ps []providers.Provider) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			if rc, ok := p.(providers.ReadinessChecker); ok {
				rc.Readiness(ctx)
			}
			_, _ = p.Capabilities(ctx, providers.CapabilityRequest{})
		})
	}
	wg.Wait()
}
