package warm_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning/warm"
	"remote/provisioning/warm/warmtest"
)

// creates records when each create started.
type creates struct {
	mu sync.Mutex
	at []time.Time
}

func (c *creates) create(context.Context, string, map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, time.Now())
	return nil
}

func (c *creates) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.at...)
}

func startPool(t *testing.T, size int, delay time.Duration) (*warm.Pool, *creates) {
	t.Helper()
	c := &creates{}
	p, err := warm.New(warm.Options{Size: size, LXD: warmtest.LXD{}, Create: c.create, MarkerKey: "user.test.id", NameKey: "user.test.name", RefillDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	warmtest.Run(t, p)
	waitReady(t, p, size)
	return p, c
}

func waitReady(t *testing.T, p *warm.Pool, n int) {
	t.Helper()
	testkit.Eventually(t, time.Minute, func() error {
		if st := p.Stats(); st.Ready < n {
			return fmt.Errorf("pool %+v", st)
		}
		return nil
	}, "%d ready", n)
}

// TestRefillWaitsAfterTheLatestClaim (docs/operating.md, "Warm containers"): the pool creates no
// container until RefillDelay after the latest claim, so the refill does
// not share the host's cores with the new project's first prompt; then it
// refills. Claims close together push the refill back to the last one.
func TestRefillWaitsAfterTheLatestClaim(t *testing.T) {
	// Long beside the test's own steps, so a stalled test cannot see the
	// refill's hold end early.
	const delay = 2 * time.Second
	p, c := startPool(t, 2, delay)
	if n := len(c.times()); n != 2 {
		t.Fatalf("%d creates before any claim, want 2", n)
	}
	if got := p.Claim(context.Background(), "id-a", "a"); got == "" {
		t.Fatal("first claim: none ready")
	}
	time.Sleep(200 * time.Millisecond) //nolint:forbidigo // the subject: time passes between two claims, measured against the refill delay
	second := time.Now()
	if got := p.Claim(context.Background(), "id-b", "b"); got == "" {
		t.Fatal("second claim: none ready")
	}
	if st := p.Stats(); st.RefillIn <= 0 || st.RefillIn > delay || st.RefillDelay != delay {
		t.Errorf("right after the second claim: stats %+v, want the refill held up to %v", st, delay)
	}
	waitReady(t, p, 2)
	if st := p.Stats(); st.RefillIn != 0 {
		t.Errorf("refilled: stats %+v, want nothing held", st)
	}
	at := c.times()
	if len(at) != 4 {
		t.Fatalf("%d creates, want 4", len(at))
	}
	for i, ti := range at[2:] {
		if early := ti.Sub(second); early < delay {
			t.Errorf("refill create %d started %v after the latest claim, want at least %v", i, early, delay)
		}
	}
	if st := p.Stats(); st.Claims != 2 || st.Misses != 0 || st.Creating != 0 {
		t.Errorf("stats %+v, want 2 claims, no miss, none creating", st)
	}
}

// TestRefillDelayDefault: a pool configured without a delay waits 5 s
// after a claim (docs/operating.md).
func TestRefillDelayDefault(t *testing.T) {
	p, err := warm.New(warm.Options{Size: 1, LXD: warmtest.LXD{}, Create: (&creates{}).create, MarkerKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Stats().RefillDelay; d != 5*time.Second {
		t.Fatalf("default refill delay %v, want 5s", d)
	}
}

// deletes is an LXD (warmtest.LXD otherwise) that records the pool's
// deletes.
type deletes struct {
	warmtest.LXD
	mu      sync.Mutex
	deleted []string
}

func (d *deletes) DeleteInstance(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted = append(d.deleted, name)
	return nil
}

func (d *deletes) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(slices.Values(d.deleted))
}

// named records each create's name and holds it while gate is set
// (a receive from gate lets one create end).
type named struct {
	mu    sync.Mutex
	names []string
	gate  chan struct{}
}

func (c *named) create(ctx context.Context, name string, _ map[string]string) error {
	c.mu.Lock()
	c.names = append(c.names, name)
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *named) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

// TestSetSizeDrainsReady (issue "the operator's path"): lowering
// [projects] warm on a reload (SetSize) takes the ready containers beyond
// the new size out of the pool at once (no claim gets them) and deletes
// them; a container claimed before is never touched. Before SetSize the pool kept its start-up size until a
// restart, and a restart with warm = 0 left its ready containers forever.
func TestSetSizeDrainsReady(t *testing.T) {
	lxd, c := &deletes{}, &named{}
	// A refill delay far beyond the test: the claim's refill never starts.
	p, err := warm.New(warm.Options{Size: 3, LXD: lxd, Create: c.create, MarkerKey: "user.test.id", NameKey: "user.test.name", RefillDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	warmtest.Run(t, p)
	waitReady(t, p, 3)
	claimed := p.Claim(context.Background(), "id-a", "a")
	if claimed == "" {
		t.Fatal("claim: none ready")
	}
	if err := p.SetSize(1); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Size != 1 || st.Ready != 1 {
		t.Errorf("right after SetSize(1): %+v, want size 1, 1 ready", st)
	}
	if err := p.SetSize(0); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Size != 0 || st.Ready != 0 || st.Creating != 0 {
		t.Errorf("right after SetSize(0): %+v, want nothing ready or creating", st)
	}
	if got := p.Claim(context.Background(), "id-b", "b"); got != "" {
		t.Errorf("a claim after SetSize(0) got %s", got)
	}
	var unclaimed []string
	for _, n := range c.all() {
		if n != claimed {
			unclaimed = append(unclaimed, n)
		}
	}
	slices.Sort(unclaimed)
	testkit.Eventually(t, time.Minute, func() error {
		if got := lxd.names(); !slices.Equal(got, unclaimed) {
			return fmt.Errorf("deleted %v", got)
		}
		return nil
	}, "the 2 unclaimed containers %v deleted, the claimed %s kept", unclaimed, claimed)
	if n := len(c.all()); n != 3 {
		t.Errorf("%d creates, want the 3 of the start", n)
	}
	if err := p.SetSize(warm.MaxSize + 1); err == nil {
		t.Error("SetSize past MaxSize taken")
	}
}

// TestSetSizeDeletesACreateInFlight: a container whose create was under
// way when the size dropped to 0 is deleted when its create ends, never
// added to the pool; raising the size again refills.
func TestSetSizeDeletesACreateInFlight(t *testing.T) {
	lxd, c := &deletes{}, &named{gate: make(chan struct{})}
	p, err := warm.New(warm.Options{Size: 1, LXD: lxd, Create: c.create, MarkerKey: "user.test.id", NameKey: "user.test.name"})
	if err != nil {
		t.Fatal(err)
	}
	warmtest.Run(t, p)
	testkit.Eventually(t, time.Minute, func() error {
		if st := p.Stats(); st.Creating != 1 {
			return fmt.Errorf("pool %+v", st)
		}
		return nil
	}, "a create under way")
	if err := p.SetSize(0); err != nil {
		t.Fatal(err)
	}
	c.gate <- struct{}{}
	testkit.Eventually(t, time.Minute, func() error {
		if got, made := lxd.names(), c.all(); len(made) != 1 || !slices.Equal(got, made) {
			return fmt.Errorf("made %v, deleted %v", made, got)
		}
		return nil
	}, "the container made after SetSize(0) deleted")
	if st := p.Stats(); st.Ready != 0 || st.Creating != 0 {
		t.Errorf("after the create: %+v, want nothing ready or creating", st)
	}
	if got := p.Claim(context.Background(), "id-a", "a"); got != "" {
		t.Errorf("claim got %s", got)
	}
	close(c.gate)
	if err := p.SetSize(2); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 2)
}

// TestSetSizeOfNoPool: a daemon started with warm = 0 has no pool; a
// reload keeping 0 is nothing, raising it says a restart is needed.
func TestSetSizeOfNoPool(t *testing.T) {
	var p *warm.Pool
	if err := p.SetSize(0); err != nil {
		t.Errorf("SetSize(0) of no pool: %v", err)
	}
	if err := p.SetSize(2); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Errorf("SetSize(2) of no pool: %v, want a restart asked", err)
	}
}

// leftovers is an LXD holding the containers a previous daemon left.
type leftovers struct {
	deletes
	in []lxdexec.Instance
}

func (l *leftovers) Instances(context.Context) ([]lxdexec.Instance, error) { return l.in, nil }

// TestSweepDeletesTheReadyOfBefore: a daemon started with [projects]
// warm = 0 keeps no pool, and the ready warm containers an earlier
// daemon left are deleted (else they stay started in LXD for good); a
// claimed one (a project's marker), one still being made, one of other
// profiles and any other container are left alone.
func TestSweepDeletesTheReadyOfBefore(t *testing.T) {
	ready := func(name string, cfg map[string]string, profiles ...string) lxdexec.Instance {
		c := map[string]string{warm.Key: warm.Ready}
		for k, v := range cfg {
			c[k] = v
		}
		if len(profiles) == 0 {
			profiles = []string{"default"}
		}
		return lxdexec.Instance{Name: name, Status: "Running", Config: c, Profiles: profiles}
	}
	lxd := &leftovers{in: []lxdexec.Instance{
		ready(warm.NamePrefix+"aaa", nil),
		ready(warm.NamePrefix+"bbb", nil),
		ready(warm.NamePrefix+"claimed", map[string]string{"user.test.id": "p1"}),
		ready(warm.NamePrefix+"making", map[string]string{warm.Key: "creating"}),
		ready(warm.NamePrefix+"other", nil, "default", "gpu"),
		ready("remote-myproject-1234", nil),
	}}
	p, err := warm.New(warm.Options{Size: 0, LXD: lxd, MarkerKey: "user.test.id"})
	if p != nil || err != nil {
		t.Fatalf("New with size 0: %v, %v; want no pool", p, err)
	}
	warm.Sweep(context.Background(), warm.Options{LXD: lxd, MarkerKey: "user.test.id"})
	if got, want := lxd.names(), []string{warm.NamePrefix + "aaa", warm.NamePrefix + "bbb"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
}
