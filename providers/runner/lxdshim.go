package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/lxdexec"
	"remote/providers"
	"remote/providers/shim"
)

// containerDefaultEnv is what LXD's exec adds for a command's environment;
// a CLI under a shim gets it too, for the keys cmd.Env does not set.
func containerDefaultEnv(env []string, uid *uint32) []string {
	out := append([]string{}, env...)
	defaults := [][2]string{{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, {"LANG", "C.UTF-8"}}
	if uid == nil || *uid == 0 {
		defaults = append(defaults, [2]string{"HOME", "/root"}, [2]string{"USER", "root"})
	}
	for _, d := range defaults {
		if _, ok := lookupEnv(out, d[0]); !ok {
			out = append(out, d[0]+"="+d[1])
		}
	}
	return out
}

// startShimmed runs cmd under a shim in the container, or re-attaches to
// the shim slot.Attach names.
func (l *LXDLauncher) startShimmed(ctx context.Context, slot *providers.RunSlot, cmd providers.Command) (providers.Process, error) {
	grace := l.KillGrace
	if grace <= 0 {
		grace = lxdexec.DefaultKillGrace
	}
	if slot.Attach != nil {
		h := *slot.Attach
		if h.Instance != "" && h.Instance != l.Instance {
			return nil, fmt.Errorf("%w: the run's shim is in container %s, not %s", providers.ErrShimGone, h.Instance, l.Instance)
		}
		// Attach even when the run was cancelled meanwhile (a cancel right
		// after a restart): the supervisor then stops the CLI. Giving up
		// here would leave the CLI and its shim running unsupervised.
		return retryAttach(ctx, slot, time.Second, l.Shim.logger().With("container", l.Instance, "dir", h.Dir),
			func() (providers.Process, error) {
				actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shimStartTimeout)
				defer cancel()
				if err := l.checkRunning(actx); err != nil {
					return nil, err
				}
				cl, conn, err := l.attachContainer(actx, h.Dir, nil)
				if err != nil {
					return nil, err
				}
				return newShimProcess(ctx, cl, slot, grace, func() { cl.Close(); conn.drop() }, l.containerRelease(cl, h.Dir)), nil
			})
	}

	if cmd.Path == "" {
		return nil, fmt.Errorf("%w in container %s: empty command path", ErrLaunch, l.Instance)
	}
	if err := checkRunID(slot.RunID); err != nil {
		return nil, err
	}
	bin, err := l.ensureShim(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w %s in container %s: %w", ErrLaunch, cmd.Path, l.Instance, err)
	}
	dir := path.Join(ContainerRunsDir, slot.RunID)
	if err := l.execShort(ctx, bin, "serve", "--dir", dir, "--detach"); err != nil {
		return nil, fmt.Errorf("%w %s in container %s: %w", ErrLaunch, cmd.Path, l.Instance, err)
	}
	spec := shimSpec(cmd, cmd.Path)
	env := spec.Env[:0]
	for _, kv := range spec.Env {
		if k, _, _ := strings.Cut(kv, "="); ValidEnvKey(k) { // as the plain exec
			env = append(env, kv)
		}
	}
	spec.Env = containerDefaultEnv(env, cmd.UID)
	var started func(providers.ShimHandle) error
	if slot.Started != nil {
		started = slot.Started
	}
	cl, conn, err := l.attachContainer(ctx, dir, &startRequest{spec: spec, started: started})
	if err != nil {
		return nil, fmt.Errorf("%w %s in container %s: %w", ErrLaunch, cmd.Path, l.Instance, err)
	}
	return newShimProcess(ctx, cl, slot, grace, func() { cl.Close(); conn.drop() }, l.containerRelease(cl, dir)), nil
}

// maxAttachPause bounds the pause between two re-attach attempts.
const maxAttachPause = 10 * time.Second

// retryAttach re-attaches to the shim of a run that outlived the daemon
// with attach, again and again, until it succeeds or fails for a reason
// that will not pass: the shim is gone (providers.ErrShimGone) or the
// launcher cannot run one (ErrLaunch). Any other failure — LXD slow or
// briefly unreachable on a loaded host, the attach exec refused — is tried
// again after pause, doubling up to maxAttachPause: the CLI still runs in
// the container, and a daemon that gave up would leave it there
// unsupervised, beyond any cancel (the cause of a cancelled run's CLI and
// shim outliving it, TestRetryAttach). A user's cancel does not stop the
// tries (the attach is what lets the supervisor stop the CLI); the daemon
// detaching (shutdown: the next daemon attaches) does.
func retryAttach(ctx context.Context, slot *providers.RunSlot, pause time.Duration, log hclog.Logger, attach func() (providers.Process, error)) (providers.Process, error) {
	for {
		p, err := attach()
		if err == nil || errors.Is(err, providers.ErrShimGone) || errors.Is(err, ErrLaunch) {
			return p, err
		}
		log.Warn("re-attaching to a run's remote-shim failed; trying again", "in", pause, "error", err)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), providers.ErrDetached) || slot.Detached() {
				t.Stop()
				return nil, err
			}
			<-t.C
		}
		pause = min(2*pause, maxAttachPause)
	}
}

type startRequest struct {
	spec    shim.Spec
	started func(providers.ShimHandle) error
}

// checkRunning maps a container that is gone or stopped to ErrShimGone.
func (l *LXDLauncher) checkRunning(ctx context.Context) error {
	inst, _, err := l.Client.Instance(ctx, l.Instance)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return fmt.Errorf("%w: container %s is gone", providers.ErrShimGone, l.Instance)
	}
	if err != nil {
		return fmt.Errorf("look up container %s: %w", l.Instance, err)
	}
	if !inst.Running() {
		return fmt.Errorf("%w: container %s is %s", providers.ErrShimGone, l.Instance, strings.ToLower(inst.Status))
	}
	return nil
}

func (l *LXDLauncher) shimPath() (string, error) {
	if l.Shim == nil || l.Shim.Binary == "" {
		return "", fmt.Errorf("%w: no remote-shim binary configured", ErrLaunch)
	}
	d, err := l.Shim.Digest()
	if err != nil {
		return "", err
	}
	return path.Join(ContainerShimDir, "remote-shim-"+d), nil
}

// ensureShim pushes the shim binary into the container unless this
// version is there already, executable and with exactly the binary's
// content (sha256), and returns its path there. A copy that differs is
// deleted and pushed again.
//
// It runs right before every exec of the shim in the container (serve,
// attach): container root can replace the file — a same-size wrapper
// would otherwise receive the next start spec, environment included — so
// its content is checked each time, not its type, mode and size once.
// What remains is a race (a swap between this read and LXD's exec), by
// root of that container, who can read its CLIs' environment anyway.
func (l *LXDLauncher) ensureShim(ctx context.Context) (string, error) {
	bin, err := l.shimPath()
	if err != nil {
		return "", err
	}
	sum, err := l.Shim.sha256()
	if err != nil {
		return "", err
	}
	mu := l.Shim.instanceLock(l.Instance)
	mu.Lock()
	defer mu.Unlock()
	st, err := os.Stat(l.Shim.Binary)
	if err != nil {
		return "", fmt.Errorf("remote-shim binary: %w", err)
	}
	rc, info, err := l.Client.PullFile(ctx, l.Instance, bin)
	switch {
	case err == nil:
		h := sha256.New()
		_, cerr := io.Copy(h, io.LimitReader(rc, st.Size()+1))
		rc.Close()
		if cerr == nil && info.Type == lxdexec.FileTypeFile && info.Mode&0o111 != 0 && hex.EncodeToString(h.Sum(nil)) == sum {
			return bin, nil
		}
		if cerr == nil && info.Type == lxdexec.FileTypeFile && info.Mode&0o111 != 0 {
			l.Shim.logger().Warn("remote-shim in the container differs from this version; replacing it", "container", l.Instance, "path", bin)
		}
		// A copy that differs (not executable, cut short by a push that did
		// not finish, replaced by something else): a push over it would
		// keep its mode (LXD without instances_files_modify_permissions),
		// so it goes first.
		if err := l.Client.DeleteFile(ctx, l.Instance, bin); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
			return "", fmt.Errorf("replace damaged %s: %w", bin, err)
		}
	case errors.Is(err, lxdexec.ErrIsDirectory):
		return "", fmt.Errorf("%s in the container is a directory: %w", bin, ErrLaunch)
	case !errors.Is(err, lxdexec.ErrNotFound):
		return "", fmt.Errorf("look for %s: %w", bin, err)
	}
	f, err := os.Open(l.Shim.Binary)
	if err != nil {
		return "", fmt.Errorf("remote-shim binary: %w", err)
	}
	defer f.Close()
	if err := l.Client.PushFile(ctx, l.Instance, bin, f, lxdexec.FileOptions{Mode: 0o755, MkdirParents: true}); err != nil {
		return "", fmt.Errorf("push remote-shim: %w", err)
	}
	return bin, nil
}

// execShort runs the shim binary with args and waits for exit 0.
func (l *LXDLauncher) execShort(ctx context.Context, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, shimStartTimeout)
	defer cancel()
	ex, err := l.Client.Exec(ctx, l.Instance, lxdexec.ExecRequest{Command: append([]string{bin}, args...), Cwd: "/"})
	if err != nil {
		return fmt.Errorf("exec remote-shim %s: %w", args[0], err)
	}
	ex.Stdin().Close()
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(io.Discard, ex.Stdout())
	}()
	_, _ = io.Copy(&out, io.LimitReader(ex.Stderr(), 4096))
	_, _ = io.Copy(io.Discard, ex.Stderr())
	wg.Wait()
	code, err := ex.Wait()
	if code != 0 || (err != nil && !errors.Is(err, lxdexec.ErrOperationFailed)) {
		return fmt.Errorf("remote-shim %s: exit %d: %s", args[0], code, strings.TrimSpace(out.String()))
	}
	return nil
}

// execConn is an `remote-shim attach` exec used as the protocol stream.
type execConn struct {
	ex     *lxdexec.Exec
	cancel context.CancelFunc
	stderr *bytes.Buffer
	errMu  sync.Mutex
	errEnd chan struct{}
	once   sync.Once
}

func (c *execConn) Read(b []byte) (int, error)  { return c.ex.Stdout().Read(b) }
func (c *execConn) Write(b []byte) (int, error) { return c.ex.Stdin().Write(b) }

// Close ends the stream gracefully: stdin's end makes attach close its
// socket and exit (after forwarding what was written, a release too).
func (c *execConn) Close() error {
	c.once.Do(func() {
		_ = c.ex.Stdin().Close()
		go func() {
			t := time.NewTimer(10 * time.Second)
			defer t.Stop()
			select {
			case <-c.errEnd:
			case <-t.C:
			}
			c.cancel()
		}()
	})
	return nil
}

// drop ends the stream at once (the attach exec is stopped).
func (c *execConn) drop() {
	c.Close()
	c.cancel()
}

func (c *execConn) stderrText() string {
	<-c.errEnd
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return strings.TrimSpace(c.stderr.String())
}

// attachContainer execs `remote-shim attach --dir D` — the shim checked
// right before (ensureShim) — and speaks the protocol over it: a start
// when req is set (calling req.started first), else an attach from
// offset 0.
func (l *LXDLauncher) attachContainer(ctx context.Context, dir string, req *startRequest) (*shim.Client, *execConn, error) {
	bin, err := l.ensureShim(ctx)
	if err != nil {
		if cerr := l.checkRunning(ctx); cerr != nil {
			return nil, nil, cerr // a container gone or stopped: ErrShimGone
		}
		return nil, nil, err
	}
	actx, cancel := context.WithCancel(context.Background())
	ex, err := l.Client.Exec(actx, l.Instance, lxdexec.ExecRequest{Command: []string{bin, "attach", "--dir", dir}, Cwd: "/", KillGrace: time.Second})
	if err != nil {
		cancel()
		if errors.Is(err, lxdexec.ErrNotFound) || errors.Is(err, lxdexec.ErrBadRequest) {
			if cerr := l.checkRunning(ctx); cerr != nil {
				return nil, nil, cerr
			}
		}
		return nil, nil, fmt.Errorf("exec remote-shim attach in %s: %w", l.Instance, err)
	}
	conn := &execConn{ex: ex, cancel: cancel, stderr: &bytes.Buffer{}, errEnd: make(chan struct{})}
	go func() {
		defer close(conn.errEnd)
		buf := make([]byte, 4096)
		for {
			n, err := ex.Stderr().Read(buf)
			conn.errMu.Lock()
			if conn.stderr.Len() < 4096 {
				conn.stderr.Write(buf[:n])
			}
			conn.errMu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	var cl *shim.Client
	if req != nil {
		if req.started != nil {
			if err := req.started(providers.ShimHandle{Dir: dir, Instance: l.Instance}); err != nil {
				conn.drop()
				return nil, nil, err
			}
		}
		cl, err = shim.Start(ctx, conn, req.spec)
	} else {
		cl, err = shim.Attach(ctx, conn, 0, 0)
	}
	if err != nil {
		conn.drop()
		if errors.Is(err, shim.ErrLost) {
			// attach ended before the shim answered: say why.
			code, _ := ex.Wait()
			detail := conn.stderrText()
			switch code {
			case shim.AttachExitNoShim:
				return nil, nil, fmt.Errorf("%w: in container %s: %s", providers.ErrShimGone, l.Instance, detail)
			case 126, 127:
				return nil, nil, fmt.Errorf("%w: %s is missing in container %s (exit %d)", providers.ErrShimGone, bin, l.Instance, code)
			}
			return nil, nil, fmt.Errorf("%w: remote-shim attach in %s ended (exit %d): %s", providers.ErrShimGone, l.Instance, code, detail)
		}
		return nil, nil, err
	}
	return cl, conn, nil
}

// containerRelease returns the release control: over the attach stream,
// or a short new attach when that one is gone.
func (l *LXDLauncher) containerRelease(cl *shim.Client, dir string) func() {
	return func() {
		if err := cl.Release(); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c2, _, err := l.attachContainer(ctx, dir, nil)
		if err != nil {
			if !errors.Is(err, providers.ErrShimGone) && l.Shim != nil {
				l.Shim.logger().Warn("release remote-shim", "container", l.Instance, "dir", dir, "error", err)
			}
			return
		}
		_ = c2.Release()
	}
}
