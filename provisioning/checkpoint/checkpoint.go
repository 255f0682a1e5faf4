package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/errdefs"
	"remote/lxdexec"
)

// Snapshotter is the LXD ability checkpoints use. *lxdexec.Client and
// provisioning's *Conn satisfy it; an LXD without it gets
// checkpoint_failed events.
type Snapshotter interface {
	CreateSnapshot(ctx context.Context, instance, name string, expires time.Time) error
	Snapshots(ctx context.Context, instance string) ([]lxdexec.Snapshot, error)
	DeleteSnapshot(ctx context.Context, instance, name string) error
	RestoreSnapshot(ctx context.Context, instance, name string) error
	CopyFromSnapshot(ctx context.Context, instance, snap, name string, config map[string]string) error
}

var _ Snapshotter = (*lxdexec.Client)(nil)

// Checkpoint modes of a project (api.Project.Checkpoints).
const (
	CheckpointsTurn = "turn"
	CheckpointsOff  = "off"
)

// DefaultCheckpointKeep is how many checkpoints a project keeps when
// Manager.Keep (provisioning's Options.CheckpointKeep) is zero.
const DefaultCheckpointKeep = 20

// Errors of checkpoints, tested with errors.Is.
var (
	// ErrNoSnapshots means the LXD client cannot snapshot.
	ErrNoSnapshots = errors.New("lxd client cannot take snapshots")
	// ErrBadCheckpoint means a name is not one of the daemon's checkpoints.
	ErrBadCheckpoint = errdefs.New(errdefs.ErrInvalidArgument, "not a checkpoint name")
)

// Name is the LXD snapshot name of the checkpoint taken before
// the turn whose user event is seq in chat: rc-<chat>-<seq>.
func Name(chat string, seq int64) string {
	return "rc-" + chat + "-" + strconv.FormatInt(seq, 10)
}

// ParseCheckpoint reads chat and seq back from a checkpoint name.
func ParseCheckpoint(name string) (chat string, seq int64, ok bool) {
	rest, found := strings.CutPrefix(name, "rc-")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || seq <= 0 {
		return "", 0, false
	}
	for _, r := range rest[:i] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return "", 0, false
		}
	}
	return rest[:i], seq, true
}

// Manager takes, lists, prunes, restores and forks a project's
// checkpoints. Its fields are set by provisioning.New; the zero pins and
// prune queue are ready to use.
type Manager struct {
	Snap     Snapshotter   // nil: the LXD client cannot snapshot
	Keep     int           // checkpoints kept per project
	Expiry   time.Duration // LXD expiry of checkpoints (0: none)
	Log      hclog.Logger
	Classify func(error) error // marks LXD being unreachable
	// Lock takes the container's lifecycle lock (one change at a time).
	Lock func(ctx context.Context, container string) (func(), error)
	// Resync sets a restored or copied container's own devices (its
	// preview sockets) before anything starts it.
	Resync func(ctx context.Context, proj api.Project) error
	// Limits gives a restored or copied container proj's limits (a
	// snapshot holds the limits of its time); its error fails the
	// restore or fork.
	Limits  func(ctx context.Context, proj api.Project) error
	pinned  pins       // checkpoints a fork is copying
	pruning pruneQueue // checkpoint retention runs
}

// Turn asks Prepare to checkpoint the container before the turn: Done is
// called once, after the container is prepared, with the snapshot's name
// and the error when it could not be taken (the run goes on either way).
// It is not called when the project's checkpoints are off. Once, when
// set, makes a turn prepared twice (a session retry) snapshot only once.
type Turn struct {
	Chat string
	Seq  int64
	Done func(project, snapshot string, err error)
	Once *sync.Once
	// Tree, when set, is called with the git tree of a project repository's
	// working tree at the turn's start (docs/operating.md, "A repository per
	// project"), or the error recording it; projects without a repository never
	// call it.
	Tree func(tree string, err error)
}

// TreeHook returns the turn's Tree callback from ctx (nil: none).
func TreeHook(ctx context.Context) func(string, error) {
	t, _ := ctx.Value(turnKey{}).(Turn)
	return t.Tree
}

type turnKey struct{}

// WithTurn returns ctx carrying t for Prepare.
func WithTurn(ctx context.Context, t Turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

func turnFrom(ctx context.Context) (Turn, bool) {
	t, ok := ctx.Value(turnKey{}).(Turn)
	return t, ok && t.Done != nil
}

// pins counts checkpoints in use by a fork being copied; pruning skips
// them.
type pins struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *pins) add(key string) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[key]++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.n[key]--; p.n[key] <= 0 {
			delete(p.n, key)
		}
	}
}

func (p *pins) has(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[key] > 0
}

// Take takes the turn's snapshot when ctx asks for one and the
// project's checkpoints are on, then prunes old ones. On a fresh
// container (created by this turn's preparation) it takes none and Done
// is not called: there is nothing to restore to, and a turn prepared
// again (Once) takes none either.
func (p *Manager) Take(ctx context.Context, proj api.Project, fresh bool) {
	t, ok := turnFrom(ctx)
	if !ok || proj.Checkpoints == CheckpointsOff {
		return
	}
	take := func() {
		if fresh {
			p.Log.Debug("no checkpoint: the turn's preparation created the container", "project", proj.Name, "snapshot", Name(t.Chat, t.Seq))
			return
		}
		p.takeCheckpoint(ctx, proj, t)
	}
	if t.Once != nil {
		t.Once.Do(take)
		return
	}
	take()
}

func (p *Manager) takeCheckpoint(ctx context.Context, proj api.Project, t Turn) {
	name := Name(t.Chat, t.Seq)
	snap := p.Snap
	if snap == nil {
		t.Done(proj.Name, name, ErrNoSnapshots)
		return
	}
	started := time.Now()
	var expires time.Time // zero: LXD never expires it
	if p.Expiry > 0 {
		expires = started.Add(p.Expiry)
	}
	err := snap.CreateSnapshot(ctx, proj.Container, name, expires)
	if err != nil {
		err = p.Classify(err)
		p.Log.Warn("checkpoint failed; the turn runs without one", "project", proj.Name, "snapshot", name, "error", err)
	} else {
		p.Log.Debug("checkpoint taken", "project", proj.Name, "snapshot", name, "duration", time.Since(started))
	}
	t.Done(proj.Name, name, err)
	if err == nil {
		// Retention is off the turn's path: the CLI starts while the old
		// checkpoints are listed and deleted. Listing, restore and fork
		// wait for it (awaitPrune), so they see the same as before.
		pctx := context.WithoutCancel(ctx)
		p.pruning.schedule(proj.Container, func() {
			pctx, cancel := context.WithTimeout(pctx, 5*time.Minute)
			defer cancel()
			if perr := p.prune(pctx, snap, proj); perr != nil {
				p.Log.Warn("prune checkpoints", "project", proj.Name, "error", perr)
			}
		})
	}
}

// pruneQueue runs each container's retention in the background, one run
// at a time per container: a request while one runs makes it run once
// more after.
type pruneQueue struct {
	mu   sync.Mutex
	runs map[string]*pruneRun
}

type pruneRun struct {
	again bool
	done  chan struct{}
}

func (q *pruneQueue) schedule(container string, fn func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.runs[container]; r != nil {
		r.again = true
		return
	}
	if q.runs == nil {
		q.runs = map[string]*pruneRun{}
	}
	r := &pruneRun{done: make(chan struct{})}
	q.runs[container] = r
	go func() {
		for {
			fn()
			q.mu.Lock()
			if !r.again {
				delete(q.runs, container)
				close(r.done)
				q.mu.Unlock()
				return
			}
			r.again = false
			q.mu.Unlock()
		}
	}()
}

// WaitRetention returns when no checkpoint retention run is pending for
// proj's container (or ctx ends). Listing, restore and fork already wait;
// benchmarks use it to keep the background work out of other timings.
func (p *Manager) WaitRetention(ctx context.Context, proj api.Project) error {
	return p.pruning.wait(ctx, proj.Container)
}

// wait returns when no retention runs for container (or ctx ends).
func (q *pruneQueue) wait(ctx context.Context, container string) error {
	q.mu.Lock()
	r := q.runs[container]
	q.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prune deletes the project's oldest checkpoints beyond the kept number,
// except those a fork is copying.
func (p *Manager) prune(ctx context.Context, snap Snapshotter, proj api.Project) error {
	list, err := snap.Snapshots(ctx, proj.Container)
	if err != nil {
		return err
	}
	var cps []lxdexec.Snapshot
	for _, s := range list {
		if _, _, ok := ParseCheckpoint(s.Name); ok {
			cps = append(cps, s)
		}
	}
	keep := p.Keep
	if keep <= 0 {
		keep = DefaultCheckpointKeep
	}
	if len(cps) <= keep {
		return nil
	}
	sort.SliceStable(cps, func(i, j int) bool { return cps[i].CreatedAt.Before(cps[j].CreatedAt) })
	var errs []error
	for _, s := range cps[:len(cps)-keep] {
		if p.pinned.has(proj.Container + "/" + s.Name) {
			continue
		}
		if err := snap.DeleteSnapshot(ctx, proj.Container, s.Name); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Checkpoints lists the project's checkpoints, oldest first. A container
// not created yet has none.
func (p *Manager) Checkpoints(ctx context.Context, proj api.Project) ([]api.Checkpoint, error) {
	snap := p.Snap
	if snap == nil {
		return nil, ErrNoSnapshots
	}
	if err := p.pruning.wait(ctx, proj.Container); err != nil {
		return nil, err
	}
	list, err := snap.Snapshots(ctx, proj.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return []api.Checkpoint{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of project %q: %w", proj.Name, p.Classify(err))
	}
	out := []api.Checkpoint{}
	for _, s := range list {
		chat, seq, ok := ParseCheckpoint(s.Name)
		if !ok {
			continue
		}
		out = append(out, api.Checkpoint{Name: s.Name, CreatedAt: s.CreatedAt, ChatID: chat, Seq: seq, Size: s.Size})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Restore restores the project's container in place from checkpoint
// name. A name that is not a checkpoint gives ErrBadCheckpoint; a missing
// one an error matching lxdexec.ErrNotFound.
func (p *Manager) Restore(ctx context.Context, proj api.Project, name string) error {
	if _, _, ok := ParseCheckpoint(name); !ok {
		return fmt.Errorf("%q: %w (want rc-<chat>-<seq>)", name, ErrBadCheckpoint)
	}
	snap := p.Snap
	if snap == nil {
		return ErrNoSnapshots
	}
	unlock, err := p.Lock(ctx, proj.Container)
	if err != nil {
		return err
	}
	defer unlock()
	if err := p.pruning.wait(ctx, proj.Container); err != nil {
		return err
	}
	if err := p.hasSnapshot(ctx, snap, proj, name); err != nil {
		return err
	}
	if err := snap.RestoreSnapshot(ctx, proj.Container, name); err != nil {
		return fmt.Errorf("restore project %q to %s: %w", proj.Name, name, p.Classify(err))
	}
	if err := p.Resync(ctx, proj); err != nil { // the snapshot's devices are its ports then
		p.Log.Warn("project previews not set after restore", "project", proj.Name, "error", err)
	}
	if p.Limits != nil {
		if err := p.Limits(ctx, proj); err != nil {
			return fmt.Errorf("restore project %q to %s: set its limits: %w", proj.Name, name, err)
		}
	}
	return nil
}

// Fork creates dst's container as a copy of src's checkpoint name with
// config cfg (the marks making it dst's); it is started by dst's first
// run. The checkpoint is kept while it is copied.
func (p *Manager) Fork(ctx context.Context, src api.Project, name string, dst api.Project, cfg map[string]string) error {
	if _, _, ok := ParseCheckpoint(name); !ok {
		return fmt.Errorf("%q: %w (want rc-<chat>-<seq>)", name, ErrBadCheckpoint)
	}
	snap := p.Snap
	if snap == nil {
		return ErrNoSnapshots
	}
	defer p.pinned.add(src.Container + "/" + name)()
	// A retention run that started before the pin may still delete it.
	if err := p.pruning.wait(ctx, src.Container); err != nil {
		return err
	}
	if err := p.hasSnapshot(ctx, snap, src, name); err != nil {
		return err
	}
	if err := snap.CopyFromSnapshot(ctx, src.Container, name, dst.Container, cfg); err != nil {
		return fmt.Errorf("copy checkpoint %s of project %q to project %q: %w", name, src.Name, dst.Name, p.Classify(err))
	}
	// The copy has the original's preview devices (its sockets): dst's own
	// replace them before anything starts it, LXD's autostart included.
	if err := p.Resync(ctx, dst); err != nil {
		p.Log.Warn("forked project's previews not set", "project", dst.Name, "error", err)
	}
	if p.Limits != nil {
		if err := p.Limits(ctx, dst); err != nil {
			return fmt.Errorf("copy checkpoint %s of project %q to project %q: set its limits: %w", name, src.Name, dst.Name, err)
		}
	}
	return nil
}

// hasSnapshot returns nil when proj's container has the checkpoint, an
// error matching lxdexec.ErrNotFound when it does not (LXD 5.0 answers a
// restore from a missing snapshot with a generic failure).
func (p *Manager) hasSnapshot(ctx context.Context, snap Snapshotter, proj api.Project, name string) error {
	list, err := snap.Snapshots(ctx, proj.Container)
	if err != nil {
		return fmt.Errorf("list checkpoints of project %q: %w", proj.Name, p.Classify(err))
	}
	for _, s := range list {
		if s.Name == name {
			return nil
		}
	}
	return fmt.Errorf("checkpoint %s of project %q: %w", name, proj.Name, lxdexec.ErrNotFound)
}
