package projectapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"remote/internal/errdefs"
	"remote/provisioning/lxdimage"
)

// newImage checks a new project's image (the request's, else the daemon's
// default) against LXD's local aliases, or the index of the image server
// it names ("<server>:<alias>"; 400 when that server is not configured,
// 503 when it cannot be asked): a missing one is a 400 naming it
// and the aliases there are, with the command that builds the development
// image when that is the one missing. While LXD is unreachable the project
// is accepted, as every project is then (its container is made once LXD
// answers), and the first start names a missing image instead.
func (p *Projects) newImage(ctx context.Context, req string) error {
	image := req
	if image == "" {
		image = p.o.Preparer.DefaultImage()
	}
	err := p.o.Preparer.CheckImage(ctx, image)
	switch {
	case errors.Is(err, lxdimage.ErrServerUnavailable):
		// Refused rather than accepted unchecked: unlike LXD, the server
		// is one this project alone depends on; try again once it answers.
		return fmt.Errorf("cannot check %w", err)
	case errors.Is(err, lxdimage.ErrBadRef), errors.Is(err, lxdimage.ErrUnknownServer):
		return err
	}
	if errdefs.IsUnavailable(err) {
		p.log.Warn("image not checked: lxd unreachable", "image", image, "error", err)
		return nil
	}
	if !errors.Is(err, lxdimage.ErrNoSuchImage) {
		return err
	}
	if ref, _ := lxdimage.ParseRef(image); ref.Server != "" {
		return errdefs.InvalidArgument("unknown image %q: image server %q has no alias %q", image, ref.Server, ref.Alias)
	}
	var names []string
	if local, lerr := p.o.Preparer.LocalImages(ctx); lerr == nil {
		for _, l := range local {
			if len(p.o.Images) == 0 || slices.Contains(p.o.Images, l.Alias) {
				names = append(names, l.Alias)
			}
		}
	}
	have := "LXD has no image aliases"
	if len(names) > 0 {
		have = "usable local aliases: " + strings.Join(names, ", ")
	}
	which := fmt.Sprintf("unknown image %q: LXD has no image of that alias", image)
	if req == "" {
		which = fmt.Sprintf("the default image %q ([lxd] image) is not in LXD", image)
	}
	if image == lxdimage.DevImage {
		which += " (build and import it with `" + lxdimage.DevImageBuild + "`, or: remotectl image import FILE --alias " + image + ")"
	}
	return errdefs.InvalidArgument("%s; %s", which, have)
}
