package placement

import (
	"fmt"
	"maps"
	"math/big"
	"strconv"
	"strings"

	"remote/api"
	"remote/internal/lazyre"
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

var (
	// SizeLimitRE is an LXD size limit: a number and an optional unit.
	SizeLimitRE = lazyre.New(`^([0-9]{1,12}(?:\.[0-9]{1,3})?)(B|kB|MB|GB|TB|KiB|MiB|GiB|TiB)?$`)
	// PercentRE is a limit given as a percentage of the host's.
	PercentRE = lazyre.New(`^([0-9]{1,3})%$`)
)

// Excess is one limit of a project beyond the operator's cap
// ([projects.limits] Field): Value "" when the project has none there.
type Excess struct {
	Field string `json:"field"`
	Value string `json:"value"`
	Cap   string `json:"cap"`
}

// String says what is beyond the cap, naming the setting.
func (e Excess) String() string {
	if e.Value == "" {
		return fmt.Sprintf("limits.%s may not be removed: it is capped at %q ([projects.limits] %s)", e.Field, e.Cap, e.Field)
	}
	return fmt.Sprintf("limits.%s %q is above the cap of %q ([projects.limits] %s)", e.Field, e.Value, e.Cap, e.Field)
}

// Excesses lists the fields of l (nil: no limits) beyond caps, in the
// order cpu, memory, processes, disk: a capped field may be lower than
// its cap, never higher nor absent. l and caps are valid LXD values.
func Excesses(l *api.ProjectLimits, caps api.ProjectLimits) []Excess {
	var v api.ProjectLimits
	if l != nil {
		v = *l
	}
	var out []Excess
	for _, f := range []struct {
		name, v, limit string
		within         func(v, limit string) bool
	}{
		{"cpu", v.CPU, caps.CPU, cpuWithin},
		{"memory", v.Memory, caps.Memory, memoryWithin},
		{"processes", procString(v.Processes), procString(caps.Processes), processesWithin},
		{"disk", v.Disk, caps.Disk, sizeWithin},
	} {
		if f.limit != "" && (f.v == "" || !f.within(f.v, f.limit)) {
			out = append(out, Excess{Field: f.name, Value: f.v, Cap: f.limit})
		}
	}
	return out
}

// Clamp is l with each field beyond caps set to its cap, and what was
// set; l itself when nothing is beyond (nil stays nil).
func Clamp(l *api.ProjectLimits, caps api.ProjectLimits) (*api.ProjectLimits, []Excess) {
	ex := Excesses(l, caps)
	if len(ex) == 0 {
		return l, nil
	}
	var c api.ProjectLimits
	if l != nil {
		c = *l
	}
	for _, e := range ex {
		switch e.Field {
		case "cpu":
			c.CPU = caps.CPU
		case "memory":
			c.Memory = caps.Memory
		case "processes":
			c.Processes = caps.Processes
		case "disk":
			c.Disk = caps.Disk
		}
	}
	return &c, ex
}

func procString(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func processesWithin(v, limit string) bool {
	n, err1 := strconv.Atoi(v)
	c, err2 := strconv.Atoi(limit)
	return err1 == nil && err2 == nil && n <= c
}

// cpuWithin: under a count cap, a count or a set of at most that many
// CPUs; under a set cap, a set inside it (a count would float over every
// CPU, off the operator's set).
func cpuWithin(v, limit string) bool {
	if !strings.ContainsAny(limit, "-,") {
		c, _ := strconv.Atoi(limit)
		if !strings.ContainsAny(v, "-,") {
			n, _ := strconv.Atoi(v)
			return n <= c
		}
		return len(cpuSet(v)) <= c
	}
	if !strings.ContainsAny(v, "-,") {
		return false
	}
	allowed := cpuSet(limit)
	for cpu := range cpuSet(v) {
		if !allowed[cpu] {
			return false
		}
	}
	return true
}

// cpuSet expands a set like "0-1,3"; a range bounds at most 10,000 CPUs.
func cpuSet(s string) map[int]bool {
	out := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if isRange {
			b, _ = strconv.Atoi(hi)
		}
		for i := a; i <= b; i++ {
			out[i] = true
		}
	}
	return out
}

// memoryWithin: a size under a size cap, a percentage under a percentage
// cap (a percentage of which host is not known here).
func memoryWithin(v, limit string) bool {
	pv, pl := PercentRE.FindStringSubmatch(v), PercentRE.FindStringSubmatch(limit)
	switch {
	case pv != nil && pl != nil:
		a, _ := strconv.Atoi(pv[1])
		b, _ := strconv.Atoi(pl[1])
		return a <= b
	case pv == nil && pl == nil:
		return sizeWithin(v, limit)
	}
	return false
}

var sizeUnits = map[string]int64{"": 1, "B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

// sizeBytes is an LXD size (SizeLimitRE) in bytes, exactly.
func sizeBytes(s string) (*big.Rat, bool) {
	m := SizeLimitRE.FindStringSubmatch(s)
	if m == nil {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return nil, false
	}
	return r.Mul(r, new(big.Rat).SetInt64(sizeUnits[m[2]])), true
}

func sizeWithin(v, limit string) bool {
	a, ok1 := sizeBytes(v)
	b, ok2 := sizeBytes(limit)
	return ok1 && ok2 && a.Cmp(b) <= 0
}
