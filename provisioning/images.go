package provisioning

import (
	"context"
	"errors"
	"fmt"

	"remote/provisioning/lxdimage"
)

// DefaultImage is the image of containers whose project names none.
func (p *Preparer) DefaultImage() string { return p.image }

// CheckImage returns nil when LXD has the image alias name, or its image
// server ("<server>:<alias>") lists it; an error matching
// lxdimage.ErrNoSuchImage when not, lxdimage.ErrBadRef or ErrUnknownServer
// when name is malformed or names no configured server,
// lxdimage.ErrServerUnavailable when the server cannot be asked, and
// ErrUnavailable when LXD cannot be asked.
func (p *Preparer) CheckImage(ctx context.Context, name string) error {
	imgs, ok := p.lxd.(lxdimage.Images)
	if !ok {
		return fmt.Errorf("image %q: the LXD client cannot look images up", name)
	}
	err := p.servers.Check(ctx, imgs, name)
	if errors.Is(err, lxdimage.ErrServerUnavailable) {
		return err // the image server's, not LXD's
	}
	return classify(err)
}

// LocalImages lists LXD's local image aliases (lxdimage.List).
func (p *Preparer) LocalImages(ctx context.Context) ([]lxdimage.LocalImage, error) {
	imgs, ok := p.lxd.(lxdimage.Images)
	if !ok {
		return nil, errors.New("images: the LXD client cannot list images")
	}
	list, err := lxdimage.List(ctx, imgs)
	return list, classify(err)
}
