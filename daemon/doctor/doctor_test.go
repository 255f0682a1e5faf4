package doctor_test

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/doctor"
	"remote/daemon/store"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning"
	"remote/provisioning/lxdconn"
	"remote/provisioning/warm"
	"remote/provisioning/warm/warmtest"
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

// TestDoctorWarmPool: with [projects] warm = 1 the doctor's warm line
// says how many containers are ready of how many; while creates fail
// (here an image LXD does not have) it warns with the failure.
func TestDoctorWarmPool(t *testing.T) {
	cl := testkit.LXD(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "remoted.db"), store.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conn := lxdconn.NewConn(cl)
	check := func(image string) api.DoctorCheck {
		t.Helper()
		prep, err := provisioning.New(provisioning.Options{LXD: conn, Projects: st, Image: image})
		if err != nil {
			t.Fatal(err)
		}
		prefix := testkit.ContainerName("docwarm") + "-"
		pool, err := warm.New(warm.Options{Size: 1, Prefix: prefix, Image: image, LXD: conn, Create: prep.CreateWarm("", nil),
			MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); pool.Run(ctx) }()
		defer func() {
			cancel()
			<-done
			for _, in := range must(cl.Instances(context.Background())) {
				if strings.HasPrefix(in.Name, prefix) {
					_ = cl.ForceDeleteInstance(context.Background(), in.Name)
				}
			}
		}()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if st := pool.Stats(); st.Ready == 1 || st.LastError != "" {
				break
			}
		}
		for _, c := range (&doctor.Doctor{Warm: pool}).Check(context.Background()).Checks {
			if c.Name == "warm" {
				return c
			}
		}
		return api.DoctorCheck{}
	}
	if c := check("busybox"); c.Level != api.DoctorOK || c.Detail != "1 of 1 warm containers ready, 0 being created; 0 projects claimed one, 0 found none ready" {
		t.Errorf("ready: %+v", c)
	}
	if c := check("no-such-warm-image"); c.Level != api.DoctorWarn || !strings.Contains(c.Detail, "0 of 1 warm containers ready") ||
		!strings.Contains(c.Detail, `the last create failed: create container "t-docwarm-`) {
		t.Errorf("failing: %+v", c)
	}
	if c := (&doctor.Doctor{}).Check(context.Background()); slices.ContainsFunc(c.Checks, func(c api.DoctorCheck) bool { return c.Name == "warm" }) {
		t.Errorf("no pool: a warm line: %+v", c.Checks)
	}
}

// TestDoctorWarmPoolHoldingItsRefill (issue 28): after a claim the pool
// creates nothing for its refill delay; the doctor says so and when the
// next create starts, rather than show an idle pool short of containers.
func TestDoctorWarmPoolHoldingItsRefill(t *testing.T) {
	pool, err := warm.New(warm.Options{Size: 1, LXD: warmtest.LXD{}, MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey,
		RefillDelay: time.Hour, Create: func(context.Context, string, map[string]string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	warmtest.Run(t, pool)
	for deadline := time.Now().Add(time.Minute); pool.Stats().Ready < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool: %+v", pool.Stats())
		}
	}
	if c := pool.Claim(context.Background(), "id", "p"); c == "" {
		t.Fatal("claim: none ready")
	}
	var got api.DoctorCheck
	for _, c := range (&doctor.Doctor{Warm: pool}).Check(context.Background()).Checks {
		if c.Name == "warm" {
			got = c
		}
	}
	want := "0 of 1 warm containers ready, 0 being created; 1 projects claimed one, 0 found none ready; the next create starts in 1h0m0s (1h0m0s after the latest claim)"
	if got.Level != api.DoctorOK || got.Detail != want {
		t.Errorf("holding: %+v\nwant detail %q", got, want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
