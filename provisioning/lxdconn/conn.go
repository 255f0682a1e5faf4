package lxdconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/internal/errdefs"
	"remote/lxdexec"
)

// ErrUnavailable means LXD could not be reached; the API answers 503
// (provisioning.ErrUnavailable is the same error).
var ErrUnavailable = errdefs.New(errdefs.ErrUnavailable, "lxd unavailable")

// Classify wraps err with ErrUnavailable when it means LXD is unreachable
// (lxdexec marks those ErrUnreachable; errdefs recognises its marker).
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !errdefs.IsUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Conn is an LXD connection that may not exist yet: until Dial succeeds
// every call fails with ErrUnavailable, so the daemon can start (and serve
// 503s) while LXD is down and recover by itself once it answers.
type Conn struct {
	client atomic.Pointer[lxdexec.Client]
}

// NewConn returns a Conn, connected when c is not nil.
func NewConn(c *lxdexec.Client) *Conn {
	conn := &Conn{}
	if c != nil {
		conn.client.Store(c)
	}
	return conn
}

// Client returns the connected client, or nil.
func (c *Conn) Client() *lxdexec.Client { return c.client.Load() }

// Dial connects with opts, retrying with exponential backoff (1 s to 30 s)
// until it succeeds or ctx ends. It returns at once when already connected.
func (c *Conn) Dial(ctx context.Context, opts lxdexec.Options, log hclog.Logger) {
	backoff := time.Second
	var warn WarnBackoff
	for c.client.Load() == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cl, err := lxdexec.Connect(cctx, opts)
		cancel()
		if err == nil {
			c.client.Store(cl)
			log.Info("connected to lxd")
			return
		}
		warn.Log(log, "lxd unreachable, retrying", "in", backoff, "error", err)
		if !Sleep(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func (c *Conn) get() (*lxdexec.Client, error) {
	cl := c.client.Load()
	if cl == nil {
		return nil, fmt.Errorf("%w: not connected yet", ErrUnavailable)
	}
	return cl, nil
}

// Instance implements LXD.
func (c *Conn) Instance(ctx context.Context, name string) (*lxdexec.Instance, string, error) {
	cl, err := c.get()
	if err != nil {
		return nil, "", err
	}
	return cl.Instance(ctx, name)
}

// Instances implements InstanceLister.
func (c *Conn) Instances(ctx context.Context) ([]lxdexec.Instance, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.Instances(ctx)
}

// CreateInstance implements LXD.
func (c *Conn) CreateInstance(ctx context.Context, req lxdexec.InstancesPost) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.CreateInstance(ctx, req)
}

// UpdateInstance implements LXD.
func (c *Conn) UpdateInstance(ctx context.Context, name string, patch lxdexec.InstancePatch, etag string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.UpdateInstance(ctx, name, patch, etag)
}

// SetState implements LXD.
func (c *Conn) SetState(ctx context.Context, name string, req lxdexec.StateRequest) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.SetState(ctx, name, req)
}

// DeleteInstance implements LXD.
func (c *Conn) DeleteInstance(ctx context.Context, name string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.DeleteInstance(ctx, name)
}

// Exec implements LXD.
func (c *Conn) Exec(ctx context.Context, instance string, req lxdexec.ExecRequest) (*lxdexec.Exec, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.Exec(ctx, instance, req)
}

// PushFile implements LXD.
func (c *Conn) PushFile(ctx context.Context, instance, path string, content io.Reader, opts lxdexec.FileOptions) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.PushFile(ctx, instance, path, content, opts)
}

// PullFile implements LXD.
func (c *Conn) PullFile(ctx context.Context, instance, path string) (io.ReadCloser, *lxdexec.FileInfo, error) {
	cl, err := c.get()
	if err != nil {
		return nil, nil, err
	}
	return cl.PullFile(ctx, instance, path)
}

// StatFile describes a path in the instance without opening it.
func (c *Conn) StatFile(ctx context.Context, instance, path string) (*lxdexec.FileInfo, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.StatFile(ctx, instance, path)
}

// ListDir lists a directory in the instance.
func (c *Conn) ListDir(ctx context.Context, instance, path string) ([]string, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.ListDir(ctx, instance, path)
}

// DeleteFile implements LXD.
func (c *Conn) DeleteFile(ctx context.Context, instance, path string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.DeleteFile(ctx, instance, path)
}

// Events implements EventSource; before the connection exists it waits
// for it (or ctx) and then subscribes.
func (c *Conn) Events(ctx context.Context, types ...string) (<-chan lxdexec.Event, error) {
	for {
		if cl := c.client.Load(); cl != nil {
			return cl.Events(ctx, types...)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// CreateSnapshot implements Snapshotter.
func (c *Conn) CreateSnapshot(ctx context.Context, instance, name string, expires time.Time) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.CreateSnapshot(ctx, instance, name, expires)
}

// Snapshots implements Snapshotter.
func (c *Conn) Snapshots(ctx context.Context, instance string) ([]lxdexec.Snapshot, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.Snapshots(ctx, instance)
}

// DeleteSnapshot implements Snapshotter.
func (c *Conn) DeleteSnapshot(ctx context.Context, instance, name string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.DeleteSnapshot(ctx, instance, name)
}

// RestoreSnapshot implements Snapshotter.
func (c *Conn) RestoreSnapshot(ctx context.Context, instance, name string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.RestoreSnapshot(ctx, instance, name)
}

// CopyFromSnapshot implements Snapshotter.
func (c *Conn) CopyFromSnapshot(ctx context.Context, instance, snap, name string, config map[string]string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.CopyFromSnapshot(ctx, instance, snap, name, config)
}

// EditDevices implements DeviceEditor.
func (c *Conn) EditDevices(ctx context.Context, name string, edit func(map[string]map[string]string) bool) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.EditDevices(ctx, name, edit)
}

// RemoveDevices removes devices from the instance name.
func (c *Conn) RemoveDevices(ctx context.Context, name string, devices ...string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.RemoveDevices(ctx, name, devices...)
}

// ClusterMember reads a cluster member's state.
func (c *Conn) ClusterMember(ctx context.Context, name string) (*lxdexec.ClusterMember, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.ClusterMember(ctx, name)
}

// StoragePool looks the storage pool name up.
func (c *Conn) StoragePool(ctx context.Context, name string) (*lxdexec.StoragePool, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.StoragePool(ctx, name)
}

// Images implements lxdimage.Images.
func (c *Conn) Images(ctx context.Context) ([]lxdexec.Image, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.Images(ctx)
}

// ImageAlias implements lxdimage.Images.
func (c *Conn) ImageAlias(ctx context.Context, name string) (*lxdexec.ImageAlias, error) {
	cl, err := c.get()
	if err != nil {
		return nil, err
	}
	return cl.ImageAlias(ctx, name)
}

// ImportImage implements lxdimage.Images.
func (c *Conn) ImportImage(ctx context.Context, r io.Reader, filename string) (string, error) {
	cl, err := c.get()
	if err != nil {
		return "", err
	}
	return cl.ImportImage(ctx, r, filename)
}

// SetImageAlias implements lxdimage.Images.
func (c *Conn) SetImageAlias(ctx context.Context, name, fingerprint, description string) error {
	cl, err := c.get()
	if err != nil {
		return err
	}
	return cl.SetImageAlias(ctx, name, fingerprint, description)
}
