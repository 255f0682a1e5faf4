package testkit

import (
	"context"
	"testing"
	"time"
)

// DirPool and BtrfsPool are the storage pools scripts/lxd-setup creates:
// "default" (driver dir, the default profile's root disk) and "btrfs"
// (driver btrfs, on a loop file; projects name it to use it).
const (
	DirPool   = "default"
	BtrfsPool = "btrfs"
)

// Pool is one storage path the checkpoint, fork and restore tests run on:
// Name is what a project names in "pool" ("" keeps the profile's root disk,
// the dir pool) and Driver is LXD's driver of it (the subtest's name).
type Pool struct {
	Name   string
	Driver string
}

// Pools are the storage paths to test on: the dir pool (pool unset: the
// profile's root disk) and the btrfs pool. Run each as a subtest named
// after Driver and call RequirePool in it.
func Pools() []Pool {
	return []Pool{{Name: "", Driver: "dir"}, {Name: BtrfsPool, Driver: "btrfs"}}
}

// RequirePool checks that LXD has p with its driver. A missing pool
// (scripts/lxd-setup not run) is Missing: the (sub)test is skipped locally
// and fails in CI.
func RequirePool(t testing.TB, p Pool) {
	t.Helper()
	c := LXD(t)
	name := p.Name
	if name == "" {
		name = DirPool
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got, err := c.StoragePool(ctx, name)
	switch {
	case err != nil:
		Missing(t, "storage pool %q (scripts/lxd-setup creates it): %v", name, err)
	case got.Driver != p.Driver:
		Missing(t, "storage pool %q has driver %q, want %s (scripts/lxd-setup)", name, got.Driver, p.Driver)
	}
}
