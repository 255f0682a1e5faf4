package projectapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/testkit"
	"remote/providers"
	"remote/provisioning"
	"remote/provisioning/lxdconn"
	"remote/provisioning/warm"
	"remote/provisioning/warm/warmtest"
)

// startWarm runs the env's warm pool ([projects] warm = o.warm; nil when
// 0) until the test ends, then deletes the containers left in it.
func startWarm(t testing.TB, conn *lxdconn.Conn, prep *provisioning.Preparer, o projectEnvOpts, log hclog.Logger) *warm.Pool {
	t.Helper()
	if o.warm == 0 {
		return nil
	}
	prefix := cmp.Or(o.warmPrefix, testkit.ContainerName("warm")+"-")
	t.Cleanup(func() { removeWarm(t, prefix) }) // after the pool's Run ended
	return newWarm(t, conn, prep, o.warm, prefix, o.defaultPool, o.profiles, log)
}

// newWarm starts a pool until the test ends (the returned pool's Run ends
// first).
func newWarm(t testing.TB, conn *lxdconn.Conn, prep *provisioning.Preparer, size int, prefix, storagePool string, profiles []string, log hclog.Logger) *warm.Pool {
	t.Helper()
	pool, err := warm.New(warm.Options{Size: size, Prefix: prefix, Image: prep.DefaultImage(), Pool: storagePool, Profiles: profiles,
		LXD: conn, Create: prep.CreateWarm(storagePool, func() []providers.ProviderID { return []providers.ProviderID{providers.Claude} }), MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey, Logger: log.Named("warm")})
	if err != nil {
		t.Fatal(err)
	}
	warmtest.Run(t, pool)
	return pool
}

// removeWarm deletes every container named with prefix.
func removeWarm(t testing.TB, prefix string) {
	cl := testkit.LXD(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	all, err := cl.Instances(ctx)
	if err != nil {
		t.Errorf("list containers: %v", err)
		return
	}
	for _, in := range all {
		if strings.HasPrefix(in.Name, prefix) {
			if err := cl.ForceDeleteInstance(ctx, in.Name); err != nil {
				t.Errorf("cleanup: delete warm container %s: %v", in.Name, err)
			}
		}
	}
}

// waitWarm waits until the pool holds n ready containers.
func waitWarm(t testing.TB, p *warm.Pool, n int) {
	t.Helper()
	testkit.Eventually(t, 3*time.Minute, func() error {
		if st := p.Stats(); st.Ready < n {
			return fmt.Errorf("pool %+v", st)
		}
		return nil
	}, "%d ready in the warm pool", n)
}

// warmReady lists the containers of prefix LXD has ready in a pool.
func warmReady(t testing.TB, e *projectEnv, prefix string) []string {
	t.Helper()
	all, err := e.lxd.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range all {
		if strings.HasPrefix(in.Name, prefix) && in.Config[warm.Key] == warm.Ready {
			out = append(out, in.Name)
		}
	}
	return out
}

// TestWarmContainers (docs/operating.md, "Warm containers"): with [projects] warm = 1 a new project
// on the default image and pool is answered with a container that
// already runs, marked with the project's id, name and "claimed"; the pool
// refills with another container; the project's first turn starts
// nothing and takes no checkpoint (nothing of the project was in the
// container), the second takes one; a project on another pool gets a
// container of its own as without a pool.
func TestWarmContainers(t *testing.T) {
	prefix := testkit.ContainerName("warm") + "-"
	e := newProjectEnv(t, projectEnvOpts{warm: 1, warmPrefix: prefix, providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	waitWarm(t, e.warm, 1)
	ready := warmReady(t, e, prefix)
	if len(ready) != 1 {
		t.Fatalf("warm containers in LXD: %v, want one", ready)
	}
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("warm")})
	if proj.Container != ready[0] || proj.Status != provisioning.StatusRunning {
		t.Fatalf("new project: container %q status %q, want the warm %q running", proj.Container, proj.Status, ready[0])
	}
	inst, _, err := e.lxd.Instance(context.Background(), proj.Container)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != "Running" || inst.Config[provisioning.MarkerKey] != proj.ID || inst.Config[provisioning.NameKey] != proj.Name ||
		inst.Config["user.remote.warm"] != "claimed" || inst.Config["boot.autostart"] != "true" {
		t.Fatalf("claimed container: status %s config %v", inst.Status, inst.Config)
	}
	waitWarm(t, e.warm, 1)
	if again := warmReady(t, e, prefix); len(again) != 1 || again[0] == proj.Container {
		t.Fatalf("after the claim the pool holds %v, want one other than %s", again, proj.Container)
	}

	t1 := e.prompt(t, chat.ID, "alice", "t1")
	if hasType(t1, api.EventCheckpoint) || !hasType(t1, api.EventComplete) || slices.Contains(subtypes(t1), "container_starting") {
		t.Fatalf("first turn on a warm container: events %v %v", types(t1), subtypes(t1))
	}
	snaps, err := e.lxd.Snapshots(context.Background(), proj.Container)
	if err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots after the first turn: %v %v, want none", snaps, err)
	}
	if inst, _, err = e.lxd.Instance(context.Background(), proj.Container); err != nil || inst.Config["user.remote.warm"] != "used" {
		t.Fatalf("after the first turn: %v %v, want user.remote.warm used", inst.Config, err)
	}
	t2 := e.prompt(t, chat.ID, "alice", "t2")
	if !hasType(t2, api.EventCheckpoint) {
		t.Fatalf("second turn: no checkpoint: %v", types(t2))
	}

	other := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("cold"), Pool: testkit.BtrfsPool})
	if other.Container != ContainerName(other.Name, other.ID) || other.Status != provisioning.StatusMissing {
		t.Fatalf("project on another pool: container %q status %q, want its own, missing", other.Container, other.Status)
	}
	if st := e.warm.Stats(); st.Claims != 1 || st.Misses != 0 {
		t.Fatalf("pool stats %+v, want one claim and no miss (another pool's project does not count)", st)
	}
}

// TestAttackWarmContainerNeverReused (docs/threat-model.md, "warm
// containers"): two projects created at once get two different warm
// containers; a container a project had (deleted without purge: it stays
// in LXD, marked) is never adopted by the pool of a restarted daemon, so
// no later project is handed the files an earlier one left.
func TestAttackWarmContainerNeverReused(t *testing.T) {
	prefix := testkit.ContainerName("warmatk") + "-"
	e := newProjectEnv(t, projectEnvOpts{warm: 2, warmPrefix: prefix, providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	waitWarm(t, e.warm, 2)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  []api.Project
		name = uniqueProject("wa")
	)
	for _, n := range []string{name + "-a", name + "-b"} {
		wg.Go(func() {
			p := e.createProject(t, "alice", api.CreateProjectRequest{Name: n})
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != 2 || got[0].Container == got[1].Container || !strings.HasPrefix(got[0].Container, prefix) || !strings.HasPrefix(got[1].Container, prefix) {
		t.Fatalf("two projects at once: %+v, want two different warm containers", got)
	}
	// The first project leaves a file, is deleted without purge: its
	// container stays, marked as its own.
	a := got[0]
	testkit.PushFile(t, e.lxd, a.Container, "/tmp/a-work.txt", "a's work")
	if status, body := e.do("DELETE", "/v1/projects/"+a.Name, "alice", nil); status != http.StatusNoContent {
		t.Fatalf("delete project: %d %s", status, body)
	}
	// A restarted daemon's pool: it adopts only ready, unclaimed
	// containers, so it creates two new ones.
	pool := newWarm(t, e.conn, e.prep, 2, prefix, "", nil, hclog.NewNullLogger())
	waitWarm(t, pool, 2)
	for i := range 2 {
		c := pool.Claim(context.Background(), "id"+string(rune('0'+i)), "later")
		if c == "" || c == a.Container || c == got[1].Container {
			t.Fatalf("claim %d after restart: %q; the deleted project's container is %s", i, c, a.Container)
		}
	}
}

// TestWarmContainerHasStoreCLI: a warm container has the store's CLI
// mounted before any project claims it, so a new project's first
// preparation finds it there (docs/benchmarks.md, warm container: the mount was 170 ms of the
// first prompt).
func TestWarmContainerHasStoreCLI(t *testing.T) {
	st := testStore(t, providers.Claude)
	e, _, _ := claudeEnv(t, st, false, false, func(o *projectEnvOpts) { o.warm = 1 })
	waitWarm(t, e.warm, 1)
	all, err := e.lxd.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, in := range all {
		if in.Config[warm.Key] != warm.Ready || !strings.HasPrefix(in.Name, "t-warm-") {
			continue
		}
		for name, d := range in.Devices {
			if strings.HasPrefix(name, "remote-cli-claude-") && d["readonly"] == "true" {
				found = append(found, in.Name+":"+name)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("warm containers with the store's claude device: %v, want one", found)
	}
}

// TestWarmDrainedOnResize (docs/operating.md, "Warm containers"): a reload
// lowering [projects] warm (the pool's SetSize) deletes the ready
// containers beyond it from LXD, down to none at 0, and the pool then
// hands none out.
func TestWarmDrainedOnResize(t *testing.T) {
	prefix := testkit.ContainerName("warmdrain") + "-"
	e := newProjectEnv(t, projectEnvOpts{warm: 2, warmPrefix: prefix, providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	waitWarm(t, e.warm, 2)
	inLXD := func() []string {
		all, err := e.lxd.Instances(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range all {
			if strings.HasPrefix(in.Name, prefix) {
				out = append(out, in.Name)
			}
		}
		return out
	}
	for _, size := range []int{1, 0} {
		if err := e.warm.SetSize(size); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 3*time.Minute, func() error {
			if got := inLXD(); len(got) != size {
				return fmt.Errorf("containers %v", got)
			}
			return nil
		}, "%d warm containers left in LXD", size)
		if st := e.warm.Stats(); st.Ready != size {
			t.Errorf("pool at size %d: %+v", size, st)
		}
	}
	if c := e.warm.Claim(context.Background(), "id-x", "x"); c != "" {
		t.Errorf("a claim at size 0 got %s", c)
	}
}
