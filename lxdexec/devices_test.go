package lxdexec_test

import (
	"os"
	"path/filepath"
	"testing"

	"remote/internal/testkit"
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
