package hostapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/lxdexec"
	"remote/provisioning/lxdimage"
)

// DefaultMaxImageBytes bounds an image tarball POST /v1/images takes.
const DefaultMaxImageBytes = 4 << 30

// ImageRoutes serve the local LXD images projects start from: GET
// /v1/images (the aliases a project may name) to any named user; POST
// /v1/images?alias=NAME (import an image tarball through LXD's API) only
// to root and the daemon's own uid: an image is what every project naming
// its alias runs, so importing is host administration, like the CLI store.
type ImageRoutes struct {
	LXD lxdimage.Images
	// Default is the daemon's default image ([lxd] image), marked in the
	// list.
	Default string
	// Allowed are the images a new project may name ([projects]
	// allowed_images, else Default): the list a user sees. An
	// administrator acting as itself (daemon.IsAdmin) sees every alias,
	// to see what it imported.
	Allowed []string
	// MaxBytes bounds an uploaded tarball (DefaultMaxImageBytes when 0).
	MaxBytes int64
	Logger   hclog.Logger
	// imports serialises imports (each streams a large file into LXD).
	imports sync.Mutex
}

// Routes returns the image routes.
func (i *ImageRoutes) Routes() []daemon.Route {
	return []daemon.Route{
		{Method: http.MethodGet, Pattern: "/v1/images", Access: daemon.AccessUser, Handler: i.handleList},
		{Method: http.MethodPost, Pattern: "/v1/images", Access: daemon.AccessPeer, Handler: i.handleImport},
	}
}

var _ daemon.RouteProvider = (*ImageRoutes)(nil)

// aliasRE is what an imported image's alias may be: no ':' or '/', which
// name image servers in a project's image.
var aliasRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (i *ImageRoutes) list(ctx context.Context, all bool) ([]api.Image, error) {
	local, err := lxdimage.List(ctx, i.LXD)
	if err != nil {
		return nil, lxdError(err)
	}
	out := make([]api.Image, 0, len(local))
	for _, l := range local {
		if !all && len(i.Allowed) > 0 && !slices.Contains(i.Allowed, l.Alias) {
			continue
		}
		out = append(out, api.Image{Alias: l.Alias, Fingerprint: l.Fingerprint, Size: l.Size, Description: l.Description, Default: l.Alias == i.Default})
	}
	return out, nil
}

func (i *ImageRoutes) handleList(w http.ResponseWriter, r *http.Request) error {
	out, err := i.list(r.Context(), daemon.IsAdmin(r))
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, out)
}

func (i *ImageRoutes) handleImport(w http.ResponseWriter, r *http.Request) error {
	if err := hostAdmin(r, "only root (or the daemon's own user) acting as itself may import images: not through a frontend, nor naming another user in X-Remote-User"); err != nil {
		return err
	}
	alias := r.URL.Query().Get("alias")
	if !aliasRE.MatchString(alias) {
		return errdefs.InvalidArgument("invalid alias %q: letters, digits, '.', '_', '-', at most 64", alias)
	}
	max := i.MaxBytes
	if max <= 0 {
		max = DefaultMaxImageBytes
	}
	if r.ContentLength > max {
		return tooLarge(max)
	}
	i.imports.Lock()
	defer i.imports.Unlock()
	// A client that goes away aborts the upload: LXD keeps nothing of it.
	body := http.MaxBytesReader(w, r.Body, max)
	fp, err := i.LXD.ImportImage(r.Context(), body, alias+".tar.gz")
	if err != nil {
		var big *http.MaxBytesError
		switch {
		case errors.As(err, &big):
			return tooLarge(max)
		case errors.Is(err, lxdexec.ErrOperationFailed), errors.Is(err, lxdexec.ErrBadRequest):
			return errdefs.InvalidArgument("LXD refused the image: %s", lxdMessage(err))
		}
		return lxdError(fmt.Errorf("import image %q: %w", alias, err))
	}
	if err := i.LXD.SetImageAlias(r.Context(), alias, fp, ""); err != nil {
		return lxdError(fmt.Errorf("alias image %s as %q: %w", fp, alias, err))
	}
	if i.Logger != nil {
		i.Logger.Info("image imported", "alias", alias, "fingerprint", fp)
	}
	all, err := i.list(r.Context(), true)
	if err != nil {
		return err
	}
	for _, im := range all {
		if im.Alias == alias {
			return daemon.WriteJSON(w, http.StatusCreated, im)
		}
	}
	return daemon.WriteJSON(w, http.StatusCreated, api.Image{Alias: alias, Fingerprint: fp})
}

func tooLarge(max int64) error {
	return &daemon.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeBadRequest,
		Message: fmt.Sprintf("image tarball larger than %d bytes", max)}
}

// lxdMessage is LXD's own text of err (the request path left out).
func lxdMessage(err error) string {
	var le *lxdexec.Error
	if errors.As(err, &le) && le.Message != "" {
		return le.Message
	}
	return err.Error()
}

// hostAdmin refuses every request but root's and the daemon's own uid's
// acting as themselves (daemon.IsAdmin), with msg: a frontend running as
// root relays browser users, who are no administrators.
func hostAdmin(r *http.Request, msg string) error {
	if !daemon.IsAdmin(r) {
		return &daemon.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: msg}
	}
	return nil
}

// lxdError says LXD is unreachable when it is (an image server's
// unavailability keeps its own words), as the project routes do.
func lxdError(err error) error {
	if errdefs.IsUnavailable(err) && !errors.Is(err, lxdimage.ErrServerUnavailable) {
		return fmt.Errorf("lxd is unreachable: %w", err)
	}
	return err
}
