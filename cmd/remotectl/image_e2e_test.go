package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
)

// TestEndToEndDevImage: on a remoted with no [lxd] image, a project
// created with no image starts from the development image `make image`
// imported (remote-dev), and git, python3, node and cc run in it through
// the exec API; `remotectl image import` of the same tarball under
// another alias works (progress on stderr) and `remotectl image list`
// shows both aliases on the one image, the default marked.
func TestEndToEndDevImage(t *testing.T) {
	tarball := testkit.DevImageTarball(t)
	cl := testkit.LXD(t)
	e := startE2EImage(t, "", "")
	name := strings.TrimPrefix(testkit.ContainerName("dev"), "t-")
	testkit.CleanupProjectContainers(t, cl, name)
	e.must("project", "create", name)
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"git", "--version"}, "git version 2."},
		{[]string{"python3", "--version"}, "Python 3."},
		{[]string{"node", "--version"}, "v18."},
		{[]string{"cc", "--version"}, "cc (Debian 12"},
	} {
		r := e.run("", append([]string{"project", "exec", name, "--"}, c.argv...)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, c.want) {
			t.Errorf("%v: exit %d stdout %q stderr %q, want %q...", c.argv, r.code, r.stdout, r.stderr, c.want)
		}
	}
	dev, err := cl.ImageAlias(context.Background(), testkit.DevImage)
	if err != nil {
		t.Fatal(err)
	}
	cs := testkit.ProjectContainers(t, cl, name)
	if len(cs) != 1 {
		t.Fatalf("project %s has containers %v", name, cs)
	}
	inst, _, err := cl.Instance(context.Background(), cs[0])
	if err != nil || inst.Config["volatile.base_image"] != dev.Target {
		t.Fatalf("container %s base image %q (%v), want remote-dev's %s", cs[0], inst.Config["volatile.base_image"], err, dev.Target)
	}

	// The same tarball under another alias, through the daemon.
	alias := testkit.ContainerName("devcopy")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cl.Query(ctx, "DELETE", "/1.0/images/aliases/"+alias, nil, "") // the image is remote-dev's: kept
	})
	fi, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	r := e.run("", "image", "import", tarball, "-alias", alias)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "imported "+alias+": fingerprint "+dev.Target[:12]+", ") {
		t.Fatalf("image import: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "importing "+tarball+" (") || !strings.Contains(r.stderr, ") as "+alias+"\n") {
		t.Errorf("import progress: %q", r.stderr)
	}
	t.Logf("imported %d bytes: %s%s", fi.Size(), r.stderr, r.stdout)
	out := e.must("image", "list")
	for _, want := range []string{
		`(?m)^remote-dev \*\s+` + dev.Target[:12] + `\s+\d+\.\d MB\s+Remote development image`,
		`(?m)^` + alias + `\s+` + dev.Target[:12] + `\s`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("image list lacks %s:\n%s", want, out)
		}
	}
	e.must("project", "rm", name, "-purge")
}
