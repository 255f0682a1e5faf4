package projectapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/daemon/egress"
	"remote/internal/errdefs"
)

// maxProjectAllow bounds a project's own allow list.
const maxProjectAllow = 64

// newNetwork checks a network a request names and fills the default:
// [projects.network] mode and no allow of the project's own. Without an
// egress proxy (ProjectsOptions.Network nil) every project is open.
func (p *Projects) newNetwork(req *api.ProjectNetwork) (*api.ProjectNetwork, error) {
	if p.o.Network == nil || !p.o.Preparer.HasEgress() {
		if req != nil && req.Mode != "" && req.Mode != api.NetworkOpen {
			return nil, errdefs.InvalidArgument("network.mode %q: this daemon has no egress proxy ([projects.network]); only open", req.Mode)
		}
		if req != nil && len(req.Allow) > 0 {
			return nil, errdefs.InvalidArgument("network.allow: this daemon has no egress proxy ([projects.network])")
		}
		return nil, nil
	}
	out := api.ProjectNetwork{Mode: p.o.Network.DefaultMode()}
	if req == nil {
		return &out, nil
	}
	if req.Mode != "" {
		if !egress.ValidMode(req.Mode) {
			return nil, errdefs.InvalidArgument("network.mode %q: want off, allowlist or open", req.Mode)
		}
		out.Mode = req.Mode
	}
	if len(req.Allow) > maxProjectAllow {
		return nil, errdefs.InvalidArgument("network.allow: %d entries, at most %d", len(req.Allow), maxProjectAllow)
	}
	for _, h := range req.Allow {
		if _, err := p.o.Network.CheckProjectAllow(h); err != nil {
			return nil, errdefs.InvalidArgument("network.allow: %v", err)
		}
		if !slices.Contains(out.Allow, h) {
			out.Allow = append(out.Allow, h)
		}
	}
	return &out, nil
}

// setNetwork stores proj's network and applies it to its container (live
// while it runs).
func (p *Projects) setNetwork(r *http.Request, proj api.Project, network *api.ProjectNetwork) (api.Project, error) {
	updated, err := p.o.Store.UpdateProject(proj.Name, func(pr *api.Project) error {
		if pr.ID != proj.ID {
			return fmt.Errorf("project %q was replaced while its network was set", proj.Name)
		}
		pr.Network = network
		pr.UpdatedAt = time.Now().UTC()
		return nil
	})
	if err != nil {
		return api.Project{}, err
	}
	p.log.Info("project network set", "project", proj.Name, "mode", network.Mode, "allow", len(network.Allow))
	if err := p.o.Preparer.SyncNetwork(r.Context(), updated); err != nil {
		return api.Project{}, fmt.Errorf("network of project %q stored, not yet applied to its container (its next start applies it): %w", proj.Name, err)
	}
	return updated, nil
}

// allowHost serves POST /v1/projects/{name}/network/allow: the host joins
// the project's own allow list (checked against project_may_allow); the
// proxy reads it at the next connection.
func (p *Projects) allowHost(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	if proj.Owner != "" && proj.Owner != daemon.UserFrom(r.Context()) {
		return fmt.Errorf("project %q: %w", proj.Name, errdefs.ErrNotFound)
	}
	var req api.NetworkAllowRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	if p.o.Network == nil || !p.o.Preparer.HasEgress() {
		return errdefs.Conflict("project %q: this daemon has no egress proxy ([projects.network]); its network is open", proj.Name)
	}
	if proj.Network == nil || proj.Network.Mode == api.NetworkOpen {
		return errdefs.Conflict("project %q: its network is open; nothing to allow", proj.Name)
	}
	if _, err := p.o.Network.CheckProjectAllow(req.Host); err != nil {
		return errdefs.InvalidArgument("host: %v", err)
	}
	next := *proj.Network
	if !slices.Contains(next.Allow, req.Host) {
		if len(next.Allow) >= maxProjectAllow {
			return errdefs.Conflict("project %q allows %d hosts already, at most %d", proj.Name, len(next.Allow), maxProjectAllow)
		}
		next.Allow = append(slices.Clone(next.Allow), req.Host)
	}
	updated, err := p.o.Store.UpdateProject(proj.Name, func(pr *api.Project) error {
		if pr.ID != proj.ID {
			return fmt.Errorf("project %q was replaced while a host was allowed", proj.Name)
		}
		pr.Network = &next
		pr.UpdatedAt = time.Now().UTC()
		return nil
	})
	if err != nil {
		return err
	}
	p.log.Info("project network host allowed", "project", proj.Name, "host", req.Host, "user", daemon.UserFrom(r.Context()))
	return daemon.WriteJSON(w, http.StatusOK, updated)
}

// EgressBlocked reports a refusal of proj's egress proxy: a
// system/egress_blocked event in each of its chats that is running, else
// a log line.
func (p *Projects) EgressBlocked(proj api.Project, host string, port int, method, reason string) {
	data, _ := json.Marshal(map[string]any{"host": host, "port": port, "method": method, "reason": reason})
	if p.o.Chats == nil || p.o.Hub == nil {
		return
	}
	chats, err := projectChats(p.o.Chats, proj)
	if err != nil {
		p.log.Warn("egress refused; chats not listed", "project", proj.Name, "host", host, "error", err)
		return
	}
	told := false
	for _, c := range chats {
		if !p.o.Hub.Running(c.ID) {
			continue
		}
		told = true
		msg := fmt.Sprintf("The project's network refused %s:%d (%s). Its owner may allow the host (POST /v1/projects/%s/network/allow).", host, port, reason, proj.Name)
		p.o.Hub.AppendAsync(c.ID, api.Event{Type: api.EventSystem, Subtype: api.SubtypeEgressBlocked, Message: msg,
			Project: proj.Name, Data: data, T: time.Now().UnixMilli()}, nil)
	}
	if !told {
		p.log.Info("egress refused; no chat of the project runs", "project", proj.Name, "host", host, "port", port, "method", method, "reason", reason)
	}
}
