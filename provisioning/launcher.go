package provisioning

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"remote/lxdexec"
	"remote/providers"
)

// Launchers runs provider commands inside containers through LXD exec
// (S11: never the lxc binary). It implements providers.ContainerLaunchers.
type Launchers struct {
	LXD LXD
}

var _ providers.ContainerLaunchers = Launchers{}

// Container returns a Launcher for the named container.
func (l Launchers) Container(name string) providers.Launcher {
	return containerLauncher{lxd: l.LXD, name: name}
}

type containerLauncher struct {
	lxd  LXD
	name string
}

// Start execs cmd in the container. cmd.Env is the complete environment;
// a relative cmd.Path is resolved by the container's PATH.
func (c containerLauncher) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	if cmd.Path == "" {
		return nil, fmt.Errorf("exec in %q: empty command path", c.name)
	}
	env := make(map[string]string, len(cmd.Env))
	for _, kv := range cmd.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	ex, err := c.lxd.Exec(ctx, c.name, lxdexec.ExecRequest{
		Command: append([]string{cmd.Path}, cmd.Args...), Env: env, Cwd: cmd.Dir, User: cmd.UID, Group: cmd.GID,
	})
	if err != nil {
		return nil, fmt.Errorf("exec %s in %q: %w", cmd.Path, c.name, classify(err))
	}
	return containerProcess{ex: ex}, nil
}

type containerProcess struct{ ex *lxdexec.Exec }

func (p containerProcess) Stdin() io.WriteCloser { return p.ex.Stdin() }
func (p containerProcess) Stdout() io.Reader     { return p.ex.Stdout() }
func (p containerProcess) Stderr() io.Reader     { return p.ex.Stderr() }
func (p containerProcess) Signal(sig syscall.Signal) error {
	return p.ex.Signal(int(sig))
}

// Wait returns nil on exit 0 and *providers.ExitError on another exit
// (127 when the command was not found).
func (p containerProcess) Wait() error {
	code, err := p.ex.Wait()
	if err != nil && !(errors.Is(err, lxdexec.ErrOperationFailed) && code > 0) {
		return err
	}
	if code != 0 {
		return &providers.ExitError{Code: code}
	}
	return nil
}
