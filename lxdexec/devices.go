package lxdexec

import (
	"context"
	"fmt"
	"maps"
	"net/http"
)

// instancePut is the writable part of an instance (PUT replaces it whole).
type instancePut struct {
	Architecture string                       `json:"architecture"`
	Config       map[string]string            `json:"config"`
	Devices      map[string]map[string]string `json:"devices"`
	Ephemeral    bool                         `json:"ephemeral"`
	Profiles     []string                     `json:"profiles"`
	Stateful     bool                         `json:"stateful"`
	Description  string                       `json:"description"`
}

// RemoveDevices removes the named local devices from an instance (a PATCH
// can only add or change devices): it reads the instance and puts it back
// without them, guarded by the ETag, so a concurrent change makes it fail
// with ErrPreconditionFailed instead of being lost. A running container
// has them unplugged. Names it does not have are ignored.
func (c *Client) RemoveDevices(ctx context.Context, name string, devices ...string) error {
	inst, etag, err := c.Instance(ctx, name)
	if err != nil {
		return err
	}
	devs := maps.Clone(inst.Devices)
	n := len(devs)
	for _, d := range devices {
		delete(devs, d)
	}
	if len(devs) == n {
		return nil
	}
	put := instancePut{Architecture: inst.Architecture, Config: inst.Config, Devices: devs, Ephemeral: inst.Ephemeral,
		Profiles: inst.Profiles, Stateful: inst.Stateful, Description: inst.Description}
	r, err := c.Query(ctx, http.MethodPut, c.instancePath(name, "", nil), put, etag)
	if err != nil {
		return fmt.Errorf("remove devices of %q: %w", name, err)
	}
	if r.Type == "async" {
		if _, err := c.WaitOperation(ctx, stripQuery(r.Operation)); err != nil {
			return fmt.Errorf("remove devices of %q: %w", name, err)
		}
	}
	return nil
}
