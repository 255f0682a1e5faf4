// Package runnertest holds the small fakes of the ports adapters run
// through (providers.Launcher, providers.ContainerLaunchers,
// providers.ProjectPreparer), for the adapters' tests. Each fake is a
// function or a struct of func fields.
//
// It imports providers only, and is imported by tests only.
package runnertest

import (
	"context"

	"remote/providers"
)

// LauncherFunc is a providers.Launcher whose Start calls the function.
type LauncherFunc func(ctx context.Context, cmd providers.Command) (providers.Process, error)

var _ providers.Launcher = LauncherFunc(nil)

// Start calls f.
func (f LauncherFunc) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	return f(ctx, cmd)
}

// ContainersFunc is a providers.ContainerLaunchers whose Container calls
// the function.
type ContainersFunc func(name string) providers.Launcher

var _ providers.ContainerLaunchers = ContainersFunc(nil)

// Container calls f.
func (f ContainersFunc) Container(name string) providers.Launcher { return f(name) }

// Preparer is a providers.ProjectPreparer whose methods call its func
// fields. A method whose field is nil panics: the test did not expect
// that call.
type Preparer struct {
	PrepareFunc func(ctx context.Context, req providers.PrepareRequest, emit func(providers.Event)) (providers.Target, error)
	SyncFunc    func(ctx context.Context, t providers.Target, p providers.ProviderID) error
}

var _ providers.ProjectPreparer = Preparer{}

// Prepare calls PrepareFunc.
func (f Preparer) Prepare(ctx context.Context, req providers.PrepareRequest, emit func(providers.Event)) (providers.Target, error) {
	if f.PrepareFunc == nil {
		panic("runnertest: unexpected Prepare call (no PrepareFunc)")
	}
	return f.PrepareFunc(ctx, req, emit)
}

// SyncCredentials calls SyncFunc.
func (f Preparer) SyncCredentials(ctx context.Context, t providers.Target, p providers.ProviderID) error {
	if f.SyncFunc == nil {
		panic("runnertest: unexpected SyncCredentials call (no SyncFunc)")
	}
	return f.SyncFunc(ctx, t, p)
}
