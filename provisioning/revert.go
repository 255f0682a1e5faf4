package provisioning

// reverter collects undo steps of a multi-step set-up and runs them in
// reverse order unless the set-up succeeded (LXD's shared/revert pattern).
type reverter struct {
	undo []func()
}

// add registers an undo step.
func (r *reverter) add(f func()) { r.undo = append(r.undo, f) }

// fail runs the undo steps, newest first, unless success was called.
func (r *reverter) fail() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
	r.undo = nil
}

// success forgets the undo steps.
func (r *reverter) success() { r.undo = nil }
