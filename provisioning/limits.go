package provisioning

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"remote/api"
	"remote/lxdexec"
)

// limitsPatch is the LXD update that gives inst proj's limits: config
// keys (memory swap off with a memory limit, so the limit is a hard one)
// and the root disk device with its size. A removed limit deletes its key.
func limitsPatch(proj api.Project, inst *lxdexec.Instance) lxdexec.InstancePatch {
	var l api.ProjectLimits
	if proj.Limits != nil {
		l = *proj.Limits
	}
	procs := ""
	if l.Processes > 0 {
		procs = strconv.Itoa(l.Processes)
	}
	swap := ""
	if l.Memory != "" {
		swap = "false"
	}
	patch := lxdexec.InstancePatch{Config: map[string]string{
		"limits.cpu": l.CPU, "limits.memory": l.Memory, "limits.memory.swap": swap, "limits.processes": procs,
	}}
	root := inst.ExpandedDevices["root"]
	if root != nil && (l.Disk != "" || root["size"] != "") {
		dev := maps.Clone(root)
		delete(dev, "size")
		if l.Disk != "" {
			dev["size"] = l.Disk
		}
		patch.Devices = map[string]map[string]string{"root": dev}
	}
	return patch
}

// ApplyLimits sets proj's limits on its container, live when it runs. A
// container not created yet gets them when it is created.
func (p *Preparer) ApplyLimits(ctx context.Context, proj api.Project) error {
	inst, _, err := p.lxd.Instance(ctx, proj.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read container %q of project %q: %w", proj.Container, proj.Name, classify(err))
	}
	if _, err := owns(inst, proj); err != nil {
		return err
	}
	if err := p.lxd.UpdateInstance(ctx, proj.Container, limitsPatch(proj, inst), ""); err != nil {
		return fmt.Errorf("apply limits to project %q: %w", proj.Name, classify(err))
	}
	return nil
}
