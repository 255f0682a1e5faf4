package warm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"remote/internal/testkit"
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
