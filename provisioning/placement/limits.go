package placement

import (
	"maps"
	"strconv"

	"remote/api"
	"remote/lxdexec"
)

// LimitsPatch is the LXD update that gives inst proj's limits: config
// keys (memory swap off with a memory limit, so the limit is a hard one)
// and the root disk device with its size. A removed limit deletes its key.
func LimitsPatch(proj api.Project, inst *lxdexec.Instance) lxdexec.InstancePatch {
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
