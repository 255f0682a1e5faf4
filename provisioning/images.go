package provisioning

import (
	"context"
	"errors"
	"fmt"

	"remote/provisioning/lxdimage"
)

// DefaultImage is the image of containers whose project names none.
func (p *Preparer) DefaultImage() string { return p.image }

// CheckImage returns nil when LXD has the image alias name, an error
// matching lxdimage.ErrNoSuchImage when it has not, and an unavailability error
// (IsUnavailable) when LXD cannot be asked.
func (p *Preparer) CheckImage(ctx context.Context, name string) error {
	imgs, ok := p.lxd.(lxdimage.Images)
	if !ok {
		return fmt.Errorf("image %q: the LXD client cannot look images up", name)
	}
	return classify(lxdimage.Check(ctx, imgs, name))
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
