package clidevice

import (
	"context"
	"io"
	"io/fs"

	"github.com/hashicorp/go-hclog"

	"remote/lxdexec"
)

// LXD is what Device needs of the LXD client (provisioning.LXD has it).
type LXD interface {
	Instance(ctx context.Context, name string) (*lxdexec.Instance, string, error)
	UpdateInstance(ctx context.Context, name string, patch lxdexec.InstancePatch, etag string) error
	PushFile(ctx context.Context, instance, path string, content io.Reader, opts lxdexec.FileOptions) error
	PullFile(ctx context.Context, instance, path string) (io.ReadCloser, *lxdexec.FileInfo, error)
	DeleteFile(ctx context.Context, instance, path string) error
}

// Device gives containers a CLI store version: mounted as read-only disk
// devices, or pushed where LXD cannot mount the host path.
// provisioning.Steps holds one and decides when it applies.
type Device struct {
	LXD      LXD
	Log      hclog.Logger
	Classify func(error) error // marks LXD being unreachable
	// Run runs argv in the container: exit code, output, error.
	Run func(ctx context.Context, container string, argv []string) (int, string, error)
	// PushHostFile copies the host file to the container path with mode,
	// owned by root.
	PushHostFile func(ctx context.Context, container, host, dst string, mode fs.FileMode) error
}

// Container is the container a store version goes into.
type Container struct{ Name string }
