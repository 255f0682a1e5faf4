package projectapi

import (
	"testing"

	"remote/api"
)

// FuzzCheckCaps: for any limits and caps LXD would accept, the cap check
// never panics, a limit equal to its cap passes, and a capped field left
// empty is refused.
func FuzzCheckCaps(f *testing.F) {
	for _, s := range [][5]string{
		{"2", "0-3", "1GiB", "100%", "10GiB"},
		{"0-1,3", "1,3", "50%", "40%", "1.5TB"},
		{"4", "2", "1024MiB", "1GiB", "10241MiB"},
		{"0-9999", "9999", "999999999999.999TiB", "1B", "0"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], 500, 4194304)
	}
	f.Fuzz(func(t *testing.T, capCPU, cpu, capMem, mem, disk string, capProcs, procs int) {
		caps := api.ProjectLimits{CPU: capCPU, Memory: capMem, Processes: capProcs, Disk: disk}
		l := api.ProjectLimits{CPU: cpu, Memory: mem, Processes: procs, Disk: disk}
		if checkLimits(caps) != nil || checkLimits(l) != nil {
			return
		}
		_ = checkCaps(l, caps)
		if err := checkCaps(caps, caps); err != nil {
			t.Fatalf("limits equal to their caps %+v refused: %v", caps, err)
		}
		if caps.Memory != "" {
			l := caps
			l.Memory = ""
			if checkCaps(l, caps) == nil {
				t.Fatalf("memory removed under the cap %q passed", caps.Memory)
			}
		}
	})
}
