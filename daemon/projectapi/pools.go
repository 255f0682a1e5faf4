package projectapi

import (
	"context"
	"errors"

	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/provisioning/placement"
)

// poolNameRE is what LXD accepts as a storage pool name (and what is safe
// in its URL path).
var poolNameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// newPool is a new project's storage pool: the request's, else the
// daemon's default ([projects] pool), else "" (the profile's root disk). A
// pool other than the default must be allowed ([projects] allowed_pools)
// and a named pool must exist in LXD: otherwise a 400 naming it.
func (p *Projects) newPool(ctx context.Context, req string) (string, error) {
	pool := req
	if pool == "" {
		pool = p.o.DefaultPool
	}
	if pool == "" {
		return "", nil
	}
	if !poolNameRE.MatchString(pool) {
		return "", errdefs.InvalidArgument("invalid pool %q: an LXD storage pool name (letters, digits, '.', '_', '-')", pool)
	}
	if pool != p.o.DefaultPool {
		if err := allowed("pool", pool, p.o.Pools, "allowed_pools"); err != nil {
			return "", err
		}
	}
	err := p.o.Preparer.CheckPool(ctx, pool)
	if errors.Is(err, placement.ErrNoSuchPool) {
		return "", errdefs.InvalidArgument("unknown pool %q: LXD has no storage pool of that name", pool)
	}
	return pool, err // unavailable: a 503
}
