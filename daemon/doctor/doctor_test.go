package doctor_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/doctor"
	"remote/daemon/prompt"
	"remote/daemon/store"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/codex"
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
		testkit.Eventually(t, 2*time.Minute, func() bool {
			st := pool.Stats()
			return st.Ready == 1 || st.LastError != ""
		}, "the pool ready or failing")
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

// TestDoctorWarmPoolHoldingItsRefill (docs/operating.md, "Warm containers"): after a claim the pool
// creates nothing for its refill delay; the doctor says so and when the
// next create starts, rather than show an idle pool short of containers.
func TestDoctorWarmPoolHoldingItsRefill(t *testing.T) {
	pool, err := warm.New(warm.Options{Size: 1, LXD: warmtest.LXD{}, MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey,
		RefillDelay: time.Hour, Create: func(context.Context, string, map[string]string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	warmtest.Run(t, pool)
	testkit.Eventually(t, time.Minute, func() error {
		if st := pool.Stats(); st.Ready < 1 {
			return fmt.Errorf("pool %+v", st)
		}
		return nil
	}, "a ready container")
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

// TestDoctorProfiles: the doctor asks the real LXD for each [lxd] profile
// new containers get (lxdconn.Profiles, what remoted wires): one LXD has
// is ok, one it lacks is a problem naming it and the key; LXD unreachable
// adds no profile line.
func TestDoctorProfiles(t *testing.T) {
	cl := testkit.LXD(t)
	missing := testkit.ContainerName("noprofile")
	profiles := func(conn *lxdconn.Conn) map[string]api.DoctorCheck {
		t.Helper()
		out := map[string]api.DoctorCheck{}
		d := &doctor.Doctor{Profiles: lxdconn.Profiles{Conn: conn, Names: []string{"default", missing}}}
		for _, c := range d.Check(context.Background()).Checks {
			if strings.HasPrefix(c.Name, "profile ") {
				out[c.Name] = c
			}
		}
		return out
	}
	got := profiles(lxdconn.NewConn(cl))
	if c := got["profile default"]; c.Level != api.DoctorOK || c.Detail != "in LXD ([lxd] profiles)" {
		t.Errorf("default: %+v", c)
	}
	want := fmt.Sprintf("[lxd] profiles names %q, which LXD does not have: new containers cannot be made (create it, or remove it from [lxd] profiles)", missing)
	if c := got["profile "+missing]; c.Level != api.DoctorProblem || c.Detail != want {
		t.Errorf("missing: %+v\nwant %q", c, want)
	}
	if got := profiles(lxdconn.NewConn(nil)); len(got) != 0 {
		t.Errorf("unreachable: %+v", got)
	}
}

// TestAttackDoctorForgesNameNoProject: one line per [forges."<host>"] table with its kind
// and API and, for the projects (in the real store) whose repository is
// on that host, how many have their token secret set, name one not set
// or name none (a warning: their pushes and pull requests are refused);
// a repository host without a table is a warning naming the key. Any
// allowed peer reads the doctor: the lines never carry a secret's value
// or a project's name (another user's).
func TestAttackDoctorForgesNameNoProject(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "remoted.db"), store.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const token = "ghp-token-value-never-shown"
	for _, p := range []api.Project{
		{Name: "alpha-secret-project", Repo: &api.ProjectRepo{URL: "https://github.com/o/a.git", TokenSecret: "GH_TOKEN"}},
		{Name: "beta", Repo: &api.ProjectRepo{URL: "https://github.com/o/b.git", TokenSecret: "GH_TOKEN"}},
		{Name: "gamma", Repo: &api.ProjectRepo{URL: "https://github.com/o/c.git"}},
		{Name: "delta", Repo: &api.ProjectRepo{URL: "https://gitea.example.com:3000/o/d.git", TokenSecret: "T"}},
		{Name: "epsilon", Repo: &api.ProjectRepo{URL: "https://git.internal/o/e.git", TokenSecret: "T"}},
		{Name: "plain"},
	} {
		p.Owner, p.Container, p.Status, p.CreatedAt = "alice", "remote-"+p.Name, "missing", time.Now()
		if err := st.CreateProject(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range [][2]string{{"alpha-secret-project", "GH_TOKEN"}, {"delta", "T"}} {
		if err := st.PutSecret(s[0], s[1], token); err != nil {
			t.Fatal(err)
		}
	}
	d := &doctor.Doctor{Uses: st, Forges: []doctor.Forge{
		{Host: "github.com", Kind: "github", API: "https://api.github.com"},
		{Host: "gitea.example.com:3000", Kind: "gitea", API: "https://gitea.example.com:3000/api/v1"},
		{Host: "gitlab.com", Kind: "gitlab", API: "https://gitlab.com/api/v4"},
	}}
	var got []api.DoctorCheck
	for _, c := range d.Check(context.Background()).Checks {
		if strings.HasPrefix(c.Name, "forge ") {
			got = append(got, c)
		}
	}
	want := []api.DoctorCheck{
		{Name: "forge github.com", Level: api.DoctorWarn, Detail: "github at https://api.github.com; 3 projects with a repository here, 1 with its token secret set, 1 naming a token secret that is not set (remotectl project secret set NAME KEY), 1 without repo.tokenSecret: their pushes and pull requests are refused"},
		{Name: "forge gitea.example.com:3000", Level: api.DoctorOK, Detail: "gitea at https://gitea.example.com:3000/api/v1; 1 project with a repository here, 1 with its token secret set"},
		{Name: "forge gitlab.com", Level: api.DoctorOK, Detail: "gitlab at https://gitlab.com/api/v4; no project's repository is on this host"},
		{Name: "forge git.internal", Level: api.DoctorWarn, Detail: `1 project with a repository on git.internal, which has no [forges."git.internal"] table: their pull requests are refused`},
	}
	if !slices.Equal(got, want) {
		t.Errorf("forge lines:\n%+v\nwant\n%+v", got, want)
	}
	for _, c := range got {
		if strings.Contains(c.Detail, token) || strings.Contains(c.Detail, "alpha") {
			t.Errorf("a forge line shows a secret's value or a project's name: %+v", c)
		}
	}
}

// TestDoctorProviderUse: the real Codex adapter with a binary that is not
// there: unused, a warning (every provider is enabled by default); the
// default provider of a project, or of a chat, a problem saying what
// needs it. With no enabled provider ready a "providers" problem says no
// chat can run.
func TestDoctorProviderUse(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "remoted.db"), store.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prompt.NewRegistry()
	reg.Set(map[providers.ProviderID]providers.Provider{
		providers.Codex: codex.New(providers.AdapterConfig{Binary: "codex-not-installed-here"}),
	}, map[providers.ProviderID]bool{providers.Claude: true}, []providers.ProviderID{providers.Claude, providers.Codex})
	d := &doctor.Doctor{Registry: reg, Uses: st}
	lines := func() map[string]api.DoctorCheck {
		out := map[string]api.DoctorCheck{}
		for _, c := range d.Check(context.Background()).Checks {
			out[c.Name] = c
		}
		return out
	}
	got := lines()
	if c := got["provider codex"]; c.Level != api.DoctorWarn || !strings.HasSuffix(c.Detail, "or set [providers.codex] binary (no chat or project uses it; [providers.codex] enabled = false leaves it out)") {
		t.Errorf("unused: %+v", c)
	}
	if c := got["provider claude"]; c.Level != api.DoctorOK || c.Detail != "disabled in config" {
		t.Errorf("disabled: %+v", c)
	}
	if c := got["providers"]; c.Level != api.DoctorProblem || !strings.HasPrefix(c.Detail, "no enabled provider is ready: no chat can run") {
		t.Errorf("none ready: %+v", c)
	}
	if err := st.CreateProject(api.Project{Name: "p", Owner: "alice", Container: "remote-p", Status: "missing", Provider: "codex", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if c := lines()["provider codex"]; c.Level != api.DoctorProblem || !strings.HasSuffix(c.Detail, "(needed: 1 project with it as default provider)") {
		t.Errorf("a project's default: %+v", c)
	}
	for _, id := range []string{"c0ffee000001", "c0ffee000002"} {
		if err := st.CreateChat(api.Chat{ID: id, Owner: "bob", Provider: "codex", Cwd: "/tmp"}); err != nil {
			t.Fatal(err)
		}
	}
	if c := lines()["provider codex"]; c.Level != api.DoctorProblem || !strings.HasSuffix(c.Detail, "(needed: 2 chats of it, 1 project with it as default provider)") {
		t.Errorf("chats and a project: %+v", c)
	}
	if rep := d.Check(context.Background()); rep.OK {
		t.Error("report OK with a provider a chat needs missing")
	}
}
