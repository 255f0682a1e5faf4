package provisioning

import (
	"context"
	"errors"
	"io"

	"remote/api"
	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning/lxdconn"
	"remote/provisioning/reconcile"
)

// LXD is the part of the LXD REST client the preparer uses. *lxdexec.Client satisfies it; tests wrap a real client to inject
// faults.
type LXD interface {
	Instance(ctx context.Context, name string) (*lxdexec.Instance, string, error)
	CreateInstance(ctx context.Context, req lxdexec.InstancesPost) error
	UpdateInstance(ctx context.Context, name string, patch lxdexec.InstancePatch, etag string) error
	SetState(ctx context.Context, name string, req lxdexec.StateRequest) error
	DeleteInstance(ctx context.Context, name string) error
	Exec(ctx context.Context, instance string, req lxdexec.ExecRequest) (*lxdexec.Exec, error)
	PushFile(ctx context.Context, instance, path string, content io.Reader, opts lxdexec.FileOptions) error
	PullFile(ctx context.Context, instance, path string) (io.ReadCloser, *lxdexec.FileInfo, error)
	DeleteFile(ctx context.Context, instance, path string) error
}

var _ LXD = (*lxdexec.Client)(nil)

// ProjectStore looks projects up and updates their stored status. The
// daemon's store satisfies it. Errors are returned wrapped, so a caller can
// still test the store's own classes (not found) with errors.Is.
type ProjectStore interface {
	Project(name string) (api.Project, error)
	Projects() ([]api.Project, error)
	UpdateProject(name string, fn func(*api.Project) error) (api.Project, error)
}

// SecretSource lists a project's decrypted secrets.
type SecretSource interface {
	ProjectSecrets(project string) ([]providers.Secret, error)
}

// SecretSourceFunc adapts a function to SecretSource.
type SecretSourceFunc func(project string) ([]providers.Secret, error)

// ProjectSecrets calls f.
func (f SecretSourceFunc) ProjectSecrets(project string) ([]providers.Secret, error) {
	return f(project)
}

// Stored project statuses (api.Project.Status), which the reconciler
// (provisioning/reconcile) keeps true to LXD.
const (
	StatusRunning = reconcile.StatusRunning
	StatusStopped = reconcile.StatusStopped
	StatusMissing = reconcile.StatusMissing
	StatusUnknown = reconcile.StatusUnknown
)

// Error classes of this package, tested with errors.Is; each that an API
// answer depends on is also in an errdefs class.
var (
	// ErrNoContainer means the project names no container (S9).
	ErrNoContainer = errdefs.New(errdefs.ErrInvalidArgument, "project has no container name")
	// ErrUnavailable means LXD could not be reached; the API answers 503.
	ErrUnavailable = lxdconn.ErrUnavailable
	// ErrIncompleteDependencies means provisioning dependencies were wired
	// partially; they must be all set or all nil.
	ErrIncompleteDependencies = errors.New("provisioning dependencies wired partially")
	// ErrCLIUnavailable means the provider's CLI check still fails after
	// installing, or no install method is configured.
	ErrCLIUnavailable = errors.New("provider cli unavailable in container")
	// ErrAPIKeyAuth means a Codex host auth record is marked as API-key
	// authentication, which the subscription flow refuses (S13).
	ErrAPIKeyAuth = errors.New("codex auth record uses api-key authentication")
	// ErrBadSkill means a skill name is not a plain name or is unknown.
	ErrBadSkill = errdefs.New(errdefs.ErrInvalidArgument, "invalid skill")
	// ErrForeignContainer means the container is marked as another
	// project's; it is never adopted or deleted.
	ErrForeignContainer = errdefs.New(errdefs.ErrConflict, "container belongs to another project")
	// ErrUnknownProvider means no provisioning setup exists for a provider.
	ErrUnknownProvider = errors.New("no provisioning setup for provider")
)

// classify wraps err with ErrUnavailable when it means LXD is unreachable.
var classify = lxdconn.Classify
