package projectapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/provisioning/envsetup"
	"remote/provisioning/placement"
)

var (
	cpuLimitRE  = lazyre.New(`^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$`)
	sizeLimitRE = placement.SizeLimitRE
	percentRE   = placement.PercentRE
)

// maxProcesses bounds limits.processes.
const maxProcesses = 1 << 22

// checkLimits rejects limits LXD would refuse or misread, naming the field.
func checkLimits(l api.ProjectLimits) error {
	if l.CPU != "" && !cpuLimitRE.MatchString(l.CPU) {
		return errdefs.InvalidArgument("invalid limits.cpu %q: a CPU count like \"2\" or a set like \"0-1,3\"", l.CPU)
	}
	if l.Memory != "" && (!sizeLimitRE.MatchString(l.Memory) && !percentRE.MatchString(l.Memory)) {
		return errdefs.InvalidArgument("invalid limits.memory %q: a size like \"2GiB\" or a percentage like \"50%%\"", l.Memory)
	}
	if l.Processes < 0 || l.Processes > maxProcesses {
		return errdefs.InvalidArgument("invalid limits.processes %d: 0 (no limit) to %d", l.Processes, maxProcesses)
	}
	if l.Disk != "" && !sizeLimitRE.MatchString(l.Disk) {
		return errdefs.InvalidArgument("invalid limits.disk %q: a size like \"10GiB\"", l.Disk)
	}
	return nil
}

// checkCaps refuses limits beyond the operator's caps ([projects.limits]):
// a capped field may be lowered, never raised above its cap nor removed.
// l and caps have passed checkLimits.
func checkCaps(l, caps api.ProjectLimits) error {
	if ex := placement.Excesses(&l, caps); len(ex) > 0 {
		return errdefs.InvalidArgument("%s", ex[0])
	}
	return nil
}

// newLimits is a new project's limits: req's, with the defaults (the
// caps) for the fields it leaves out; nil when there are none.
func (p *Projects) newLimits(req *api.ProjectLimits) (*api.ProjectLimits, error) {
	l := p.o.Limits
	if req != nil {
		if err := checkLimits(*req); err != nil {
			return nil, err
		}
		if req.CPU != "" {
			l.CPU = req.CPU
		}
		if req.Memory != "" {
			l.Memory = req.Memory
		}
		if req.Processes != 0 {
			l.Processes = req.Processes
		}
		if req.Disk != "" {
			l.Disk = req.Disk
		}
	}
	if err := checkCaps(l, p.o.Limits); err != nil {
		return nil, err
	}
	if l == (api.ProjectLimits{}) {
		return nil, nil
	}
	return &l, nil
}

// allowed refuses a pool, image or target the operator did not allow
// (its [projects] allowed_* key), naming it; "" (the default) always
// passes.
func allowed(field, v string, list []string, key string) error {
	if v == "" || slices.Contains(list, v) {
		return nil
	}
	if len(list) == 0 {
		return errdefs.InvalidArgument("%s %q is not allowed: only the default may be used ([projects] %s is empty)", field, v, key)
	}
	return errdefs.InvalidArgument("%s %q is not allowed: want one of %s ([projects] %s)", field, v, strings.Join(list, ", "), key)
}

// patch serves PATCH /v1/projects/{name}: {"limits": {...}} replaces the
// project's limits (a field left out or empty means no limit, which a
// capped field may not be) and applies them to its container at once,
// live where LXD allows.
func (p *Projects) patch(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	var req api.PatchProjectRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	// Everything checked before any change: a refused body changes nothing.
	if req.Limits != nil {
		if err := checkLimits(*req.Limits); err != nil {
			return err
		}
		if err := checkCaps(*req.Limits, p.o.Limits); err != nil {
			return err
		}
	}
	var network *api.ProjectNetwork
	if req.Network != nil {
		if network, err = p.newNetwork(req.Network); err != nil {
			return err
		}
		if network == nil && proj.Network == nil {
			req.Network = nil // open without an egress proxy: nothing to change
		}
	}
	if req.Environment != nil {
		if err := p.checkEnvironment(*req.Environment, proj.Repo); err != nil {
			return err
		}
	}
	if req.Limits == nil && req.Ports == nil && req.Network == nil && req.Environment == nil {
		return errdefs.InvalidArgument("nothing to change: the body names no limits, ports, network or environment")
	}
	if req.Ports != nil { // previews: the preview devices follow the ports
		if proj, err = p.setPorts(r.Context(), proj, *req.Ports); err != nil {
			return err
		}
	}
	if req.Network != nil {
		if proj, err = p.setNetwork(r, proj, network); err != nil {
			return err
		}
	}
	if req.Limits != nil {
		next := proj
		next.Limits = req.Limits
		if *req.Limits == (api.ProjectLimits{}) {
			next.Limits = nil
		}
		// LXD first: a limit it refuses is not stored.
		if err := p.o.Preparer.ApplyLimits(r.Context(), next); err != nil {
			return err
		}
		if proj, err = p.o.Store.UpdateProject(proj.Name, func(pr *api.Project) error {
			if pr.ID != proj.ID {
				return fmt.Errorf("project %q was replaced while its limits were applied", proj.Name)
			}
			pr.Limits = next.Limits
			pr.UpdatedAt = time.Now().UTC()
			return nil
		}); err != nil {
			return err
		}
		p.log.Info("project limits set", "project", proj.Name, "limits", fmt.Sprintf("%+v", next.Limits))
	}
	if req.Environment != nil {
		env := req.Environment
		if envsetup.Empty(env) {
			env = nil
		}
		if proj, err = p.o.Store.UpdateProject(proj.Name, func(pr *api.Project) error {
			if pr.ID != proj.ID {
				return fmt.Errorf("project %q was replaced while its environment was set", proj.Name)
			}
			pr.Environment = env
			pr.UpdatedAt = time.Now().UTC()
			return nil
		}); err != nil {
			return err
		}
		p.log.Info("project environment set", "project", proj.Name)
	}
	return daemon.WriteJSON(w, http.StatusOK, proj)
}
