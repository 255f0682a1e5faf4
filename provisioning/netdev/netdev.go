// Package netdev keeps a project container's network devices for its
// network mode (api.ProjectNetwork): in off and allowlist modes Device,
// the LXD proxy device that is the container's only way out (its
// 127.0.0.1:Port, the daemon's egress socket for the project on the
// host), every NIC its profiles give it replaced by a device of type none
// (their names kept in NICsKey, so that open mode gives them back), and
// the proxy variables in environment.* (every exec: the agent, git, the
// terminal); in open mode none of them. provisioning.Preparer holds a
// Devices and calls it with the container's lifecycle lock held.
//
// It imports lxdexec and api only, and must never import provisioning
// (which imports it), providers, the daemon or config.
package netdev

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
)

// Sockets opens a project's egress proxy socket on the host
// (*egress.Server implements it).
type Sockets interface {
	Socket(projectID string) (string, error)
}

// Granter mints one-time setup credentials of a project's egress proxy
// (*egress.Server implements it): valid until revoke.
type Granter interface {
	Grant(projectID string, allow []string) (token string, revoke func())
}

// SetupEnv are the proxy variables of one exec of a project environment
// carrying the setup credential token (user "setup"): they replace the
// instance config's for that exec only.
func SetupEnv(token string) map[string]string {
	u := "http://setup:" + token + "@127.0.0.1:" + strconv.Itoa(Port)
	return map[string]string{"http_proxy": u, "https_proxy": u, "HTTP_PROXY": u, "HTTPS_PROXY": u}
}

// LXD is what Devices needs of LXD; *lxdexec.Client and provisioning's
// *lxdconn.Conn satisfy it.
type LXD interface {
	EditDevices(ctx context.Context, name string, edit func(map[string]map[string]string) bool) error
	UpdateInstance(ctx context.Context, name string, patch lxdexec.InstancePatch, etag string) error
}

var _ LXD = (*lxdexec.Client)(nil)

const (
	// Device is the egress proxy device.
	Device = "remote-egress"
	// NICsKey lists the NICs replaced by none devices.
	NICsKey = "user.remote.egress-nics"
)

// Port is where the container reaches its egress proxy (egress.Port).
const Port = 3128

// Devices keeps project containers' network devices.
type Devices struct {
	Sockets  Sockets // nil: every project's network is open
	LXD      LXD     // nil: the LXD client cannot edit devices
	Classify func(error) error
}

func proxyEnv() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(Port)
	return map[string]string{
		"environment.http_proxy": u, "environment.https_proxy": u,
		"environment.HTTP_PROXY": u, "environment.HTTPS_PROXY": u,
		"environment.no_proxy": "localhost,127.0.0.1", "environment.NO_PROXY": "localhost,127.0.0.1",
	}
}

// Mode is proj's network mode (open for a project stored before modes).
func Mode(proj api.Project) string {
	if proj.Network == nil || proj.Network.Mode == "" {
		return api.NetworkOpen
	}
	return proj.Network.Mode
}

// Sync makes the container inst (just read, lifecycle lock held) match
// proj's network mode.
func (p *Devices) Sync(ctx context.Context, proj api.Project, inst *lxdexec.Instance) error {
	if p.Sockets == nil {
		if Mode(proj) != api.NetworkOpen {
			return errors.New("the daemon has no egress proxy: a project's network can only be open")
		}
		return nil
	}
	closed := Mode(proj) != api.NetworkOpen
	var proxy map[string]string
	if closed {
		sock, err := p.Sockets.Socket(proj.ID)
		if err != nil {
			return err
		}
		proxy = map[string]string{"type": "proxy", "bind": "instance",
			"listen": "tcp:127.0.0.1:" + strconv.Itoa(Port), "connect": "unix:" + sock}
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
		return p.syncConfig(ctx, proj, inst, closed, nics)
	}
	if p.LXD == nil {
		return errors.New("the LXD client cannot edit devices")
	}
	err := p.LXD.EditDevices(ctx, proj.Container, func(devs map[string]map[string]string) bool {
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
		set(Device, proxy)
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
		return fmt.Errorf("set the network devices of project %q: %w", proj.Name, p.Classify(err))
	}
	return p.syncConfig(ctx, proj, inst, closed, nics)
}

// devicesMatch reports whether devs already are what syncNetwork makes.
func devicesMatch(devs map[string]map[string]string, proxy map[string]string, nics, replaced []string) bool {
	if cur, ok := devs[Device]; ok != (proxy != nil) || (ok && !maps.Equal(cur, proxy)) {
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

func (p *Devices) syncConfig(ctx context.Context, proj api.Project, inst *lxdexec.Instance, closed bool, nics []string) error {
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
	if err := p.LXD.UpdateInstance(ctx, proj.Container, lxdexec.InstancePatch{Config: cfg}, ""); err != nil {
		return fmt.Errorf("set the network environment of project %q: %w", proj.Name, p.Classify(err))
	}
	return nil
}
