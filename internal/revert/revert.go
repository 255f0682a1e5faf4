// Package revert collects the undo steps of a multi-step set-up and runs
// them in reverse order unless the set-up succeeded (LXD's shared/revert
// pattern). It imports nothing of the module.
package revert

// Reverter holds undo steps; its zero value is ready to use.
type Reverter struct {
	undo []func()
}

// Add registers an undo step.
func (r *Reverter) Add(f func()) { r.undo = append(r.undo, f) }

// Fail runs the undo steps, newest first, unless Success was called.
func (r *Reverter) Fail() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
	r.undo = nil
}

// Success forgets the undo steps.
func (r *Reverter) Success() { r.undo = nil }
