package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"remote/lxdexec"
	"remote/providers"
)

// LXDLauncher runs commands inside a container through the LXD exec API
// (never the lxc binary), with streamed stdin, stdout and stderr. With
// Instance set it is a providers.Launcher for that container; Container
// derives one per container, so the same value also serves as
// providers.ContainerLaunchers.
type LXDLauncher struct {
	Client   *lxdexec.Client
	Instance string
	// KillGrace is the SIGTERM → SIGKILL delay on cancel; zero uses
	// lxdexec.DefaultKillGrace.
	KillGrace time.Duration
	// Shim, when set, runs a run's main process (providers.ShimmedRun)
	// under remote-shim, pushed into the container once per version, so
	// that it outlives the daemon and a cancel reaches its whole process
	// group; every other command is a plain exec.
	Shim *ShimConfig
}

var (
	_ providers.Launcher           = (*LXDLauncher)(nil)
	_ providers.ContainerLaunchers = (*LXDLauncher)(nil)
)

// Container returns a launcher for the named container on the same client.
func (l *LXDLauncher) Container(name string) providers.Launcher {
	return &LXDLauncher{Client: l.Client, Instance: name, KillGrace: l.KillGrace, Shim: l.Shim}
}

// Start execs cmd in the container: cmd.Env is passed as the exec
// environment (on top of LXD's defaults), cmd.Dir as its working
// directory, UID/GID as its user; a bare cmd.Path is resolved by the
// container's PATH. Cancelling ctx sends SIGTERM, then SIGKILL.
func (l *LXDLauncher) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	if l.Client == nil || l.Instance == "" {
		return nil, fmt.Errorf("%w: LXD launcher without client or container", ErrLaunch)
	}
	if slot := providers.ShimmedRun(ctx); slot != nil {
		if l.Shim != nil {
			return l.startShimmed(ctx, slot, cmd)
		}
		if slot.Attach != nil { // never start a second CLI for a run that has one
			return nil, noShimToAttach(slot.Attach)
		}
	}
	if cmd.Path == "" {
		return nil, fmt.Errorf("%w in container %s: empty command path", ErrLaunch, l.Instance)
	}
	env := make(map[string]string, len(cmd.Env))
	for _, kv := range cmd.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && ValidEnvKey(k) {
			env[k] = v
		}
	}
	ex, err := l.Client.Exec(ctx, l.Instance, lxdexec.ExecRequest{
		Command:   append([]string{cmd.Path}, cmd.Args...),
		Env:       env,
		Cwd:       cmd.Dir,
		User:      cmd.UID,
		Group:     cmd.GID,
		KillGrace: l.KillGrace,
	})
	if err != nil {
		return nil, fmt.Errorf("%w %s in container %s: %w", ErrLaunch, cmd.Path, l.Instance, err)
	}
	return lxdProcess{ex: ex}, nil
}

type lxdProcess struct{ ex *lxdexec.Exec }

func (p lxdProcess) Stdin() io.WriteCloser { return p.ex.Stdin() }
func (p lxdProcess) Stdout() io.Reader     { return p.ex.Stdout() }
func (p lxdProcess) Stderr() io.Reader     { return p.ex.Stderr() }

func (p lxdProcess) Signal(sig syscall.Signal) error { return p.ex.Signal(int(sig)) }

// Wait maps the exec result: exit 0 → nil, another exit → ExitError (a
// command LXD could not start is exit 127), a broken exec → that error.
func (p lxdProcess) Wait() error {
	code, err := p.ex.Wait()
	if err != nil && !(errors.Is(err, lxdexec.ErrOperationFailed) && code > 0) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("exec: %w", err)
	}
	if code != 0 {
		return &providers.ExitError{Code: code}
	}
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}
