package preview

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/lxdexec"
)

// PreviewDevicePrefix starts the name of every LXD proxy device the daemon
// makes for a project's ports ("remote-port-8080"); devices with other
// names are never touched.
const PreviewDevicePrefix = "remote-port-"

// maxSocketPath is the longest Unix socket path Linux accepts (sun_path
// holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// DeviceEditor is the LXD ability previews use. *lxdexec.Client and
// provisioning's *Conn satisfy it.
type DeviceEditor interface {
	EditDevices(ctx context.Context, name string, edit func(map[string]map[string]string) bool) error
}

var _ DeviceEditor = (*lxdexec.Client)(nil)

// ErrNoPreviews means the daemon has no preview directory or its LXD
// client cannot edit devices.
var ErrNoPreviews = errors.New("previews are not configured")

// Devices keeps a project container's preview proxy devices and their
// sockets. provisioning.Preparer holds one and calls it with the
// container's lifecycle lock held.
type Devices struct {
	Dir      string       // sockets of port previews ("" none)
	Editor   DeviceEditor // nil: the LXD client cannot edit devices
	Log      hclog.Logger
	Classify func(error) error // marks LXD being unreachable
}

// CheckDir rejects a preview directory whose socket paths would
// not fit a Unix socket address.
func CheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("provisioning: preview directory %q is not absolute", dir)
	}
	if n := len(previewSocket(dir, strings.Repeat("0", 16), 65535)); n > maxSocketPath {
		return fmt.Errorf("provisioning: preview directory %q is too long: its socket paths would be %d bytes, at most %d fit", dir, n, maxSocketPath)
	}
	return nil
}

func previewSocket(dir, projectID string, port int) string {
	return filepath.Join(dir, projectID+"-"+strconv.Itoa(port)+".sock")
}

// Socket is the host path of the Unix socket that reaches port on
// the loopback of proj's container while it runs; "" without a preview
// directory.
func (p *Devices) Socket(proj api.Project, port int) string {
	if p.Dir == "" || proj.ID == "" {
		return ""
	}
	return previewSocket(p.Dir, proj.ID, port)
}

// previewDevices are the proxy devices proj's ports need: LXD listens on
// the host (bind=host) on a Unix socket only the daemon's uid may use
// (mode 0600) and connects to the port on the container's loopback. No
// host TCP port is opened.
func (p *Devices) previewDevices(proj api.Project) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, port := range proj.Ports {
		out[PreviewDevicePrefix+strconv.Itoa(port)] = map[string]string{
			"type":    "proxy",
			"bind":    "host",
			"listen":  "unix:" + p.Socket(proj, port),
			"connect": "tcp:127.0.0.1:" + strconv.Itoa(port),
			"uid":     strconv.Itoa(os.Getuid()),
			"gid":     strconv.Itoa(os.Getgid()),
			"mode":    "0600",
		}
	}
	return out
}

// previewsMatch reports whether devs holds exactly want's preview devices.
func previewsMatch(devs, want map[string]map[string]string) bool {
	n := 0
	for name, dev := range devs {
		if !strings.HasPrefix(name, PreviewDevicePrefix) {
			continue
		}
		n++
		if w, ok := want[name]; !ok || !maps.Equal(w, dev) {
			return false
		}
	}
	return n == len(want)
}

// Sync makes the proxy devices of proj's container inst (just read, with
// the lifecycle lock held) match its ports now.
func (p *Devices) Sync(ctx context.Context, proj api.Project, inst *lxdexec.Instance) error {
	if p.Dir == "" {
		return nil
	}
	want := p.previewDevices(proj)
	if previewsMatch(inst.Devices, want) {
		return nil
	}
	ed := p.Editor
	if ed == nil {
		return ErrNoPreviews
	}
	var gone []string
	err := ed.EditDevices(ctx, proj.Container, func(devs map[string]map[string]string) bool {
		if previewsMatch(devs, want) {
			return false
		}
		for name, dev := range devs {
			if strings.HasPrefix(name, PreviewDevicePrefix) {
				if l, ok := strings.CutPrefix(dev["listen"], "unix:"); ok {
					gone = append(gone, l)
				}
				delete(devs, name)
			}
		}
		maps.Copy(devs, want)
		return true
	})
	if err != nil {
		return fmt.Errorf("set the preview devices of project %q: %w", proj.Name, p.Classify(err))
	}
	// LXD leaves a removed listener's socket file behind; only files in
	// the daemon's own directory are removed.
	for _, path := range gone {
		if filepath.Dir(path) == p.Dir && !slicesContainsListen(want, path) {
			_ = os.Remove(path)
		}
	}
	p.Log.Info("preview devices set", "project", proj.Name, "container", proj.Container, "ports", fmt.Sprint(proj.Ports))
	return nil
}

func slicesContainsListen(devs map[string]map[string]string, path string) bool {
	for _, d := range devs {
		if d["listen"] == "unix:"+path {
			return true
		}
	}
	return false
}

// RemoveSockets removes the socket files proj's devices left.
func (p *Devices) RemoveSockets(proj api.Project) {
	if p.Dir == "" || proj.ID == "" {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(p.Dir, proj.ID+"-*.sock"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}
