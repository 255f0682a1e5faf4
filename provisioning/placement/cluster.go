package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/errdefs"
	"remote/lxdexec"
)

// An LXD cluster moves a container between members (evacuation, restore,
// `lxc move --target`) as: instance-shutdown on the old member,
// instance-created for "lxd-move-of-<uuid>" on the new one,
// instance-deleted for the real name on the old member, instance-renamed
// (the copy takes the real name) and instance-started. The delete in the
// middle is part of the move, not the end of the project: nothing here
// records it as missing, recreates or destroys a container while a copy
// carrying the project's id exists.

// ErrBadTarget means LXD has no cluster member or group of the name a
// project (or [lxd] target) places its container on, e.g. a member removed
// from the cluster: nothing is created elsewhere.
var ErrBadTarget = errdefs.New(errdefs.ErrConflict, "no such cluster member or group")

// TargetError wraps a failed creation placed by target whose cause is an
// unknown member or group.
func TargetError(err error, target string) error {
	if target == "" || !errors.Is(err, lxdexec.ErrNotFound) {
		return err
	}
	msg := strings.ToLower(err.Error())
	if !strings.Contains(msg, "member") && !strings.Contains(msg, "group") {
		return err // e.g. the image is missing
	}
	return fmt.Errorf("cluster target %q: %w (%v)", target, ErrBadTarget, err)
}

// ClusterMembers is the optional LXD ability to read a cluster member's
// state (an evacuated member's containers were stopped by LXD).
type ClusterMembers interface {
	ClusterMember(ctx context.Context, name string) (*lxdexec.ClusterMember, error)
}

var _ ClusterMembers = (*lxdexec.Client)(nil)

// moveWait bounds how long a prompt waits for a moving container to take
// its name on the new member (LXD moves a busybox container in 3-7 s).
const moveWait = 2 * time.Minute

// MovingCopy returns the "lxd-move-of-" copy of p's container, when LXD is
// moving it: an instance under the move prefix carrying p's id in its
// config key marker (provisioning.MarkerKey).
func MovingCopy(insts []lxdexec.Instance, p api.Project, marker string) (lxdexec.Instance, bool) {
	for _, in := range insts {
		if strings.HasPrefix(in.Name, lxdexec.MovePrefix) && p.ID != "" && in.Config[marker] == p.ID {
			return in, true
		}
	}
	return lxdexec.Instance{}, false
}

// Instances is the LXD ability AwaitMove needs; an lxd that also lists
// its instances (Lister) can tell a move from a missing container.
type Instances interface {
	Instance(ctx context.Context, name string) (*lxdexec.Instance, string, error)
}

// Lister lists every instance with its status (one LXD request).
type Lister interface {
	Instances(ctx context.Context) ([]lxdexec.Instance, error)
}

// AwaitMove is called when proj's container is not found: while LXD moves
// it (a copy with proj's id in marker exists) it waits until the container
// is back under its name and returns it; found is false when no move is
// under way (the container is really missing).
func AwaitMove(ctx context.Context, lxd Instances, proj api.Project, marker string, log hclog.Logger, classify func(error) error) (inst *lxdexec.Instance, found bool, err error) {
	lister, ok := lxd.(Lister)
	if !ok {
		return nil, false, nil
	}
	insts, err := lister.Instances(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("list containers of project %q: %w", proj.Name, classify(err))
	}
	cp, moving := MovingCopy(insts, proj, marker)
	if !moving {
		return nil, false, nil
	}
	log.Info("container is being moved between cluster members; waiting for it", "project", proj.Name,
		"container", proj.Container, "copy", cp.Name, "to", cp.Location)
	ctx, cancel := context.WithTimeout(ctx, moveWait)
	defer cancel()
	for {
		inst, _, err := lxd.Instance(ctx, proj.Container)
		if err == nil {
			return inst, true, nil
		}
		if !errors.Is(err, lxdexec.ErrNotFound) {
			return nil, true, fmt.Errorf("read moving container %q of project %q: %w", proj.Container, proj.Name, classify(err))
		}
		select {
		case <-ctx.Done():
			return nil, true, fmt.Errorf("container %q of project %q is still being moved by LXD (copy %s): %w",
				proj.Container, proj.Name, cp.Name, classify(ctx.Err()))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Evacuated reports whether member is evacuated (or being evacuated):
// LXD stopped the container there to move it. lxd without ClusterMembers
// (a client that cannot ask) never is.
func Evacuated(ctx context.Context, lxd any, member string) bool {
	cm, ok := lxd.(ClusterMembers)
	if !ok || MemberName(member) == "" { // a standalone server has no members
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := cm.ClusterMember(ctx, member)
	if err != nil {
		return false
	}
	return strings.EqualFold(m.Status, "Evacuated") || strings.Contains(strings.ToLower(m.Message), "evacuat")
}

// MemberName is a location as LXD reports it, "" for a standalone server
// (which says "none").
func MemberName(location string) string {
	if location == "none" {
		return ""
	}
	return location
}
