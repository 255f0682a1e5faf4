package testkit

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"remote/lxdexec"
)

func TestContainerName(t *testing.T) {
	valid := regexp.MustCompile(`^t-[a-z0-9-]{1,20}-[0-9a-f]{6}$`)
	for _, tc := range []struct{ prefix, wantPrefix string }{
		{"suite", "t-suite-"},
		{"Mixed_Case/Name", "t-mixedcasename-"},
		{"", "t-x-"},
		{"---", "t-x-"},
		{"a-very-long-prefix-that-goes-on-and-on", "t-a-very-long-prefix-t-"},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			a, b := ContainerName(tc.prefix), ContainerName(tc.prefix)
			if a == b {
				t.Fatalf("names not unique: %s", a)
			}
			if !valid.MatchString(a) || a[:len(tc.wantPrefix)] != tc.wantPrefix || len(a) > 63 {
				t.Fatalf("ContainerName(%q) = %q, want prefix %q", tc.prefix, a, tc.wantPrefix)
			}
		})
	}
}

func TestNewContainer(t *testing.T) {
	c := LXD(t)
	var name string
	t.Run("create", func(t *testing.T) {
		name = NewContainer(t, c, "testkit")
		inst, _, err := c.Instance(context.Background(), name)
		if err != nil || !inst.Running() {
			t.Fatalf("container %s: %+v, %v; want running", name, inst, err)
		}
	})
	// The subtest's cleanup deleted it.
	if _, _, err := c.Instance(context.Background(), name); err == nil {
		t.Fatalf("container %s still exists after cleanup", name)
	} else if !errors.Is(err, lxdexec.ErrNotFound) {
		t.Fatalf("Instance after cleanup: %v", err)
	}
}
