package projectapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"remote/api"
)

// rootHostUID returns the host uid that root (uid 0) of container maps to:
// from LXD's volatile.idmap.current, checked against the kernel's
// /proc/<init pid>/uid_map of the running container.
func rootHostUID(t *testing.T, e *projectEnv, container string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inst, _, err := e.lxd.Instance(ctx, container)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Config["security.idmap.isolated"] != "true" {
		t.Errorf("container %s: security.idmap.isolated = %q, want \"true\"", container, inst.Config["security.idmap.isolated"])
	}
	var maps []struct {
		Isuid    bool
		Hostid   int64
		Nsid     int64
		Maprange int64
	}
	if err := json.Unmarshal([]byte(inst.Config["volatile.idmap.current"]), &maps); err != nil {
		t.Fatalf("container %s: volatile.idmap.current %q: %v", container, inst.Config["volatile.idmap.current"], err)
	}
	host := int64(-1)
	for _, m := range maps {
		if m.Isuid && m.Nsid == 0 {
			host = m.Hostid
		}
	}
	resp, err := e.lxd.Query(ctx, "GET", "/1.0/instances/"+container+"/state", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var state struct{ Pid int }
	if err := json.Unmarshal(resp.Metadata, &state); err != nil || state.Pid <= 0 {
		t.Fatalf("container %s state: pid %d %v", container, state.Pid, err)
	}
	uidMap, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", state.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(uidMap)); len(f) < 3 || f[0] != "0" || f[1] != fmt.Sprint(host) || f[2] != "65536" {
		t.Fatalf("container %s: init's uid_map %q, want 0 %d 65536 (volatile.idmap.current %s)", container, uidMap, host, inst.Config["volatile.idmap.current"])
	}
	return host
}

// TestProjectContainersIsolatedUIDs: root in one project's container is
// not the host uid root is in another's (security.idmap.isolated, the
// default where LXD has room): an escape from one container owns none of
// the other's files or processes. The kernel's uid_map of each container's
// init shows it.
func TestProjectContainersIsolatedUIDs(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{})
	var hosts []int64
	for _, name := range []string{uniqueProject("idmapa"), uniqueProject("idmapb")} {
		proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Checkpoints: "off"})
		if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/start", "alice", nil); status != http.StatusOK {
			t.Fatalf("start %s: %d %s", name, status, body)
		}
		hosts = append(hosts, rootHostUID(t, e, proj.Container))
	}
	if d := hosts[0] - hosts[1]; d > -65536 && d < 65536 {
		t.Fatalf("the two projects' containers map root to host uids %d and %d: overlapping ranges of 65536", hosts[0], hosts[1])
	}
}
