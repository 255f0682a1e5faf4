package projectapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/provisioning/envsetup"
)

// rebuildTimeout bounds a rebuild the API started.
const rebuildTimeout = time.Hour

// checkEnvironment validates a project's environment of create or PATCH
// (repo: the project's repository, whose token secret a setup may never
// have; network.allow as a project's own, none without the egress proxy).
func (p *Projects) checkEnvironment(env api.ProjectEnvironment, repo *api.ProjectRepo) error {
	token, allow := "", func(string) error {
		return errors.New("this daemon has no egress proxy (every project's network is open)")
	}
	if repo != nil {
		token = repo.TokenSecret
	}
	if p.o.Network != nil {
		allow = func(h string) error { _, err := p.o.Network.CheckProjectAllow(h); return err }
	}
	return envsetup.Check(env, secretKeyRE.MatchString, token, allow)
}

// environment serves GET /v1/projects/{name}/environment.
func (p *Projects) environment(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, p.o.Preparer.EnvironmentStatus(proj))
}

// environmentLog serves GET /v1/projects/{name}/environment/log: the
// project-level log of its last setup or maintenance, as text.
func (p *Projects) environmentLog(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	log, err := p.o.Preparer.EnvironmentLog(proj)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(log))
	return nil
}

// rebuildEnvironment serves POST /v1/projects/{name}/environment/rebuild:
// the setup runs now, in the background (202 with the status); 409 while
// one runs.
func (p *Projects) rebuildEnvironment(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	if !p.o.Preparer.MarkEnvironmentBuilding(proj) {
		return errdefs.Conflict("project %q: its environment is being set up already", proj.Name)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), rebuildTimeout)
		defer cancel()
		if err := p.o.Preparer.RebuildEnvironment(ctx, proj); err != nil {
			p.log.Warn("project environment rebuild failed", "project", proj.Name, "error", err)
		}
	}()
	return daemon.WriteJSON(w, http.StatusAccepted, p.o.Preparer.EnvironmentStatus(proj))
}
