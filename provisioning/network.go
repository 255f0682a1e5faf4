package provisioning

import (
	"context"

	"remote/api"
	"remote/lxdexec"
)

// SyncNetwork makes proj's container match its network mode now (live
// while it runs: NICs removed or given back, the egress device, the
// proxy environment of later execs; package netdev). A container not
// created yet gets them when it is.
func (p *Preparer) SyncNetwork(ctx context.Context, proj api.Project) error {
	return p.syncOwned(ctx, proj, func(inst *lxdexec.Instance) error { return p.network.Sync(ctx, proj, inst) })
}

// HasEgress reports whether the daemon has an egress proxy (projects may
// be off or allowlist).
func (p *Preparer) HasEgress() bool { return p.network.Sockets != nil }
