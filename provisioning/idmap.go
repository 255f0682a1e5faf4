package provisioning

import (
	"context"
	"fmt"

	"remote/api"
	"remote/lxdexec"
)

// Idmap says how a new project container's uids map onto the host's
// ([projects] idmap).
type Idmap string

const (
	// IdmapAuto gives each new container a host uid range of its own
	// where LXD can (security.idmap.isolated), and the range every
	// unisolated container shares, with a warning, where LXD refuses one
	// because it has none free (IdmapUnsupported: too small a subuid
	// range for root). Any other failure of the isolated create is the
	// create's error.
	IdmapAuto Idmap = "auto"
	// IdmapIsolated gives each new container a range of its own or no
	// container at all.
	IdmapIsolated Idmap = "isolated"
	// IdmapShared is LXD's default: every container in one range.
	IdmapShared Idmap = "shared"
)

// IsolatedKey is the LXD key that gives a container a uid range of its
// own: root in one project's container is then a different host uid from
// root in another's, so a container escape does not reach the other
// projects' files and processes.
const IsolatedKey = "security.idmap.isolated"

func (m Idmap) valid() bool { return m == IdmapAuto || m == IdmapIsolated || m == IdmapShared }

// IdmapUnsupported is the text of LXD's refusal of an isolated uid range
// when root's subuid/subgid range has no free 65536 left (LXD's
// findIdmap: "Not enough uid/gid available for the container", wrapped
// as "Failed creating instance record: Failed initialising instance:
// ..."). It is the only failure IdmapAuto answers with the shared range.
const IdmapUnsupported = "Not enough uid/gid available for the container"

// isolationRefused tells LXD's refusal of an isolated range from any other
// failure of a create.
func isolationRefused(err error) bool {
	return lxdexec.HasMessage(err, lxdexec.MsgIdmapExhausted)
}

// createInstance creates proj's container from post with the uid range the
// preparer's Idmap asks for.
func (p *Preparer) createInstance(ctx context.Context, proj api.Project, post lxdexec.InstancesPost) error {
	if p.idmap == IdmapShared {
		return p.lxd.CreateInstance(ctx, post)
	}
	isolated := post
	isolated.Config = map[string]string{IsolatedKey: "true"}
	for k, v := range post.Config {
		isolated.Config[k] = v
	}
	err := p.lxd.CreateInstance(ctx, isolated)
	switch {
	case err == nil:
		return nil
	case p.idmap == IdmapIsolated && isolationRefused(err):
		return fmt.Errorf("%w (with [projects] idmap = \"isolated\": LXD must have a free uid range of 65536 for it)", err)
	case !isolationRefused(err):
		// Not LXD saying it has no range to give (LXD unreachable, a
		// bad image, pool or target...): that cause, never a container
		// in the shared range in its place.
		return err
	}
	// LXD refuses an isolated map when root's subuid/subgid range has no
	// free 65536 left: the shared range, as before isolation, rather than
	// no container.
	if err2 := p.lxd.CreateInstance(ctx, post); err2 != nil {
		return err2
	}
	p.log.Warn("container created in the shared uid range: LXD refused a range of its own (security.idmap.isolated); "+
		"extend root's range in /etc/subuid and /etc/subgid and restart LXD", "project", proj.Name, "container", proj.Container, "error", err)
	return nil
}
