package projectapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"remote/api"
	"remote/daemon/egress"
	"remote/internal/testkit"
	"remote/providers"
	"remote/provisioning/checkpoint"
	"remote/provisioning/netdev"
)

// setCaps is the operator lowering [projects.limits] and restarting the
// daemon: the project routes and the preparer get the new caps, the
// stored projects and their containers stay as they were.
func (e *projectEnv) setCaps(t *testing.T, caps api.ProjectLimits) {
	t.Helper()
	o := e.routes.o
	o.Limits = caps
	fresh, err := NewProjects(o)
	if err != nil {
		t.Fatal(err)
	}
	e.routes.o = fresh.o // the routes keep the server's chats and hub
}

func (e *projectEnv) project(t *testing.T, name string) api.Project {
	t.Helper()
	status, body := e.do("GET", "/v1/projects/"+name, "alice", nil)
	var p api.Project
	if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("GET project %s: %d %s", name, status, body)
	}
	return p
}

// lxdLimits is what LXD holds as the container's memory and process
// limits.
func (e *projectEnv) lxdLimits(t *testing.T, container string) (memory, processes string) {
	t.Helper()
	inst, _, err := e.lxd.Instance(context.Background(), container)
	if err != nil {
		t.Fatal(err)
	}
	return inst.Config["limits.memory"], inst.Config["limits.processes"]
}

// TestAttackLoweredCapClamps: the operator lowers [projects.limits]
// below what a project was given. Its owner tries to keep the old limits
// by restarting the container (a stop and a prompt), by forking a chat
// with the container at a checkpoint taken before (the copy held the old
// limits), and by restoring that checkpoint (the snapshot's config holds
// them). Each time the container gets the lowered caps before it runs:
// the restarted project's limits are clamped in LXD and in its record
// (the API shows them) and its chat is told (system/limits_clamped); the
// fork's project is made within the caps and its chat is told; a restore
// keeps the clamped limits.
func TestAttackLoweredCapClamps(t *testing.T) {
	high := api.ProjectLimits{Memory: "1GiB", Processes: 500}
	low := api.ProjectLimits{Memory: "256MiB", Processes: 100}
	e := newProjectEnv(t, projectEnvOpts{limits: high, providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("caps")})
	if proj.Limits == nil || *proj.Limits != high {
		t.Fatalf("created limits %+v, want the caps %+v", proj.Limits, high)
	}
	e.startProject(t, proj.Name)
	t1 := e.prompt(t, chat.ID, "alice", "t1")
	if !hasType(t1, api.EventCheckpoint) {
		t.Fatalf("t1: no checkpoint: %v", types(t1))
	}
	cp1 := checkpoint.Name(chat.ID, t1[0].Seq)

	e.setCaps(t, low)
	// Running: it keeps its limits until its next start.
	if mem, procs := e.lxdLimits(t, proj.Container); mem != "1GiB" || procs != "500" {
		t.Fatalf("running container after the caps were lowered: memory %q processes %q, want unchanged", mem, procs)
	}

	// Fork at t1 with the container: the copy is within the caps.
	status, body := e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": t1[len(t1)-1].Seq, "withContainer": true})
	var fork api.Chat
	if status != http.StatusCreated || json.Unmarshal(body, &fork) != nil {
		t.Fatalf("fork: %d %s", status, body)
	}
	fp := e.project(t, fork.Project)
	testkit.CleanupContainer(t, testkit.LXD(t), fp.Container)
	if fp.Limits == nil || *fp.Limits != low {
		t.Fatalf("forked project's limits %+v, want the lowered caps %+v", fp.Limits, low)
	}
	if mem, procs := e.lxdLimits(t, fp.Container); mem != "256MiB" || procs != "100" {
		t.Fatalf("forked container: memory %q processes %q, want the lowered caps", mem, procs)
	}
	if !slices.ContainsFunc(e.events(fork.ID), func(ev api.Event) bool {
		return ev.Type == api.EventSystem && ev.Subtype == api.SubtypeLimitsClamped && ev.Message != ""
	}) {
		t.Fatalf("fork chat not told its limits were lowered: %v %v", types(e.events(fork.ID)), subtypes(e.events(fork.ID)))
	}

	// Restart the original: clamped before it runs, and said so.
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/stop", "alice", nil); status != http.StatusOK {
		t.Fatalf("stop: %d %s", status, body)
	}
	t2 := e.prompt(t, chat.ID, "alice", "t2")
	i := slices.IndexFunc(t2, func(ev api.Event) bool { return ev.Type == api.EventSystem && ev.Subtype == api.SubtypeLimitsClamped })
	if i < 0 || !hasType(t2, api.EventComplete) {
		t.Fatalf("t2 after the restart: events %v %v, want system/limits_clamped", types(t2), subtypes(t2))
	}
	var data struct {
		Project string             `json:"project"`
		Limits  *api.ProjectLimits `json:"limits"`
		Clamped []struct{ Field, Value, Cap string }
	}
	if err := json.Unmarshal(t2[i].Data, &data); err != nil || data.Project != proj.Name || data.Limits == nil || *data.Limits != low || len(data.Clamped) != 2 {
		t.Fatalf("limits_clamped data %s (%v)", t2[i].Data, err)
	}
	if mem, procs := e.lxdLimits(t, proj.Container); mem != "256MiB" || procs != "100" {
		t.Fatalf("restarted container: memory %q processes %q, want the lowered caps", mem, procs)
	}
	if got := e.project(t, proj.Name); got.Limits == nil || *got.Limits != low {
		t.Fatalf("project after the restart shows limits %+v, want %+v", got.Limits, low)
	}

	// Restore the checkpoint taken under the old caps: the limits stay.
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/checkpoints/"+cp1+"/restore", "alice", nil); status != http.StatusOK {
		t.Fatalf("restore: %d %s", status, body)
	}
	if mem, procs := e.lxdLimits(t, proj.Container); mem != "256MiB" || procs != "100" {
		t.Fatalf("container after restoring %s: memory %q processes %q, want the lowered caps", cp1, mem, procs)
	}
}

// TestAttackForkOpensNetwork: the owner of an allowlist project forks a
// chat with its container, hoping the copy comes out open (a project
// stored without a network is open) or keeps the original's egress
// socket. Defences: the fork copies the original's network, and the
// copy's devices are replaced by its own (its own socket, no NIC) before
// anything starts it.
func TestAttackForkOpensNetwork(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{network: &egress.Config{}, providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("netfork"),
		Network: &api.ProjectNetwork{Mode: api.NetworkAllowlist, Allow: []string{"pypi.org"}}})
	e.startProject(t, proj.Name)
	t1 := e.prompt(t, chat.ID, "alice", "t1")
	if !hasType(t1, api.EventCheckpoint) {
		t.Fatalf("t1: no checkpoint: %v", types(t1))
	}
	orig, _, err := e.lxd.Instance(context.Background(), proj.Container)
	if err != nil {
		t.Fatal(err)
	}
	if orig.Devices[netdev.Device]["connect"] == "" {
		t.Fatalf("the allowlist project's container has no egress device: %v", orig.Devices)
	}
	status, body := e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": t1[len(t1)-1].Seq, "withContainer": true})
	var fork api.Chat
	if status != http.StatusCreated || json.Unmarshal(body, &fork) != nil {
		t.Fatalf("fork: %d %s", status, body)
	}
	fp := e.project(t, fork.Project)
	testkit.CleanupContainer(t, e.lxd, fp.Container)
	if fp.Network == nil || fp.Network.Mode != api.NetworkAllowlist || !slices.Equal(fp.Network.Allow, []string{"pypi.org"}) {
		t.Fatalf("forked project's network %+v, want the original's", fp.Network)
	}
	inst, _, err := e.lxd.Instance(context.Background(), fp.Container)
	if err != nil {
		t.Fatal(err)
	}
	dev := inst.Devices[netdev.Device]
	if dev["connect"] == "" || dev["connect"] == orig.Devices[netdev.Device]["connect"] {
		t.Fatalf("forked container's egress device %v, want its own socket (the original's is %v)", dev, orig.Devices[netdev.Device])
	}
	if inst.Config["environment.https_proxy"] == "" {
		t.Fatalf("forked container has no proxy environment: %v", inst.Config)
	}
}
