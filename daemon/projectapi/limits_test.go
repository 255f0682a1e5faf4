package projectapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"remote/api"
)

// TestProjectLimits: limits given at creation reach LXD when the container
// is made and are shown; a memory hog in a 64 MiB container is killed
// inside it while the daemon goes on answering; limits.processes stops a
// fork bomb; PATCH applies new limits live; bad limits are refused by name.
func TestProjectLimits(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{})
	proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("limits"),
		Limits: &api.ProjectLimits{Memory: "64MiB", Processes: 30, CPU: "1"}})
	if proj.Limits == nil || *proj.Limits != (api.ProjectLimits{Memory: "64MiB", Processes: 30, CPU: "1"}) {
		t.Fatalf("created limits %+v", proj.Limits)
	}
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/start", "alice", nil); status != http.StatusOK {
		t.Fatalf("start: %d %s", status, body)
	}
	inst, _, err := e.lxd.Instance(context.Background(), proj.Container)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"limits.memory": "64MiB", "limits.processes": "30", "limits.cpu": "1", "limits.memory.swap": "false"} {
		if inst.Config[k] != v {
			t.Fatalf("container %s = %q, want %q", k, inst.Config[k], v)
		}
	}
	// The memory hog: 200 MiB in one buffer, in a 64 MiB container.
	out := lxdShell(t, e.lxd, proj.Container, "dd if=/dev/zero of=/dev/null bs=200M count=1 2>/dev/null; echo rc=$?")
	if strings.TrimSpace(out) != "rc=137" {
		t.Fatalf("memory hog: %q, want it killed (rc=137)", out)
	}
	if status, body := e.do("GET", "/v1/projects/"+proj.Name, "alice", nil); status != http.StatusOK {
		t.Fatalf("daemon after the memory hog: %d %s", status, body)
	}
	// The fork bomb: 100 sleeps under a 30-process limit.
	// The shell stops at its first refused fork; the report uses only
	// builtins, since nothing can fork while the sleeps live.
	out = lxdShell(t, e.lxd, proj.Container, `sh -c 'i=0; while [ $i -lt 100 ]; do sleep 2 & i=$((i+1)); done; echo all-started' 2>/tmp/err; `+
		`echo rc=$?; while read -r l; do echo "$l"; done </tmp/err`)
	if want := "rc=2\nsh: can't fork: Resource temporarily unavailable"; strings.TrimSpace(out) != want {
		t.Fatalf("fork bomb under limits.processes=30: %q, want %q", out, want)
	}
	// PATCH: live.
	status, body := e.do("PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Limits: &api.ProjectLimits{Memory: "128MiB", Disk: "1GiB"}})
	var got api.Project
	if status != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Limits == nil || *got.Limits != (api.ProjectLimits{Memory: "128MiB", Disk: "1GiB"}) {
		t.Fatalf("patch: %d %s", status, body)
	}
	inst, _, _ = e.lxd.Instance(context.Background(), proj.Container)
	if inst.Config["limits.memory"] != "128MiB" || inst.Config["limits.processes"] != "" || !inst.Running() ||
		inst.Devices["root"]["size"] != "1GiB" || inst.Devices["root"]["pool"] == "" {
		t.Fatalf("after patch: memory %q processes %q root %v status %s", inst.Config["limits.memory"], inst.Config["limits.processes"], inst.Devices["root"], inst.Status)
	}
	status, body = e.do("GET", "/v1/projects/"+proj.Name, "alice", nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"limits":{"memory":"128MiB","disk":"1GiB"}`) {
		t.Fatalf("GET after patch: %d %s", status, body)
	}
	for _, tc := range []struct {
		l    api.ProjectLimits
		want string
	}{
		{api.ProjectLimits{Memory: "lots"}, `invalid limits.memory "lots": a size like "2GiB" or a percentage like "50%"`},
		{api.ProjectLimits{CPU: "two"}, `invalid limits.cpu "two": a CPU count like "2" or a set like "0-1,3"`},
		{api.ProjectLimits{Processes: -1}, `invalid limits.processes -1: 0 (no limit) to 4194304`},
		{api.ProjectLimits{Disk: "1 GiB"}, `invalid limits.disk "1 GiB": a size like "10GiB"`},
	} {
		status, body := e.do("PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Limits: &tc.l})
		if status != http.StatusBadRequest || errorMessage(t, body) != tc.want {
			t.Fatalf("patch %+v: %d %s, want 400 %q", tc.l, status, body, tc.want)
		}
	}
	if status, _ := e.do("PATCH", "/v1/projects/"+proj.Name, "bob", api.PatchProjectRequest{Limits: &api.ProjectLimits{Memory: "1GiB"}}); status != http.StatusNotFound {
		t.Fatalf("bob patching alice's project: %d", status)
	}
}
