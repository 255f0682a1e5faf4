package placement

import (
	"testing"

	"remote/api"
)

// TestClamp: each field beyond its cap (above it, of the other kind, or
// absent) becomes the cap; fields within it and uncapped ones are kept.
func TestClamp(t *testing.T) {
	caps := api.ProjectLimits{CPU: "2", Memory: "1GiB", Processes: 100}
	for _, tc := range []struct {
		in      *api.ProjectLimits
		want    *api.ProjectLimits
		clamped []string
	}{
		{&api.ProjectLimits{CPU: "1", Memory: "512MiB", Processes: 50, Disk: "1TB"}, &api.ProjectLimits{CPU: "1", Memory: "512MiB", Processes: 50, Disk: "1TB"}, nil},
		{&api.ProjectLimits{CPU: "0-3", Memory: "50%", Processes: 500}, &api.ProjectLimits{CPU: "2", Memory: "1GiB", Processes: 100}, []string{"cpu", "memory", "processes"}},
		{&api.ProjectLimits{CPU: "0,1", Memory: "1.5GiB", Processes: 100}, &api.ProjectLimits{CPU: "0,1", Memory: "1GiB", Processes: 100}, []string{"memory"}},
		{nil, &api.ProjectLimits{CPU: "2", Memory: "1GiB", Processes: 100}, []string{"cpu", "memory", "processes"}},
	} {
		got, ex := Clamp(tc.in, caps)
		var fields []string
		for _, e := range ex {
			fields = append(fields, e.Field)
		}
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) || len(fields) != len(tc.clamped) {
			t.Fatalf("Clamp(%+v) = %+v %v, want %+v %v", tc.in, got, fields, tc.want, tc.clamped)
		}
		for i := range fields {
			if fields[i] != tc.clamped[i] {
				t.Fatalf("Clamp(%+v) clamped %v, want %v", tc.in, fields, tc.clamped)
			}
		}
	}
	if got, ex := Clamp(nil, api.ProjectLimits{}); got != nil || ex != nil {
		t.Fatalf("no caps: %+v %v", got, ex)
	}
}
