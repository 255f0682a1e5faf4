package lxdexec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
)

// instancePut is the body of PUT /1.0/instances/{name}: the instance's
// whole writable state.
type instancePut struct {
	Architecture string                       `json:"architecture"`
	Config       map[string]string            `json:"config"`
	Devices      map[string]map[string]string `json:"devices"`
	Ephemeral    bool                         `json:"ephemeral"`
	Profiles     []string                     `json:"profiles"`
	Stateful     bool                         `json:"stateful"`
	Description  string                       `json:"description"`
}

// EditDevices changes the instance's own devices (not its profiles'):
// edit gets a copy of them and reports whether it changed it; a change is
// written back with PUT under the instance's ETag (a PATCH cannot remove
// a device), hot-plugged into a running container. A concurrent change
// of the instance makes it read and edit again (up to 3 times).
func (c *Client) EditDevices(ctx context.Context, name string, edit func(devices map[string]map[string]string) bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	for try := 0; ; try++ {
		inst, etag, err := c.Instance(ctx, name)
		if err != nil {
			return fmt.Errorf("edit devices of %q: %w", name, err)
		}
		devs := make(map[string]map[string]string, len(inst.Devices))
		for k, v := range inst.Devices {
			devs[k] = maps.Clone(v)
		}
		if !edit(devs) {
			return nil
		}
		put := instancePut{Architecture: inst.Architecture, Config: inst.Config, Devices: devs,
			Ephemeral: inst.Ephemeral, Profiles: inst.Profiles, Stateful: inst.Stateful, Description: inst.Description}
		chk := c.instanceCheck(name, func(inst *Instance) string {
			if !maps.EqualFunc(inst.Devices, devs, maps.Equal) {
				return fmt.Sprintf("has devices %v, not %v", inst.Devices, devs)
			}
			return ""
		})
		_, err = c.run(ctx, http.MethodPut, c.instancePath(name, "", nil), put, etag, chk)
		// LXD's instance lock outlives an operation by a moment (see
		// SetState): right after a stop, a PUT is refused as busy.
		err = waitBusy(ctx, err, func() error {
			_, err := c.run(ctx, http.MethodPut, c.instancePath(name, "", nil), put, etag, chk)
			return err
		})
		if errors.Is(err, ErrPreconditionFailed) && try < 2 {
			continue
		}
		if err != nil {
			return fmt.Errorf("edit devices of %q: %w", name, err)
		}
		return nil
	}
}

// RemoveDevices removes the named local devices from an instance (EditDevices:
// a PUT under the ETag, since a PATCH can only add or change devices); a
// running container has them unplugged. Names it does not have are ignored.
func (c *Client) RemoveDevices(ctx context.Context, name string, devices ...string) error {
	return c.EditDevices(ctx, name, func(devs map[string]map[string]string) bool {
		n := len(devs)
		for _, d := range devices {
			delete(devs, d)
		}
		return len(devs) != n
	})
}
