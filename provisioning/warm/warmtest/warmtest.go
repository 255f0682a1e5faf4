// Package warmtest is test support for the warm container pool
// (provisioning/warm): an LXD that has no containers and takes every mark,
// for pools whose creates are a test's function, and Run, which keeps a
// pool running until the test ends. Tests only: product code must never
// import it, and it imports nothing of Remote but warm and lxdexec.
package warmtest

import (
	"context"
	"testing"

	"remote/lxdexec"
	"remote/provisioning/warm"
)

// LXD has no containers of before; the pool's marks, stops and deletes
// succeed.
type LXD struct{}

// Instances lists no containers: the pool adopts none.
func (LXD) Instances(context.Context) ([]lxdexec.Instance, error) { return nil, nil }

// UpdateInstance takes a claim's mark.
func (LXD) UpdateInstance(context.Context, string, lxdexec.InstancePatch, string) error {
	return nil
}

// SetState takes a stop.
func (LXD) SetState(context.Context, string, lxdexec.StateRequest) error { return nil }

// DeleteInstance takes a delete.
func (LXD) DeleteInstance(context.Context, string) error { return nil }

// Run runs p until the test ends; cleanups registered before Run run
// after p's Run returned.
func Run(t testing.TB, p *warm.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
