package lxdexec_test

import (
	"os"
	"path/filepath"
	"testing"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// TestEditDevices adds a proxy device to a running container (its host
// socket appears), leaves it alone when the edit changes nothing, and
// removes it again, which a PATCH cannot do.
func TestEditDevices(t *testing.T) {
	c := testkit.LXD(t)
	ctx := testCtx(t)
	name := testkit.NewContainer(t, c, "devs")
	sock := filepath.Join(t.TempDir(), "p.sock")
	err := c.EditDevices(ctx, name, func(d map[string]map[string]string) bool {
		d["p"] = map[string]string{"type": "proxy", "bind": "host", "listen": "unix:" + sock, "connect": "tcp:127.0.0.1:80", "mode": "0600"}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	inst, etag, err := c.Instance(ctx, name)
	if err != nil || inst.Devices["p"]["listen"] != "unix:"+sock {
		t.Fatalf("after add: %v %v", inst.Devices, err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("host socket: %v %v", fi, err)
	}
	if err := c.EditDevices(ctx, name, func(map[string]map[string]string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, etag2, _ := c.Instance(ctx, name); etag2 != etag {
		t.Fatalf("an edit that changed nothing wrote the instance (etag %s → %s)", etag, etag2)
	}
	if err := c.EditDevices(ctx, name, func(d map[string]map[string]string) bool { delete(d, "p"); return true }); err != nil {
		t.Fatal(err)
	}
	if inst, _, _ := c.Instance(ctx, name); inst.Devices["p"] != nil || !inst.Running() {
		t.Fatalf("after remove: %v (%s)", inst.Devices, inst.Status)
	}
}

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
