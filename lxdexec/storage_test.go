package lxdexec_test

import (
	"errors"
	"testing"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// TestStoragePool reads the pools scripts/lxd-setup creates from the real
// LXD and a missing one as ErrNotFound.
func TestStoragePool(t *testing.T) {
	c := testkit.LXD(t)
	ctx := testCtx(t)
	for _, p := range testkit.Pools() {
		testkit.RequirePool(t, p)
		name := p.Name
		if name == "" {
			name = testkit.DirPool
		}
		got, err := c.StoragePool(ctx, name)
		if err != nil || got.Name != name || got.Driver != p.Driver || got.Status != "Created" {
			t.Fatalf("pool %s = %+v, %v", name, got, err)
		}
	}
	if _, err := c.StoragePool(ctx, "no-such-pool"); !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("missing pool: %v, want ErrNotFound", err)
	}
	if _, err := c.StoragePool(ctx, "a/b"); !errors.Is(err, lxdexec.ErrBadRequest) {
		t.Fatalf("bad name: %v, want ErrBadRequest", err)
	}
}
