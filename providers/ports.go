package providers

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Command describes a child process: a host process or an LXD exec.
type Command struct {
	Path string   // binary; a bare name is resolved by the launcher
	Args []string // arguments after Path
	Env  []string // the complete environment, KEY=VALUE
	Dir  string   // working directory
	// UID and GID select the user to run as; nil keeps the launcher's
	// default (the daemon's user on the host, root in a container).
	UID, GID *uint32
}

// Process is a started child. Stdout and Stderr must be read until EOF
// before Wait returns the exit status.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	Signal(sig syscall.Signal) error
	// Wait blocks until the process has exited and all of its output was
	// delivered. A non-zero exit is returned as *ExitError.
	Wait() error
}

// Launcher starts processes. Cancelling ctx stops the process (SIGTERM,
// then SIGKILL after a grace period).
type Launcher interface {
	Start(ctx context.Context, cmd Command) (Process, error)
}

// ExitError reports a non-zero exit status.
type ExitError struct {
	Code int
}

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Secret is one project secret handed to a container run. Its Value must
// never reach logs, events or errors.
type Secret struct {
	Key   string
	Value string
}

// PrepareRequest asks for a project's container to be made ready for one
// provider run (S9).
type PrepareRequest struct {
	Provider            ProviderID
	ProjectID           string
	EnableBrowser       bool
	EnableScheduleTools bool
	Skills              []string
	ProjectUID          string // when set: fail unless project ProjectID has this id (api.Project.ID)
	Chat                string // the chat's id: where it works in the project's repository
}

// Target is where a prepared project run executes.
type Target struct {
	ProjectID string
	Container string
	Secrets   []Secret
	// Cwd is the run's working directory in the container ("":
	// /workspace): a chat's own git worktree when it has one.
	Cwd string
	// SharedCredentials: the project shares the host's logins
	// (credentials "shared"), so AdapterConfig.ProjectEnv's keys reach its
	// runs. False for a project with its own login ("project") and for a
	// target not known to be shared: the operator's keys never reach it.
	SharedCredentials bool
}

// ProjectPreparer makes a project's container ready (S9, S10) and may emit
// system events (container_starting, container_preparing) while doing so.
type ProjectPreparer interface {
	Prepare(ctx context.Context, req PrepareRequest, emit func(Event)) (Target, error)
	// SyncCredentials copies the provider's credentials back from the
	// container when its copy is newer (S12). Best effort: the caller logs
	// the error and the run still succeeds.
	SyncCredentials(ctx context.Context, t Target, p ProviderID) error
}

// ContainerLaunchers gives a Launcher that runs commands inside a container
// through LXD exec.
type ContainerLaunchers interface {
	Container(name string) Launcher
}

// AdapterConfig is what every built-in adapter's New receives: the CLI to
// run (from [providers.<id>] in config) and the ports it runs through.
// Adapters may wrap it in an options struct of their own for extra knobs.
type AdapterConfig struct {
	Binary string   // a bare name is looked up on PATH (host) or in the container
	Args   []string // extra arguments appended to the adapter's own
	// Env is extra environment for the CLI ([providers.<id>] env): all of
	// it on the host; in a project container only the keys ProjectEnv
	// names, and only when Target.SharedCredentials (ContainerEnv in
	// package runner).
	Env        map[string]string
	ProjectEnv []string
	// Host runs loose chats on the host; Containers and Preparer run
	// project chats. Containers and Preparer may be nil when projects are
	// not wired; a project run then fails with a clear error.
	Host       Launcher
	Containers ContainerLaunchers
	Preparer   ProjectPreparer
	Logger     hclog.Logger
	// ExitGrace is how long a CLI that has emitted its terminal event
	// (run.completed or run.failed) may take to exit before it is stopped
	// like a cancelled one; the turn still ends normally. Zero means the
	// runner's default ([agent] exit_grace).
	ExitGrace time.Duration
	// ReadyTTL is how old the host CLI's ready answer may get before it
	// is checked again in the background (probe.Probe.TTL); zero means
	// probe.DefaultReadyTTL (30 s).
	ReadyTTL time.Duration
}
