package placement

import (
	"context"
	"errors"
	"fmt"

	"remote/lxdexec"
)

// PoolChecker is the LXD ability to look a storage pool up. *lxdexec.Client
// and *lxdconn.Conn satisfy it.
type PoolChecker interface {
	StoragePool(ctx context.Context, name string) (*lxdexec.StoragePool, error)
}

var _ PoolChecker = (*lxdexec.Client)(nil)

// ErrNoSuchPool means a project names a storage pool LXD does not have.
var ErrNoSuchPool = errors.New("no such storage pool in LXD")

// CheckPool returns nil when LXD has the storage pool name, an error
// matching ErrNoSuchPool when it does not, and an unavailability error
// (IsUnavailable) when LXD cannot be asked.
// lxd without PoolChecker cannot look pools up.
func CheckPool(ctx context.Context, lxd any, name string, classify func(error) error) error {
	pc, ok := lxd.(PoolChecker)
	if !ok {
		return fmt.Errorf("storage pool %q: the LXD client cannot look pools up", name)
	}
	_, err := pc.StoragePool(ctx, name)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return fmt.Errorf("storage pool %q: %w", name, ErrNoSuchPool)
	}
	if err != nil {
		return fmt.Errorf("storage pool %q: %w", name, classify(err))
	}
	return nil
}

// RootOnPool is the instance devices of a new container whose root disk is
// on pool: a local root disk device, which overrides the profile's (and
// which an LXD copy of the container keeps, so forks stay on the pool).
// No pool: none, the profile's root disk.
func RootOnPool(pool string) map[string]map[string]string {
	if pool == "" {
		return nil
	}
	return map[string]map[string]string{"root": {"type": "disk", "path": "/", "pool": pool}}
}
