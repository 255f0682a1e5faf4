package lxdexec_test

import (
	"os"
	"testing"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// TestRemoveDevices: two read-only disk devices hot-plugged into a running
// container, one removed with RemoveDevices (unplugged, the other and the
// config kept); names the instance lacks are ignored.
func TestRemoveDevices(t *testing.T) {
	c := testkit.LXD(t)
	ctx := testCtx(t)
	name := testkit.NewContainer(t, c, "devs")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	disk := func(path string) map[string]string {
		return map[string]string{"type": "disk", "source": dir, "path": path, "readonly": "true"}
	}
	err := c.UpdateInstance(ctx, name, lxdexec.InstancePatch{
		Config:  map[string]string{"user.keep": "yes"},
		Devices: map[string]map[string]string{"a": disk("/mnt/a"), "b": disk("/mnt/b")},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveDevices(ctx, name, "a", "not-there"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveDevices(ctx, name, "not-there"); err != nil {
		t.Fatal(err)
	}
	inst, _, err := c.Instance(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Devices["a"] != nil || inst.Devices["b"]["path"] != "/mnt/b" || inst.Config["user.keep"] != "yes" || !inst.Running() {
		t.Fatalf("after remove: devices %v config %v status %s", inst.Devices, inst.Config, inst.Status)
	}
	out, _, _, err := run(t, ctx, c, name, lxdexec.ExecRequest{Command: []string{"sh", "-c", "grep -c ' /mnt/' /proc/mounts"}}, "")
	if err != nil || string(out) != "1\n" {
		t.Fatalf("mounts: %q %v", out, err)
	}
}
