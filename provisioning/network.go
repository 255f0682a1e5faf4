package provisioning

import (
	"context"
	"errors"
	"fmt"

	"remote/api"
	"remote/lxdexec"
)

// SyncNetwork makes proj's container match its network mode now (live
// while it runs: NICs removed or given back, the egress device, the
// proxy environment of later execs; package netdev). A container not
// created yet gets them when it is.
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
	return p.network.Sync(ctx, proj, inst)
}

// HasEgress reports whether the daemon has an egress proxy (projects may
// be off or allowlist).
func (p *Preparer) HasEgress() bool { return p.network.Sockets != nil }
