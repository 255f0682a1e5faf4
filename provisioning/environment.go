package provisioning

import (
	"context"

	"remote/api"
	"remote/provisioning/envsetup"
)

// EnvironmentStatus is the state of proj's environment as this daemon
// last saw it (envsetup.Manager.Status).
func (p *Preparer) EnvironmentStatus(proj api.Project) api.EnvironmentStatus {
	return p.envs.Status(proj)
}

// EnvironmentLog is the project-level log of proj's last environment run.
func (p *Preparer) EnvironmentLog(proj api.Project) (string, error) { return p.envs.Log(proj) }

// MarkEnvironmentBuilding sets proj's environment state to building; false
// when a run is under way already.
func (p *Preparer) MarkEnvironmentBuilding(proj api.Project) bool { return p.envs.MarkBuilding(proj) }

// RebuildEnvironment runs proj's setup now in its container (started
// when it is not), whatever its cache key: the earlier environment's
// snapshots are dropped first. Its output goes to the project-level log.
func (p *Preparer) RebuildEnvironment(ctx context.Context, proj api.Project) error {
	c, _, err := p.start(ctx, proj, func() {}, func(Clamped) {})
	if err == nil {
		_, err = p.envs.Prepare(ctx, envsetup.Container(c), proj, "", true, p.loadSecrets(proj.Name), nil)
	}
	if err != nil {
		p.envs.Failed(proj, err.Error())
	}
	return err
}
