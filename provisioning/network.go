package provisioning

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"remote/api"
	"remote/lxdexec"
	"remote/provisioning/preview"
)

// EgressSockets opens a project's egress proxy socket on the host
// (*egress.Server implements it).
type EgressSockets interface {
	Socket(projectID string) (string, error)
}

// Network devices and config of a project container whose network is off
// or allowlist: EgressDevice, the proxy device that is the container's
// only way out (127.0.0.1:EgressPort inside, the daemon's socket for the
// project outside), every NIC its profiles give it replaced by a device
// of type none (their names kept in NICsKey, so that open mode gives them
// back), and the proxy variables in environment.* (every exec: the
// agent, git, the terminal).
const (
	EgressDevice = "remote-egress"
	NICsKey      = "user.remote.egress-nics"
)

// EgressPort is where the container reaches its egress proxy; the egress
// package's Port.
var EgressPort = 3128

func proxyEnv() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	return map[string]string{
		"environment.http_proxy": u, "environment.https_proxy": u,
		"environment.HTTP_PROXY": u, "environment.HTTPS_PROXY": u,
		"environment.no_proxy": "localhost,127.0.0.1", "environment.NO_PROXY": "localhost,127.0.0.1",
	}
}

func networkMode(proj api.Project) string {
	if proj.Network == nil || proj.Network.Mode == "" {
		return api.NetworkOpen
	}
	return proj.Network.Mode
}

// syncNetwork makes the container inst (just read, lifecycle lock held)
// match proj's network mode.
func (p *Preparer) syncNetwork(ctx context.Context, proj api.Project, inst *lxdexec.Instance) error {
	if p.egress == nil {
		if networkMode(proj) != api.NetworkOpen {
			return errors.New("the daemon has no egress proxy: a project's network can only be open")
		}
		return nil
	}
	closed := networkMode(proj) != api.NetworkOpen
	var proxy map[string]string
	if closed {
		sock, err := p.egress.Socket(proj.ID)
		if err != nil {
			return err
		}
		proxy = map[string]string{"type": "proxy", "bind": "instance",
			"listen": "tcp:127.0.0.1:" + strconv.Itoa(EgressPort), "connect": "unix:" + sock}
	}
	replaced := strings.FieldsFunc(inst.Config[NICsKey], func(r rune) bool { return r == ',' })
	var nics []string // the NICs to replace now
	if closed {
		for name, dev := range inst.ExpandedDevices {
			if dev["type"] == "nic" {
				nics = append(nics, name)
			}
		}
		nics = append(nics, replaced...)
		slices.Sort(nics)
		nics = slices.Compact(nics)
	}
	if devicesMatch(inst.Devices, proxy, nics, replaced) {
		return p.syncNetworkConfig(ctx, proj, inst, closed, nics)
	}
	ed, _ := p.lxd.(preview.DeviceEditor)
	if ed == nil {
		return errors.New("the LXD client cannot edit devices")
	}
	err := ed.EditDevices(ctx, proj.Container, func(devs map[string]map[string]string) bool {
		changed := false
		set := func(name string, dev map[string]string) {
			if dev == nil {
				if _, ok := devs[name]; ok {
					delete(devs, name)
					changed = true
				}
				return
			}
			if !maps.Equal(devs[name], dev) {
				devs[name] = dev
				changed = true
			}
		}
		set(EgressDevice, proxy)
		for _, n := range replaced {
			if !slices.Contains(nics, n) && devs[n]["type"] == "none" {
				set(n, nil) // open again: the profile's NIC comes back
			}
		}
		for _, n := range nics {
			set(n, map[string]string{"type": "none"})
		}
		return changed
	})
	if err != nil {
		return fmt.Errorf("set the network devices of project %q: %w", proj.Name, classify(err))
	}
	return p.syncNetworkConfig(ctx, proj, inst, closed, nics)
}

// devicesMatch reports whether devs already are what syncNetwork makes.
func devicesMatch(devs map[string]map[string]string, proxy map[string]string, nics, replaced []string) bool {
	if cur, ok := devs[EgressDevice]; ok != (proxy != nil) || (ok && !maps.Equal(cur, proxy)) {
		return false
	}
	for _, n := range nics {
		if devs[n]["type"] != "none" {
			return false
		}
	}
	for _, n := range replaced {
		if !slices.Contains(nics, n) && devs[n]["type"] == "none" {
			return false
		}
	}
	return true
}

func (p *Preparer) syncNetworkConfig(ctx context.Context, proj api.Project, inst *lxdexec.Instance, closed bool, nics []string) error {
	cfg := map[string]string{}
	for k, v := range proxyEnv() {
		if !closed {
			v = ""
		}
		if inst.Config[k] != v {
			cfg[k] = v
		}
	}
	if v := strings.Join(nics, ","); inst.Config[NICsKey] != v {
		cfg[NICsKey] = v
	}
	if len(cfg) == 0 {
		return nil
	}
	if err := p.lxd.UpdateInstance(ctx, proj.Container, lxdexec.InstancePatch{Config: cfg}, ""); err != nil {
		return fmt.Errorf("set the network environment of project %q: %w", proj.Name, classify(err))
	}
	return nil
}

// SyncNetwork makes proj's container match its network mode now (live
// while it runs: NICs removed or given back, the egress device, the
// proxy environment of later execs). A container not created yet gets
// them when it is.
func (p *Preparer) SyncNetwork(ctx context.Context, proj api.Project) error {
	unlock, err := p.lifecycle.Lock(ctx, proj.Container)
	if err != nil {
		return err
	}
	defer unlock()
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
	return p.syncNetwork(ctx, proj, inst)
}

// HasEgress reports whether the daemon has an egress proxy (projects may
// be off or allowlist).
func (p *Preparer) HasEgress() bool { return p.egress != nil }
