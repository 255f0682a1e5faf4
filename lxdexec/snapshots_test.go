package lxdexec_test

import (
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// TestSnapshots drives snapshot create, list, restore, copy and delete
// against the real LXD: a file written after a snapshot is gone after the
// restore, and a copy from the snapshot has the snapshot's files only.
func TestSnapshots(t *testing.T) {
	c := testkit.LXD(t)
	ctx := testCtx(t)
	name := testkit.NewContainer(t, c, "snap")
	sh := func(inst, script string) string {
		out, _, _, err := run(t, ctx, c, inst, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}}, "")
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return strings.TrimSpace(out)
	}
	sh(name, "echo one > /root/one")
	if err := c.CreateSnapshot(ctx, name, "rc-abc-1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sh(name, "echo two > /root/two")
	list, err := c.Snapshots(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "rc-abc-1" || list[0].CreatedAt.IsZero() || list[0].ExpiresAt.IsZero() {
		t.Fatalf("snapshots = %+v, want one rc-abc-1 with times", list)
	}
	copyName := testkit.ContainerName("snapcopy")
	testkit.CleanupContainer(t, c, copyName)
	if err := c.CopyFromSnapshot(ctx, name, "rc-abc-1", copyName, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.SetState(ctx, copyName, lxdexec.StateRequest{Action: "start"}); err != nil {
		t.Fatal(err)
	}
	if got := sh(copyName, "ls /root"); got != "one" {
		t.Fatalf("copy has %q in /root, want one", got)
	}
	if err := c.RestoreSnapshot(ctx, name, "rc-abc-1"); err != nil {
		t.Fatal(err)
	}
	if got := sh(name, "ls /root"); got != "one" {
		t.Fatalf("restored /root = %q, want one", got)
	}
	if err := c.DeleteSnapshot(ctx, name, "rc-abc-1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.Snapshots(ctx, name); len(list) != 0 {
		t.Fatalf("after delete: %+v", list)
	}
	if err := c.RestoreSnapshot(ctx, name, "rc-abc-1"); err == nil {
		t.Fatal("restore of a deleted snapshot succeeded")
	}
}
