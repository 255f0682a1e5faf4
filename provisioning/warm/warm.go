// Package warm owns the warm container pool ([projects] warm = N, issue
// 28): containers created and started ahead of need from the default
// image, pool and profiles, with nothing of any project in them. A new
// project claims one (marked with its project id at claim, before the
// project exists), and the pool refills in the background. A container
// leaves the pool once and never comes back: it is never shared between
// projects nor reused after a project had it.
//
// It reaches LXD through the small LXD interface and creates containers
// through the Create function provisioning hands it (the image, profiles
// and uid map of every project container). It must never import
// provisioning, the daemon, a provider or config.
package warm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/lxdexec"
)

// Key is the LXD config key that marks a warm container's state: Ready
// while it waits in the pool (no project marker), Claimed from its claim
// to its project's first preparation (which takes no checkpoint: nothing
// of the project is in it yet), Used afterwards.
const (
	Key     = "user.remote.warm"
	Ready   = "ready"
	Claimed = "claimed"
	Used    = "used"
)

// NamePrefix starts every warm container's name; the rest is random.
const NamePrefix = "remote-warm-"

// MaxSize bounds [projects] warm.
const MaxSize = 16

// DefaultRefillDelay is how long the pool waits after a claim before it
// creates the next container. A new project's first prompt usually
// follows its create at once, and a container's create and start would
// share the host's cores with that prompt's CLI start: on 2 cores it
// added 220–360 ms (27–47 %) to the first event (docs/benchmarks.md).
const DefaultRefillDelay = 5 * time.Second

// LXD is what the pool asks of LXD.
type LXD interface {
	Instances(ctx context.Context) ([]lxdexec.Instance, error)
	UpdateInstance(ctx context.Context, name string, patch lxdexec.InstancePatch, etag string) error
	SetState(ctx context.Context, name string, req lxdexec.StateRequest) error
	DeleteInstance(ctx context.Context, name string) error
}

// Options configure a Pool.
type Options struct {
	Size int // containers kept ready; 0 turns the pool off
	// Prefix starts the pool's container names ("": NamePrefix); only
	// containers named so are adopted at start.
	Prefix string
	// Image and Pool are the default image and storage pool: only a
	// project on both (and no cluster target) claims a warm container.
	Image, Pool string
	// Profiles are the LXD profiles of new containers; a container left
	// from before with other profiles is not adopted.
	Profiles []string
	LXD      LXD
	// Create makes and starts a container named name from the default
	// image on the default pool, config added to its config.
	Create func(ctx context.Context, name string, config map[string]string) error
	// MarkerKey and NameKey are the project marker keys set at claim.
	MarkerKey, NameKey string
	// RefillDelay: no create starts until this long after the latest
	// claim (0: DefaultRefillDelay).
	RefillDelay time.Duration
	Logger      hclog.Logger
}

// Stats is the pool's state for the doctor and /metrics.
type Stats struct {
	Size, Ready, Creating int
	Claims, Misses        uint64
	LastError             string // the last failed create, "" after a success
	// RefillIn: the pool holds its next create this long yet (RefillDelay
	// after the latest claim); 0 when it is not holding one.
	RefillIn    time.Duration
	RefillDelay time.Duration
}

// Pool keeps Size warm containers. A nil *Pool claims nothing.
type Pool struct {
	o    Options
	log  hclog.Logger
	kick chan struct{}

	mu        sync.Mutex
	ready     []string
	creating  int
	claims    uint64
	misses    uint64
	lastErr   string
	lastClaim time.Time // the latest claim: creates wait RefillDelay after it
}

// New returns a pool, or nil when o.Size is 0.
func New(o Options) (*Pool, error) {
	if o.Size == 0 {
		return nil, nil
	}
	if o.Size < 0 || o.Size > MaxSize {
		return nil, fmt.Errorf("warm pool size %d: want 0 to %d", o.Size, MaxSize)
	}
	if o.LXD == nil || o.Create == nil || o.MarkerKey == "" {
		return nil, errors.New("warm pool: LXD, Create and MarkerKey are required")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Prefix == "" {
		o.Prefix = NamePrefix
	}
	if o.RefillDelay == 0 {
		o.RefillDelay = DefaultRefillDelay
	}
	return &Pool{o: o, log: o.Logger, kick: make(chan struct{}, 1)}, nil
}

// Matches reports whether a new project of image, pool and target may
// claim from the pool.
func (p *Pool) Matches(image, pool, target string) bool {
	return p != nil && (image == "" || image == p.o.Image) && pool == p.o.Pool && target == ""
}

// Run adopts the ready warm containers a previous daemon left (as many as
// the pool holds; the others are deleted), then keeps the pool full until
// ctx ends, one create at a time, none sooner than RefillDelay after the
// latest claim, backing off after a failure.
func (p *Pool) Run(ctx context.Context) {
	if p == nil {
		return
	}
	p.adopt(ctx)
	backoff := time.Second
	for {
		p.mu.Lock()
		need := len(p.ready) < p.o.Size
		hold := time.Duration(0)
		if need && !p.lastClaim.IsZero() {
			hold = time.Until(p.lastClaim.Add(p.o.RefillDelay))
		}
		if need && hold <= 0 {
			p.creating++
		}
		p.mu.Unlock()
		if !need || hold > 0 {
			var after <-chan time.Time
			if hold > 0 {
				after = time.After(hold)
			}
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-after:
			}
			continue
		}
		name := p.o.Prefix + randomHex(6)
		err := p.o.Create(ctx, name, map[string]string{Key: Ready})
		p.mu.Lock()
		p.creating--
		surplus := false
		if err == nil {
			// The size may have been lowered (SetSize) while it was made.
			if surplus = len(p.ready) >= p.o.Size; !surplus {
				p.ready = append(p.ready, name)
			}
			p.lastErr = ""
		} else {
			p.lastErr = err.Error()
		}
		p.mu.Unlock()
		if surplus {
			p.log.Info("warm container made past the pool's new size; it is deleted", "container", name)
			if err := p.remove(ctx, name); err != nil {
				p.log.Warn("surplus warm container not deleted", "container", name, "error", err)
			}
			continue
		}
		if err == nil {
			backoff = time.Second
			p.log.Debug("warm container ready", "container", name)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("warm container not created; retrying", "container", name, "in", backoff, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// adopt takes the running, unclaimed warm containers of this pool's name
// prefix and profiles that LXD has (a previous daemon's), up to Size.
func (p *Pool) adopt(ctx context.Context) {
	all, err := p.o.LXD.Instances(ctx)
	if err != nil {
		p.log.Warn("warm containers from before not listed", "error", err)
		return
	}
	for _, in := range all {
		if !strings.HasPrefix(in.Name, p.o.Prefix) || in.Config[Key] != Ready || in.Config[p.o.MarkerKey] != "" || in.Status != "Running" || !sameProfiles(in.Profiles, p.o.Profiles) {
			continue
		}
		p.mu.Lock()
		full := len(p.ready) >= p.o.Size
		if !full {
			p.ready = append(p.ready, in.Name)
		}
		p.mu.Unlock()
		if full {
			if err := p.remove(ctx, in.Name); err != nil {
				p.log.Warn("extra warm container not deleted", "container", in.Name, "error", err)
			} else {
				p.log.Info("warm container from before deleted: the pool is full", "container", in.Name, "size", p.o.Size)
			}
			continue
		}
		p.log.Info("warm container from before adopted", "container", in.Name)
	}
}

// Sweep deletes the ready, unclaimed warm containers of o's name prefix
// and profiles that a previous daemon left, for a daemon that keeps no
// pool ([projects] warm = 0): they would otherwise stay in LXD for good,
// each holding a started container. A claimed one (it carries a project's
// marker) is a project's and is never touched. o.Size is ignored.
func Sweep(ctx context.Context, o Options) {
	if o.LXD == nil || o.MarkerKey == "" {
		return
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Prefix == "" {
		o.Prefix = NamePrefix
	}
	o.Size = 0
	p := &Pool{o: o, log: o.Logger}
	p.adopt(ctx)
}

func sameProfiles(a, b []string) bool {
	if len(b) == 0 {
		b = []string{"default"}
	}
	return slices.Equal(a, b)
}

// Claim gives the project (id, name) a warm container: it leaves the pool
// and is marked as the project's (MarkerKey, NameKey, Key = Claimed)
// before its name is returned. "" means none was ready (or the mark
// failed; that container is deleted): the caller creates one as before.
func (p *Pool) Claim(ctx context.Context, id, name string) string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	if len(p.ready) == 0 {
		p.misses++
		p.mu.Unlock()
		p.refill()
		return ""
	}
	c := p.ready[0]
	p.ready = p.ready[1:]
	p.claims++
	p.lastClaim = time.Now()
	p.mu.Unlock()
	p.refill()
	mark := lxdexec.InstancePatch{Config: map[string]string{p.o.MarkerKey: id, p.o.NameKey: name, Key: Claimed}}
	if err := p.o.LXD.UpdateInstance(ctx, c, mark, ""); err != nil {
		p.log.Warn("warm container not claimed; it is deleted", "container", c, "project", name, "error", err)
		p.Discard(c)
		return ""
	}
	p.log.Info("warm container claimed", "container", c, "project", name, "id", id)
	return c
}

// SetSize changes how many containers the pool keeps ready (a config
// reload of [projects] warm). The ready containers beyond n leave the pool
// at once, so no claim gets them, and are deleted in the background; one
// being created when the pool is full by then is deleted when its create
// ends; a larger n refills. A container being claimed is out of the pool
// already (Claim takes it out before marking it) and is never touched. A
// nil pool (warm was 0 at start) has nothing to drain and takes only 0.
func (p *Pool) SetSize(n int) error {
	if n < 0 || n > MaxSize {
		return fmt.Errorf("warm pool size %d: want 0 to %d", n, MaxSize)
	}
	if p == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("warm pool size %d: [projects] warm was 0 when the daemon started; a pool starts with a restart", n)
	}
	p.mu.Lock()
	old := p.o.Size
	p.o.Size = n
	var surplus []string
	if len(p.ready) > n {
		surplus = slices.Clone(p.ready[n:])
		p.ready = slices.Clone(p.ready[:n])
	}
	p.mu.Unlock()
	if old != n {
		p.log.Info("warm pool resized", "from", old, "to", n, "deleting", len(surplus))
	}
	for _, c := range surplus {
		p.Discard(c)
	}
	p.refill()
	return nil
}

// Discard deletes a container that left the pool without a project (in
// the background: the caller's request may be ending).
func (p *Pool) Discard(name string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := p.remove(ctx, name); err != nil {
			p.log.Error("warm container not deleted", "container", name, "error", err)
		}
	}()
}

// remove stops a container at once and deletes it.
func (p *Pool) remove(ctx context.Context, name string) error {
	_ = p.o.LXD.SetState(ctx, name, lxdexec.StateRequest{Action: "stop", Force: true})
	return p.o.LXD.DeleteInstance(ctx, name)
}

func (p *Pool) refill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Stats returns the pool's state; a nil pool's is all zero.
func (p *Pool) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Size: p.o.Size, Ready: len(p.ready), Creating: p.creating, Claims: p.claims, Misses: p.misses, LastError: p.lastErr, RefillDelay: p.o.RefillDelay}
	if st.Ready+st.Creating < st.Size && !p.lastClaim.IsZero() {
		st.RefillIn = max(0, time.Until(p.lastClaim.Add(p.o.RefillDelay)))
	}
	return st
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
