package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/internal/lazyre"
	"remote/providers"
	"remote/providers/shim"
)

// SystemdMode selects how a HostLauncher starts a host run's shim.
type SystemdMode int

const (
	// SystemdAuto starts the shim as a transient systemd unit when systemd
	// runs the host (/run/systemd/system exists) and its D-Bus answers,
	// else detached (serve --detach, a new session).
	SystemdAuto SystemdMode = iota
	// SystemdNever always starts the shim detached.
	SystemdNever
	// SystemdAlways always uses a transient unit; a start fails without
	// systemd's D-Bus.
	SystemdAlways
)

// ShimConfig runs a run's main process under remote-shim
// (providers.ShimmedRun) so that it outlives the daemon. One value is
// shared by the launchers of a daemon; it must not be copied after use.
type ShimConfig struct {
	// Binary is the host path of the static remote-shim binary; it is also
	// what is pushed into containers.
	Binary string
	// RunsDir holds the host runs' run directories (<state>/runs).
	RunsDir string
	// Systemd selects how host shims are started (SystemdAuto by default).
	Systemd SystemdMode
	// Nice is added to the daemon's nice value for the shim and so for the
	// CLI it runs (HostLauncher.Nice).
	Nice   int
	Logger hclog.Logger

	mu      sync.Mutex
	digest  string // first 16 hex digits of Binary's sha256
	sum     string // all of it: what a container's copy must hash to
	digFor  string // "size mtime" of Binary when digest was computed
	pushing map[string]*sync.Mutex
}

// ContainerRunsDir holds container runs' run directories.
const ContainerRunsDir = "/var/lib/remote/runs"

// ContainerShimDir is where remote-shim is pushed in a container, as
// remote-shim-<the first 16 hex digits of its sha256>.
const ContainerShimDir = "/usr/local/lib/remote"

var runIDPattern = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkRunID(id string) error {
	if !runIDPattern.MatchString(id) {
		return fmt.Errorf("%w: run id %q cannot name a run directory (letters, digits, '.', '_' and '-' only)", ErrLaunch, id)
	}
	return nil
}

func (c *ShimConfig) logger() hclog.Logger {
	if c.Logger == nil {
		return hclog.NewNullLogger()
	}
	return c.Logger
}

// Digest returns the first 16 hex digits of the binary's sha256 (cached
// while its size and modification time stay the same).
func (c *ShimConfig) Digest() (string, error) {
	sum, err := c.sha256()
	if err != nil {
		return "", err
	}
	return sum[:16], nil
}

// sha256 returns the binary's sha256 in hex (cached like Digest).
func (c *ShimConfig) sha256() (string, error) {
	fi, err := os.Stat(c.Binary)
	if err != nil {
		return "", fmt.Errorf("remote-shim binary: %w", err)
	}
	key := fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.digFor == key {
		return c.sum, nil
	}
	f, err := os.Open(c.Binary)
	if err != nil {
		return "", fmt.Errorf("remote-shim binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("remote-shim binary: %w", err)
	}
	c.sum, c.digFor = hex.EncodeToString(h.Sum(nil)), key
	c.digest = c.sum[:16]
	return c.sum, nil
}

func (c *ShimConfig) instanceLock(instance string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pushing == nil {
		c.pushing = map[string]*sync.Mutex{}
	}
	m := c.pushing[instance]
	if m == nil {
		m = &sync.Mutex{}
		c.pushing[instance] = m
	}
	return m
}

// shimProcess is a run's CLI under a shim, seen through one connection.
type shimProcess struct {
	cl     *shim.Client
	slot   *providers.RunSlot
	stdout io.Reader
	stderr io.Reader
	stdin  *shimStdin
	// drop closes the connection (and, in a container, its attach exec)
	// without telling the shim anything.
	drop     func()
	dropOnce sync.Once
	done     chan struct{}
	waitErr  error
}

// newShimProcess wraps a connected client. Cancelling ctx stops the CLI's
// group (SIGTERM, SIGKILL after grace) unless the daemon is detaching.
func newShimProcess(ctx context.Context, cl *shim.Client, slot *providers.RunSlot, grace time.Duration, drop func(), release func()) *shimProcess {
	p := &shimProcess{cl: cl, slot: slot, done: make(chan struct{})}
	p.drop = func() { p.dropOnce.Do(drop) }
	if slot.Attach != nil && cl.Info().StdinBytes > 0 {
		slot.Cursor.StdinSent() // the CLI got stdin before the restart
	}
	p.stdin = &shimStdin{cl: cl, cursor: slot.Cursor}
	p.stdout = &goneReader{r: cl.Stdout(), p: p, name: "stdout"}
	p.stderr = &goneReader{r: cl.Stderr(), p: p, name: "stderr"}
	slot.SetControl(release, p.drop)
	go p.supervise(ctx, grace)
	return p
}

// ShimProcess is implemented by a process running under remote-shim: the
// shim's answer to the daemon's hello (the CLI's pid, the stdin bytes it
// has received, whether stdin was closed and the CLI has exited).
type ShimProcess interface {
	ShimInfo() shim.Info
}

var _ ShimProcess = (*shimProcess)(nil)

// ShimInfo returns the shim's answer to this connection's hello.
func (p *shimProcess) ShimInfo() shim.Info { return p.cl.Info() }

func (p *shimProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *shimProcess) Stdout() io.Reader     { return p.stdout }
func (p *shimProcess) Stderr() io.Reader     { return p.stderr }

// Signal sends sig to the CLI's whole process group.
func (p *shimProcess) Signal(sig syscall.Signal) error {
	select {
	case <-p.cl.Done():
		return fmt.Errorf("signal %v: %w", sig, os.ErrProcessDone)
	default:
	}
	return p.cl.Signal(sig)
}

// Wait returns once the CLI exited and its output was delivered; a lost
// shim is an error wrapping providers.ErrShimGone.
func (p *shimProcess) Wait() error {
	<-p.done
	return p.waitErr
}

func (p *shimProcess) detaching(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), providers.ErrDetached) || p.slot.Detached()
}

func (p *shimProcess) supervise(ctx context.Context, grace time.Duration) {
	select {
	case <-p.cl.Done():
	case <-ctx.Done():
		if p.detaching(ctx) {
			p.drop()
			break
		}
		_ = p.cl.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-p.cl.Done():
			t.Stop()
		case <-t.C:
			_ = p.cl.Signal(syscall.SIGKILL)
		}
	}
	st, err := p.cl.Wait()
	switch {
	case err != nil && p.slot.Detached():
		p.waitErr = fmt.Errorf("detached from remote-shim: %w", err)
	case err != nil:
		p.waitErr = fmt.Errorf("%w: %w", providers.ErrShimGone, err)
	case st.Code != 0:
		p.waitErr = &providers.ExitError{Code: st.Code}
	}
	close(p.done)
}

// goneReader names a lost shim in read errors.
type goneReader struct {
	r    io.Reader
	p    *shimProcess
	name string
}

func (g *goneReader) Read(b []byte) (int, error) {
	n, err := g.r.Read(b)
	// A lost connection wraps io.EOF too (shim.ErrLost): it is no end.
	lost := errors.Is(err, shim.ErrLost) || !errors.Is(err, io.EOF)
	if err != nil && lost && !errors.Is(err, providers.ErrShimGone) && !g.p.slot.Detached() {
		err = fmt.Errorf("%w: %w", providers.ErrShimGone, err)
	}
	return n, err
}

// shimStdin forwards writes to the shim, dropping those the CLI already
// got before a restart (Cursor.DropWrite).
type shimStdin struct {
	cl     *shim.Client
	cursor *providers.Cursor
}

func (s *shimStdin) Write(b []byte) (int, error) {
	if s.cursor.DropWrite() {
		return len(b), nil
	}
	return s.cl.WriteStdin(b)
}

// Close closes the CLI's stdin (once, however often it is called).
func (s *shimStdin) Close() error { return s.cl.CloseStdin() }

// shimSpec is what the shim runs for cmd.
func shimSpec(cmd providers.Command, path string) shim.Spec {
	env := make([]string, 0, len(cmd.Env))
	for _, kv := range cmd.Env {
		// The protocol carries KEY=VALUE entries only (what exec would pass).
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" && !strings.ContainsRune(kv, 0) {
			env = append(env, kv)
		}
	}
	return shim.Spec{Path: path, Args: cmd.Args, Env: env, Dir: cmd.Dir, UID: cmd.UID, GID: cmd.GID}
}

// goneError wraps an attach failure: a missing shim is
// providers.ErrShimGone.
func goneError(err error) error {
	if errors.Is(err, shim.ErrNoShim) || errors.Is(err, shim.ErrLost) {
		return fmt.Errorf("%w: %w", providers.ErrShimGone, err)
	}
	return err
}

// noShimToAttach is the error of a re-attach on a daemon without
// remote-shim configured.
func noShimToAttach(h *providers.ShimHandle) error {
	return fmt.Errorf("%w: remote-shim is not configured on this daemon ([agent] shim_binary), so the run in %s cannot be re-attached", providers.ErrShimGone, h.Dir)
}

// Orphans returns the run ids of the run directories under c.RunsDir
// whose run the daemon no longer tracks (keep reports false), as they are
// now: the daemon lists them before it serves and releases them beside
// serving, so a run started meanwhile is never among them.
func (c *ShimConfig) Orphans(keep func(runID string) bool) []string {
	if c == nil || c.RunsDir == "" {
		return nil
	}
	ents, _ := os.ReadDir(c.RunsDir)
	var out []string
	for _, e := range ents {
		if e.IsDir() && checkRunID(e.Name()) == nil && !keep(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// ReleaseOrphans releases the host shims under c.RunsDir whose run the
// daemon no longer tracks (keep reports false for its run id): a daemon
// that stored a run's end and died before telling the shim. A shim that
// answers is released (it removes its directory and exits); a directory
// no shim answers for is removed. It returns how many it cleaned up.
func (c *ShimConfig) ReleaseOrphans(ctx context.Context, keep func(runID string) bool) int {
	n := 0
	for _, id := range c.Orphans(keep) {
		dir := filepath.Join(c.RunsDir, id)
		conn, err := shim.Dial(ctx, dir)
		if err != nil {
			if errors.Is(err, shim.ErrNoShim) {
				if err := os.RemoveAll(dir); err == nil {
					n++
				}
			}
			continue
		}
		cl, err := shim.Attach(ctx, conn, 0, 0)
		if err != nil {
			conn.Close()
			continue
		}
		if err := cl.Release(); err != nil {
			c.logger().Warn("release an orphaned remote-shim", "dir", dir, "error", err)
		} else {
			n++
		}
		cl.Close()
	}
	return n
}
