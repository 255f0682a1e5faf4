package revert

import "testing"

// Undo steps run newest first, every one of them, once; none after
// Success.
func TestReverterRunsAllUndoStepsNewestFirst(t *testing.T) {
	var order []int
	var r Reverter
	for i := 1; i <= 3; i++ {
		r.Add(func() { order = append(order, i) })
	}
	r.Fail()
	r.Fail()
	if len(order) != 3 || order[0] != 3 || order[1] != 2 || order[2] != 1 {
		t.Fatalf("undo order %v, want [3 2 1]", order)
	}
	r.Add(func() { order = append(order, 9) })
	r.Success()
	r.Fail()
	if len(order) != 3 {
		t.Fatalf("undo ran after success: %v", order)
	}
}
