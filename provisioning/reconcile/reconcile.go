package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/lxdexec"
	"remote/provisioning/lxdconn"
	"remote/provisioning/placement"
)

// InstanceLister lists every instance with its status (one LXD request).
type InstanceLister interface {
	Instances(ctx context.Context) ([]lxdexec.Instance, error)
}

// EventSource is the optional LXD ability the Reconciler watches.
type EventSource interface {
	Events(ctx context.Context, types ...string) (<-chan lxdexec.Event, error)
}

// ProjectStore lists projects and updates their stored status. The
// daemon's store satisfies it (as it does provisioning.ProjectStore).
type ProjectStore interface {
	Projects() ([]api.Project, error)
	UpdateProject(name string, fn func(*api.Project) error) (api.Project, error)
}

var (
	_ InstanceLister = (*lxdexec.Client)(nil)
	_ EventSource    = (*lxdexec.Client)(nil)
	_ InstanceLister = (*lxdconn.Conn)(nil)
	_ EventSource    = (*lxdconn.Conn)(nil)
)

// Stored project statuses (api.Project.Status).
const (
	StatusRunning = "running"
	StatusStopped = "stopped"
	StatusMissing = "missing"
	StatusUnknown = "unknown"
)

// Options configure a Reconciler.
type Options struct {
	// Start starts an autostart project's container (required: the
	// preparer's Start).
	Start    func(ctx context.Context, p api.Project) error
	Projects ProjectStore   // required
	Lister   InstanceLister // required: status resync
	Events   EventSource    // nil: status is kept true by resync only
	// MarkerKey and NameKey are the config keys that mark a container as
	// a project's (provisioning.MarkerKey and NameKey; required).
	MarkerKey, NameKey string
	// Parallel bounds concurrent container starts at start-up (default 4).
	Parallel int
	// Resync is how often stored status is compared with LXD's (default
	// 30 s); it also covers lifecycle events lost while LXD was away.
	Resync time.Duration
	Logger hclog.Logger
	// OnEvacuated, when set, is called (in its own goroutine) when a
	// project's container was stopped by LXD on an evacuated cluster
	// member: runs in it ended; LXD moves it to another member.
	OnEvacuated func(p api.Project, member string)
}

// Reconciler keeps stored project status true to LXD: at daemon start it
// starts every autostart project (bounded parallelism) and corrects the
// status of the others; while the daemon runs it follows LXD lifecycle
// events and resyncs periodically, retrying with backoff while LXD is
// unreachable.
type Reconciler struct {
	o   Options
	log hclog.Logger

	mu          sync.Mutex
	unavailable error // last LXD reachability failure, nil when reachable

	// startWarn and resyncWarn back off Run's "unreachable" warnings.
	startWarn, resyncWarn lxdconn.WarnBackoff
}

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Start == nil || o.Projects == nil || o.Lister == nil {
		return nil, errors.New("reconciler: start, project store and instance lister are required")
	}
	if o.MarkerKey == "" || o.NameKey == "" {
		return nil, errors.New("reconciler: the marker and name keys are required")
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return &Reconciler{o: o, log: o.Logger}, nil
}

// Available returns nil while LXD answered the last request of the
// reconciler, and an error matching lxdconn.ErrUnavailable
// (provisioning.ErrUnavailable) otherwise.
func (r *Reconciler) Available() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unavailable
}

func (r *Reconciler) setAvailable(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.unavailable = nil
		return
	}
	r.unavailable = fmt.Errorf("%w: %w", lxdconn.ErrUnavailable, err)
}

// instances lists LXD's containers by name and records whether LXD
// answered (setAvailable); a failure is classified and wrapped.
func (r *Reconciler) instances(ctx context.Context) (map[string]lxdexec.Instance, error) {
	insts, err := r.o.Lister.Instances(ctx)
	if err != nil {
		err = lxdconn.Classify(err)
		r.setAvailable(err)
		return nil, fmt.Errorf("list containers: %w", err)
	}
	r.setAvailable(nil)
	byName := make(map[string]lxdexec.Instance, len(insts))
	for _, in := range insts {
		byName[in.Name] = in
	}
	return byName, nil
}

// StartAll starts every autostart project's container (at most Parallel at
// once) and corrects every project's stored status. It returns the
// failures joined; an unreachable LXD gives an error matching
// lxdconn.ErrUnavailable.
func (r *Reconciler) StartAll(ctx context.Context) error {
	projects, err := r.o.Projects.Projects()
	if err != nil {
		return fmt.Errorf("list projects: %w", err)
	}
	byName, err := r.instances(ctx)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, r.o.Parallel)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, p := range projects {
		if p.Container == "" {
			continue
		}
		in, exists := byName[p.Container]
		if !p.Autostart || (exists && in.Status == "Running") {
			r.record(p, r.statusOf(p, in, exists), in.Location)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := r.o.Start(ctx, p); err != nil {
				r.log.Error("autostart project", "project", p.Name, "container", p.Container, "error", err)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			r.log.Info("autostarted project", "project", p.Name, "container", p.Container)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Resync compares every project's stored status with LXD's and corrects
// it, without starting anything.
func (r *Reconciler) Resync(ctx context.Context) error {
	byName, err := r.instances(ctx)
	if err != nil {
		return err
	}
	projects, err := r.o.Projects.Projects()
	if err != nil {
		return fmt.Errorf("list projects: %w", err)
	}
	for _, p := range projects {
		if p.Container == "" {
			continue
		}
		in, ok := byName[p.Container]
		if !ok {
			if _, moving := placement.MovingCopy(mapValues(byName), p, r.o.MarkerKey); moving {
				continue // LXD is moving it between cluster members
			}
		}
		r.record(p, r.statusOf(p, in, ok), in.Location)
	}
	return nil
}

// statusOf is p's status from its container in as listed. A container
// under p's container name that is not p's (marked with another project's
// id, or unmarked) is StatusUnknown: neither p's running container nor a
// missing one (starting p answers 409 naming it).
func (r *Reconciler) statusOf(p api.Project, in lxdexec.Instance, exists bool) string {
	switch {
	case !exists:
		return StatusMissing
	case !r.mayBeOwn(p, in):
		return StatusUnknown
	case in.Status == "Running":
		return StatusRunning
	default:
		return StatusStopped
	}
}

// mayBeOwn reports whether in is marked as p's: with p's id, or, from
// before project ids, with p's name only (owns decides on that one when p
// is started).
func (r *Reconciler) mayBeOwn(p api.Project, in lxdexec.Instance) bool {
	id := in.Config[r.o.MarkerKey]
	return (id != "" && id == p.ID) || (id == "" && in.Config[r.o.NameKey] == p.Name)
}

// record stores status, and the cluster member location when not "",
// when they differ from p's.
func (r *Reconciler) record(p api.Project, status, location string) {
	location = placement.MemberName(location)
	if p.Status == status && (location == "" || p.Location == location) {
		return
	}
	_, err := r.o.Projects.UpdateProject(p.Name, func(pr *api.Project) error {
		pr.Status = status
		if location != "" {
			pr.Location = location
		}
		return nil
	})
	if err != nil {
		r.log.Warn("record project status", "project", p.Name, "status", status, "error", err)
		return
	}
	r.log.Debug("project status changed", "project", p.Name, "from", p.Status, "to", status, "location", location)
}

// lifecycleStatus maps an LXD lifecycle action to a stored status; ok is
// false for actions that do not change it.
func lifecycleStatus(action string) (string, bool) {
	switch action {
	case "instance-started", "instance-restarted", "instance-resumed":
		return StatusRunning, true
	// "Stopped" is any of these lifecycle events.
	case "instance-stopped", "instance-shutdown", "instance-paused":
		return StatusStopped, true
	case "instance-deleted":
		return StatusMissing, true
	}
	return "", false
}

// HandleEvent applies one LXD lifecycle event to the stored status and
// location of the project owning the instance. A delete is checked
// against LXD first: one that is part of a move between cluster members
// (placement.MovingCopy) is not recorded as missing.
func (r *Reconciler) HandleEvent(ev lxdexec.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.handleEvent(ctx, ev)
}

func (r *Reconciler) handleEvent(ctx context.Context, ev lxdexec.Event) {
	if ev.Type != "lifecycle" || ev.Instance == "" {
		return
	}
	status, ok := lifecycleStatus(ev.Action)
	if !ok && ev.Action != lxdexec.ActionInstanceRenamed {
		return
	}
	projects, err := r.o.Projects.Projects()
	if err != nil {
		r.log.Warn("list projects for lifecycle event", "error", err)
		return
	}
	for _, p := range projects {
		if p.Container != ev.Instance {
			continue
		}
		switch ev.Action {
		case lxdexec.ActionInstanceDeleted:
			if now, moved := r.deleteIsMove(ctx, p); moved {
				r.record(p, now.Status, now.Location)
				continue
			}
			r.record(p, StatusMissing, "")
		case lxdexec.ActionInstanceRenamed:
			// The end of a move (the copy took the name) or a rename to a
			// project's container name: read what is there now.
			if now, found := r.deleteIsMove(ctx, p); found && now.Location != "" {
				r.record(p, now.Status, now.Location)
			}
		default:
			r.record(p, status, ev.Location)
			if ev.Stopped() && r.o.OnEvacuated != nil && placement.Evacuated(ctx, r.o.Lister, ev.Location) {
				r.log.Info("project container stopped by a cluster member evacuation", "project", p.Name, "member", ev.Location)
				go r.o.OnEvacuated(p, ev.Location)
			}
		}
	}
}

func mapValues(m map[string]lxdexec.Instance) []lxdexec.Instance {
	out := make([]lxdexec.Instance, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// Run starts the autostart projects, then keeps status true until ctx is
// done: it follows lifecycle events, resyncs every Resync interval and at
// once whenever the event stream was re-established (events may have been
// lost meanwhile).
// While LXD is unreachable it retries with exponential backoff (1 s to
// 30 s). It returns nil when ctx is done.
func (r *Reconciler) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		err := r.StartAll(ctx)
		if err == nil || !errors.Is(err, lxdconn.ErrUnavailable) {
			break
		}
		r.startWarn.Log(r.log, "lxd unreachable at start-up, retrying", "in", backoff, "error", err)
		if !lxdconn.Sleep(ctx, backoff) {
			return nil
		}
		backoff = min(backoff*2, 30*time.Second)
	}
	var events <-chan lxdexec.Event
	// subscribe (re)opens the lifecycle stream; when LXD is away at that
	// moment the periodic resync covers until the next tick tries again.
	subscribe := func() {
		if r.o.Events == nil || events != nil {
			return
		}
		ch, err := r.o.Events.Events(ctx, "lifecycle")
		if err != nil {
			r.log.Warn("lxd lifecycle events unavailable, resync only until the next try", "error", err)
			return
		}
		events = ch
	}
	subscribe()
	tick := time.NewTicker(r.o.Resync)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff = time.Second
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Type == lxdexec.EventReconnected {
				// The stream was down (LXD restarted or dropped us):
				// lifecycle events may be lost, e.g. LXD autostarting a
				// container before the stream was back. Resync now
				// rather than at the next tick.
				r.resyncWithBackoff(ctx, retry, &backoff)
				continue
			}
			r.handleEvent(ctx, ev)
		case <-tick.C:
			r.resyncWithBackoff(ctx, retry, &backoff)
			subscribe()
		case <-retry.C:
			r.resyncWithBackoff(ctx, retry, &backoff)
		}
	}
}

func (r *Reconciler) resyncWithBackoff(ctx context.Context, retry *time.Timer, backoff *time.Duration) {
	err := r.Resync(ctx)
	if err == nil {
		*backoff = time.Second
		r.resyncWarn.Reset()
		return
	}
	if errors.Is(err, lxdconn.ErrUnavailable) {
		r.resyncWarn.Log(r.log, "lxd unreachable, retrying", "in", *backoff, "error", err)
		retry.Reset(*backoff)
		*backoff = min(*backoff*2, 30*time.Second)
		return
	}
	r.log.Warn("resync project status", "error", err)
}

// deleteIsMove checks, after an instance-deleted event for p's container,
// whether the container still exists or is being moved (a copy with p's
// id exists). It returns the status to record and false when the delete
// is real.
func (r *Reconciler) deleteIsMove(ctx context.Context, p api.Project) (api.Project, bool) {
	insts, err := r.o.Lister.Instances(ctx)
	if err != nil {
		// Unknown: keep the stored status; the resync decides later.
		r.log.Warn("check a deleted container against LXD", "project", p.Name, "error", err)
		return p, true
	}
	for _, in := range insts {
		if in.Name == p.Container {
			p.Status, p.Location = r.statusOf(p, in, true), in.Location
			return p, true
		}
	}
	if cp, ok := placement.MovingCopy(insts, p, r.o.MarkerKey); ok {
		r.log.Info("container deleted as part of a move between cluster members", "project", p.Name,
			"container", p.Container, "to", cp.Location)
		return p, true
	}
	return p, false
}
