package projectapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
)

// forEachPool runs test once per storage path (subtests "dir" and
// "btrfs"); the btrfs pool missing fails in CI (testkit.RequirePool).
func forEachPool(t *testing.T, test func(*testing.T, testkit.Pool)) {
	for _, pool := range testkit.Pools() {
		t.Run(pool.Driver, func(t *testing.T) {
			testkit.RequirePool(t, pool)
			test(t, pool)
		})
	}
}

// assertRootPool checks in LXD that container's root disk is on pool:
// the root device names it and the pool holds the container's volume.
func assertRootPool(t *testing.T, e *projectEnv, container string, pool testkit.Pool) {
	t.Helper()
	want := pool.Name
	if want == "" {
		want = testkit.DirPool
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inst, _, err := e.lxd.Instance(ctx, container)
	if err != nil {
		t.Fatal(err)
	}
	if got := inst.ExpandedDevices["root"]["pool"]; got != want {
		t.Fatalf("container %s: root disk on pool %q, want %q", container, got, want)
	}
	if _, err := e.lxd.Query(ctx, "GET", "/1.0/storage-pools/"+want+"/volumes/container/"+container, nil, ""); err != nil {
		t.Fatalf("container %s has no volume on pool %q: %v", container, want, err)
	}
}

// TestProjectPool: a project names its storage pool; it is stored, shown
// and used for the container's root disk; the daemon's [projects] pool is
// the default; a pool LXD lacks, one [projects] allowed_pools does not
// list, or a malformed name, is a 400 naming it.
func TestProjectPool(t *testing.T) {
	btrfs := testkit.Pool{Name: testkit.BtrfsPool, Driver: "btrfs"}
	testkit.RequirePool(t, btrfs)
	e := newProjectEnv(t, projectEnvOpts{pools: []string{"btrfs", "nope"}})
	proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("pool"), Pool: "btrfs"})
	if proj.Pool != "btrfs" {
		t.Fatalf("created project %+v, want pool btrfs", proj)
	}
	status, body := e.do("GET", "/v1/projects/"+proj.Name, "alice", nil)
	var got api.Project
	if status != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Pool != "btrfs" {
		t.Fatalf("GET project: %d %s", status, body)
	}
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/start", "alice", nil); status != http.StatusOK {
		t.Fatalf("start: %d %s", status, body)
	}
	assertRootPool(t, e, proj.Container, btrfs)

	// No pool named: the profile's root disk, nothing stored.
	plain := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("nopool")})
	if plain.Pool != "" {
		t.Fatalf("project without a pool: %+v", plain)
	}

	for _, tc := range []struct{ pool, want string }{
		{"nope", `unknown pool "nope": LXD has no storage pool of that name`},
		{"../default", `invalid pool "../default": an LXD storage pool name (letters, digits, '.', '_', '-')`},
		{"default", `pool "default" is not allowed: want one of btrfs, nope ([projects] allowed_pools)`},
	} {
		name := uniqueProject("badpool")
		status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: name, Pool: tc.pool})
		if status != http.StatusBadRequest || errorMessage(t, body) != tc.want {
			t.Fatalf("pool %q: %d %s, want 400 %q", tc.pool, status, body, tc.want)
		}
		if status, _ := e.do("GET", "/v1/projects/"+name, "alice", nil); status != http.StatusNotFound {
			t.Fatalf("project with pool %q was stored: %d", tc.pool, status)
		}
	}

	// [projects] pool is the default; a request naming a pool wins.
	d := newProjectEnv(t, projectEnvOpts{defaultPool: "btrfs"})
	if p := d.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("defpool")}); p.Pool != "btrfs" {
		t.Fatalf("default pool: %+v", p)
	}
	if p := d.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("ownpool"), Pool: testkit.DirPool}); p.Pool != testkit.DirPool {
		t.Fatalf("named pool over the default: %+v", p)
	}
	bad := newProjectEnv(t, projectEnvOpts{defaultPool: "gone"})
	status, body = bad.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("gonepool")})
	if want := `unknown pool "gone": LXD has no storage pool of that name`; status != http.StatusBadRequest || errorMessage(t, body) != want {
		t.Fatalf("default pool missing in LXD: %d %s, want 400 %q", status, body, want)
	}
}
