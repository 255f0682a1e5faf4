package hostapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/providers"
	"remote/providers/clistore"
)

// CLIStoreRoutes serve the daemon's CLI store: GET /v1/cli-store to any
// allowed peer; POST /v1/providers/{id}/install and .../select only to
// root and the daemon's own uid acting as themselves (daemon.IsAdmin).
// Installing puts software into every
// project container, so it is host administration: no other local user
// may do it, and a frontend (which relays its own users' requests) may
// not either. The daemon runs npm itself, so what lands in the store is
// what the daemon fetched, never a file a user pointed at.
type CLIStoreRoutes struct {
	Store  *clistore.Store
	Logger hclog.Logger
	// installs serialises installs (npm is slow; one at a time).
	installs sync.Mutex
}

// Routes returns the store's routes.
func (c *CLIStoreRoutes) Routes() []daemon.Route {
	return []daemon.Route{
		{Method: http.MethodGet, Pattern: "/v1/cli-store", Access: daemon.AccessPeer, Handler: c.handleList},
		{Method: http.MethodPost, Pattern: "/v1/providers/{id}/install", Access: daemon.AccessPeer, Handler: c.handleInstall},
		{Method: http.MethodPost, Pattern: "/v1/providers/{id}/select", Access: daemon.AccessPeer, Handler: c.handleSelect},
	}
}

func (c *CLIStoreRoutes) handleList(w http.ResponseWriter, r *http.Request) error {
	out := []api.CLIStoreEntry{}
	for _, p := range []providers.ProviderID{providers.Claude, providers.Codex} {
		vs, sel, err := c.Store.Installed(p)
		if err != nil {
			return err
		}
		if vs == nil {
			vs = []string{}
		}
		spec, _ := clistore.SpecOf(p)
		out = append(out, api.CLIStoreEntry{Provider: string(p), Versions: vs, Selected: sel, Tested: spec.Tested})
	}
	return daemon.WriteJSON(w, http.StatusOK, out)
}

// admin refuses every request but root's and the daemon's own uid's
// acting as themselves: a frontend running as root relays browser users,
// who are no administrators.
func (c *CLIStoreRoutes) admin(r *http.Request) error {
	return hostAdmin(r, "only root (or the daemon's own user) acting as itself may install or select CLIs in the store: not through a frontend, nor naming another user in X-Remote-User")
}

func (c *CLIStoreRoutes) provider(r *http.Request) (providers.ProviderID, error) {
	id := providers.ProviderID(r.PathValue("id"))
	if _, err := clistore.SpecOf(id); err != nil {
		return "", errdefs.InvalidArgument("provider %q: the CLI store keeps claude and codex", r.PathValue("id"))
	}
	return id, nil
}

func (c *CLIStoreRoutes) handleInstall(w http.ResponseWriter, r *http.Request) error {
	if err := c.admin(r); err != nil {
		return err
	}
	id, err := c.provider(r)
	if err != nil {
		return err
	}
	var req api.InstallCLIRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	c.installs.Lock()
	defer c.installs.Unlock()
	// npm may take minutes; a client that goes away does not leave a
	// half-installed version (the version directory is renamed into place
	// only when complete).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 15*time.Minute)
	defer cancel()
	v, err := c.Store.Install(ctx, id, req.Version, clistore.InstallOptions{Untested: req.Untested, Select: true})
	if err != nil {
		return storeError(err)
	}
	if c.Logger != nil {
		c.Logger.Info("cli installed in the store", "provider", id, "version", v.Version)
	}
	return c.handleList(w, r)
}

func (c *CLIStoreRoutes) handleSelect(w http.ResponseWriter, r *http.Request) error {
	if err := c.admin(r); err != nil {
		return err
	}
	id, err := c.provider(r)
	if err != nil {
		return err
	}
	var req api.SelectCLIRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	if _, err := c.Store.Select(id, req.Version); err != nil {
		return storeError(err)
	}
	return c.handleList(w, r)
}

// storeError classifies the store's errors; their messages name the
// provider and version, never a secret.
func storeError(err error) error {
	switch {
	case errors.Is(err, clistore.ErrBadVersion), errors.Is(err, clistore.ErrUntested), errors.Is(err, clistore.ErrUnknownProvider):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, err)
	case errors.Is(err, clistore.ErrNotInstalled):
		return &daemon.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: err.Error() + " (install it with remotectl providers install)", Err: err}
	case errors.Is(err, clistore.ErrInstall):
		return &daemon.Error{Status: http.StatusBadGateway, Code: api.CodeUnavailable, Message: err.Error(), Err: err}
	}
	return fmt.Errorf("cli store: %w", err)
}
