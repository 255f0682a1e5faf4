package lxdexec

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// StoragePool is LXD's storage pool object (GET /1.0/storage-pools/{name}).
// Driver is "dir", "btrfs", "zfs", "lvm", "ceph", …; Status is "Created"
// when the pool is usable.
type StoragePool struct {
	Name   string            `json:"name"`
	Driver string            `json:"driver"`
	Status string            `json:"status"`
	Config map[string]string `json:"config"`
}

// StoragePool returns the named storage pool. A pool LXD does not have
// gives an error matching ErrNotFound. Pools are not per project.
func (c *Client) StoragePool(ctx context.Context, name string) (*StoragePool, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	var pool StoragePool
	if err := c.syncJSON(ctx, http.MethodGet, "/1.0/storage-pools/"+url.PathEscape(name), nil, &pool); err != nil {
		return nil, fmt.Errorf("storage pool %q: %w", name, err)
	}
	return &pool, nil
}
