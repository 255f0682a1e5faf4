package repoapi

import (
	"testing"

	"remote/internal/errdefs"
	"remote/provisioning/gitrepo"
)

// TestDiffBudget: a user's third diff in progress is refused naming the
// per-user bound; a diff that would take the total past the budget is
// refused naming it; a release gives the place back, once however often
// it is called.
func TestDiffBudget(t *testing.T) {
	b := newDiffBudget(100, 40, 2)
	r1, err1 := b.acquire("alice")
	r2, err2 := b.acquire("alice")
	if err1 != nil || err2 != nil {
		t.Fatalf("alice's first two: %v, %v", err1, err2)
	}
	if _, err := b.acquire("alice"); !errdefs.IsUnavailable(err) || err.Error() != `2 diffs of user "alice" are in progress, at most 2 at once: retry when one has ended` {
		t.Errorf("alice's third: %v", err)
	}
	if _, err := b.acquire("bob"); !errdefs.IsUnavailable(err) ||
		err.Error() != "the diffs in progress hold 80 of the daemon's 100 bytes for diffs and this one needs 40: retry shortly" {
		t.Errorf("bob's past the budget: %v", err)
	}
	r1()
	r1() // a second release gives nothing back
	r3, err := b.acquire("bob")
	if err != nil {
		t.Fatalf("bob's after a release: %v", err)
	}
	if _, err := b.acquire("carol"); err == nil {
		t.Error("carol's past the budget was admitted after a double release")
	}
	r2()
	r3()
	if b.used != 0 || len(b.running) != 0 {
		t.Errorf("after every release: used %d, running %v", b.used, b.running)
	}
}

// TestDiffBudgetDefaults: 256 MiB for all diffs, two per user, each
// counted at 35 MiB (with the default 1 MiB patch); a budget below one
// diff's worst case still admits one diff at a time.
func TestDiffBudgetDefaults(t *testing.T) {
	b := diffBudgetFor(Options{MaxPatchBytes: DefaultMaxPatchBytes, MaxDiffFiles: gitrepo.DefaultMaxDiffFiles,
		DiffMemory: DefaultDiffMemory, DiffsPerUser: DefaultDiffsPerUser})
	if b.total != 256<<20 || b.perUser != 2 || b.cost != 35<<20 {
		t.Errorf("defaults: total %d, per user %d, cost %d", b.total, b.perUser, b.cost)
	}
	b = diffBudgetFor(Options{MaxPatchBytes: 64 << 20, MaxDiffFiles: gitrepo.DefaultMaxDiffFiles, DiffMemory: DefaultDiffMemory, DiffsPerUser: 2})
	release, err := b.acquire("alice")
	if err != nil {
		t.Fatalf("one diff of a 64 MiB patch: %v", err)
	}
	if _, err := b.acquire("bob"); err == nil {
		t.Error("a second diff of a 64 MiB patch was admitted")
	}
	release()
}
