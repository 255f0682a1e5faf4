package repoapi

import (
	"sync"

	"remote/internal/errdefs"
	"remote/provisioning/gitrepo"
)

// diffBudget admits diffs (security review finding 5): each in progress
// holds cost bytes of a total budget (its worst case, gitrepo.DiffMemory,
// at most the budget itself) and one of its user's perUser places. A diff
// that does not fit is refused at once (503 naming the bound), never
// queued: a queue would hold the request, and its memory, meanwhile.
type diffBudget struct {
	mu      sync.Mutex
	total   int64
	cost    int64
	perUser int
	used    int64
	running map[string]int
}

// diffBudgetFor is the budget of o (its defaults applied): each diff
// counted at its worst case under o's bounds, at most the whole budget (a
// budget below one diff runs one at a time).
func diffBudgetFor(o Options) *diffBudget {
	cost := gitrepo.DiffMemory(gitrepo.DiffLimits{MaxPatch: o.MaxPatchBytes, MaxFiles: o.MaxDiffFiles})
	return newDiffBudget(o.DiffMemory, min(cost, o.DiffMemory), o.DiffsPerUser)
}

func newDiffBudget(total, cost int64, perUser int) *diffBudget {
	return &diffBudget{total: total, cost: cost, perUser: perUser, running: map[string]int{}}
}

// acquire admits one diff of user, or refuses it with an unavailable
// error naming the bound; release gives its place back (once).
func (b *diffBudget) acquire(user string) (release func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.running[user]; n >= b.perUser {
		return nil, errdefs.Unavailable("%d diffs of user %q are in progress, at most %d at once: retry when one has ended", n, user, b.perUser)
	}
	if b.used+b.cost > b.total {
		return nil, errdefs.Unavailable("the diffs in progress hold %d of the daemon's %d bytes for diffs and this one needs %d: retry shortly",
			b.used, b.total, b.cost)
	}
	b.used += b.cost
	b.running[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= b.cost
			if b.running[user]--; b.running[user] == 0 {
				delete(b.running, user)
			}
		})
	}, nil
}
