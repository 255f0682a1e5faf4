package reconcile

import "testing"

// FuzzLifecycleStatus: every action maps to a known status or none.
func FuzzLifecycleStatus(f *testing.F) {
	for _, s := range []string{"instance-started", "instance-stopped", "instance-shutdown", "instance-deleted", "instance-updated", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, action string) {
		st, ok := lifecycleStatus(action)
		switch {
		case !ok && st != "":
			t.Fatalf("%q: status %q without ok", action, st)
		case ok && st != StatusRunning && st != StatusStopped && st != StatusMissing:
			t.Fatalf("%q: unknown status %q", action, st)
		}
	})
}
