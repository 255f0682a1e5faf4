package provisioning

// Tests of provisioning's pure parts (revert)
// that kill the mutants gremlins found living there (make mutate
// PKGS=./provisioning; docs/testing.md).

import (
	"testing"
)

// Undo steps run newest first, every one of them, once.
func TestReverterRunsAllUndoStepsNewestFirst(t *testing.T) {
	var order []int
	var r reverter
	for i := 1; i <= 3; i++ {
		r.add(func() { order = append(order, i) })
	}
	r.fail()
	r.fail()
	if len(order) != 3 || order[0] != 3 || order[1] != 2 || order[2] != 1 {
		t.Fatalf("undo order %v, want [3 2 1]", order)
	}
	r.add(func() { order = append(order, 9) })
	r.success()
	r.fail()
	if len(order) != 3 {
		t.Fatalf("undo ran after success: %v", order)
	}
}
