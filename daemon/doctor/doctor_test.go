package doctor_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"remote/api"
	"remote/daemon/doctor"
	"remote/daemon/store"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning"
	"remote/provisioning/lxdconn"
)

func imageCheck(t *testing.T, prep *provisioning.Preparer) api.DoctorCheck {
	t.Helper()
	d := &doctor.Doctor{Images: prep}
	for _, c := range d.Check(context.Background()).Checks {
		if c.Name == "image" {
			return c
		}
	}
	return api.DoctorCheck{}
}

// TestDoctorDefaultImage: the doctor asks the real LXD for the default
// image ([lxd] image): present is ok; missing is a problem naming it (with
// make image for the development image); LXD
// unreachable adds no image line (the lxd line says why).
func TestDoctorDefaultImage(t *testing.T) {
	cl := testkit.LXD(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "remoted.db"), store.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	prep := func(image string, conn *lxdconn.Conn) *provisioning.Preparer {
		p, err := provisioning.New(provisioning.Options{LXD: conn, Projects: st, Image: image})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if c := imageCheck(t, prep("busybox", lxdconn.NewConn(cl))); c.Level != api.DoctorOK || c.Detail != "default image busybox ([lxd] image) is in LXD" {
		t.Errorf("busybox: %+v", c)
	}
	c := imageCheck(t, prep("no-such-default-image", lxdconn.NewConn(cl)))
	if c.Level != api.DoctorProblem || !strings.HasPrefix(c.Detail, `default image missing: image "no-such-default-image": no such image alias in LXD; new projects are refused`) {
		t.Errorf("missing: %+v", c)
	}
	// An LXD project with images of its own (none): an LXD where make
	// image never ran.
	name := testkit.ContainerName("docimg")
	if _, err := cl.Query(context.Background(), "POST", "/1.0/projects", map[string]any{"name": name,
		"config": map[string]string{"features.images": "true", "features.profiles": "false"}}, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cl.Query(context.Background(), "DELETE", "/1.0/projects/"+name, nil, "") })
	empty, err := lxdexec.Connect(context.Background(), lxdexec.Options{Project: name})
	if err != nil {
		t.Fatal(err)
	}
	c = imageCheck(t, prep("remote-dev", lxdconn.NewConn(empty)))
	if c.Level != api.DoctorProblem || !strings.HasPrefix(c.Detail, `default image missing: image "remote-dev": no such image alias in LXD (build and import it with `+"`make image`"+`);`) {
		t.Errorf("remote-dev missing: %+v", c)
	}
	if c := imageCheck(t, prep("busybox", lxdconn.NewConn(nil))); c != (api.DoctorCheck{}) {
		t.Errorf("unreachable: %+v", c)
	}
}
