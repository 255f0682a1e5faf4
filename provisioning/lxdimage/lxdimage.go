// Package lxdimage owns what the daemon knows of LXD's local images: the
// development image's alias (DevImage) and the command that builds it, the
// Images ability of an LXD client, listing the local aliases and checking
// one exists; the image servers a project's image may name
// ("<server>:<alias>", configured by the operator only), the LXD source
// that pulls from one and the look-up of an alias in a server's index.
// The project API and the preparer use it.
//
// It imports lxdexec, provisioning/lxdconn and internal/errdefs only; never
// provisioning, the daemon or the API.
package lxdimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/provisioning/lxdconn"
)

// DevImage is the alias of the development image `make image` (scripts/image)
// builds and imports: Debian 12 with git, Python, Node.js and a C
// toolchain. It is the default image of new containers ([lxd] image).
const DevImage = "remote-dev"

// DevImageBuild is the command that builds and imports DevImage, for the
// messages that find it missing.
const DevImageBuild = "make image"

// Images is the LXD ability to list, look up and import images.
// *lxdexec.Client and *lxdconn.Conn satisfy it.
type Images interface {
	Images(ctx context.Context) ([]lxdexec.Image, error)
	ImageAlias(ctx context.Context, name string) (*lxdexec.ImageAlias, error)
	ImportImage(ctx context.Context, r io.Reader, filename string) (string, error)
	SetImageAlias(ctx context.Context, name, fingerprint, description string) error
}

var (
	_ Images = (*lxdexec.Client)(nil)
	_ Images = (*lxdconn.Conn)(nil)
)

// ErrNoSuchImage means a project names an image alias LXD does not have
// (errdefs class NotFound).
var ErrNoSuchImage = errdefs.New(errdefs.ErrNotFound, "no such image alias in LXD")

// LocalImage is one local image alias as GET /v1/images lists it.
type LocalImage struct {
	Alias       string
	Fingerprint string
	Size        int64
	Description string // the alias's, else the image's description property
}

// List returns every local image alias of imgs, sorted by alias.
func List(ctx context.Context, imgs Images) ([]LocalImage, error) {
	all, err := imgs.Images(ctx)
	if err != nil {
		return nil, err
	}
	var out []LocalImage
	for _, im := range all {
		for _, a := range im.Aliases {
			desc := a.Description
			if desc == "" {
				desc = im.Properties["description"]
			}
			out = append(out, LocalImage{Alias: a.Name, Fingerprint: im.Fingerprint, Size: im.Size, Description: desc})
		}
	}
	slices.SortFunc(out, func(a, b LocalImage) int {
		switch {
		case a.Alias < b.Alias:
			return -1
		case a.Alias > b.Alias:
			return 1
		}
		return 0
	})
	return out, nil
}

// Check returns nil when imgs has the image alias name and an error
// matching ErrNoSuchImage when it has not (naming `make image` for
// DevImage); any other error is LXD's, unchanged.
func Check(ctx context.Context, imgs Images, name string) error {
	_, err := imgs.ImageAlias(ctx, name)
	if errors.Is(err, lxdexec.ErrNotFound) {
		if name == DevImage {
			return fmt.Errorf("image %q: %w (build and import it with `%s`)", name, ErrNoSuchImage, DevImageBuild)
		}
		return fmt.Errorf("image %q: %w", name, ErrNoSuchImage)
	}
	if err != nil {
		return fmt.Errorf("image %q: %w", name, err)
	}
	return nil
}
