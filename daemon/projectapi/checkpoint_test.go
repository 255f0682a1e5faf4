package projectapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/runner"
	"remote/provisioning"
	"remote/provisioning/checkpoint"
	"remote/provisioning/lxdconn"
)

// fileAgent is a provider whose "CLI" is a shell in the project's
// container that writes /root/<prompt text> each turn, as an agent
// changing files would.
func fileAgent(ports providers.AdapterConfig) providers.Provider {
	return &fakeProvider{id: providers.Claude, caps: providers.Capabilities{Resume: true}, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		_, launcher, err := runner.PrepareProject(ctx, ports, providers.Claude, errors.New("not wired"), req, emit)
		if err != nil {
			return err
		}
		name := req.Prompt[strings.LastIndexByte(req.Prompt, '\n')+1:]
		proc, err := launcher.Start(ctx, providers.Command{Path: "sh", Dir: "/", Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
			Args: []string{"-c", `echo x > /root/"$1"; ls /root | tr '\n' ' '`, "sh", name}})
		if err != nil {
			return err
		}
		go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
		out, _ := io.ReadAll(proc.Stdout())
		if err := proc.Wait(); err != nil {
			return err
		}
		emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "s-" + req.ConversationID})
		emit(providers.Event{Type: providers.EventAssistantDelta, Text: "resume=" + req.ResumeID + " files=" + string(out), MessageID: "m1"})
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
}

// failingSnapshots is the preparer's LXD with snapshots that always fail,
// as on a full pool.
type failingSnapshots struct{ *lxdconn.Conn }

func (failingSnapshots) CreateSnapshot(context.Context, string, string, time.Time) error {
	return errors.New("no space left on device")
}

func newFileChat(t *testing.T, e *projectEnv, req api.CreateProjectRequest) (api.Project, api.Chat) {
	t.Helper()
	proj := e.createProject(t, "alice", req)
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: proj.Name})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatal(err)
	}
	return proj, chat
}

func (e *projectEnv) checkpointList(t *testing.T, project string) []api.Checkpoint {
	t.Helper()
	status, body := e.do("GET", "/v1/projects/"+project+"/checkpoints", "alice", nil)
	if status != http.StatusOK {
		t.Fatalf("checkpoints: %d %s", status, body)
	}
	var list []api.Checkpoint
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	return list
}

// startProject creates (when missing) and starts project's container
// before any prompt, so the first turn's preparation finds it made.
func (e *projectEnv) startProject(t testing.TB, project string) {
	t.Helper()
	if status, body := e.do("POST", "/v1/projects/"+project+"/start", "alice", nil); status != http.StatusOK {
		t.Fatalf("start %s: %d %s", project, status, body)
	}
}

// TestCheckpointSkippedOnFreshContainer (docs/operating.md, "Warm containers"): the turn whose
// preparation created the project's container takes no checkpoint (no
// LXD snapshot, no checkpoint event: nothing to restore to), and a fork
// with the container at that turn is 404 naming the missing checkpoint;
// the next turn takes one. A container started before the first prompt
// (POST …/start) gets the first turn's checkpoint as before.
func TestCheckpointSkippedOnFreshContainer(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	snapshots := func(container string) []string {
		t.Helper()
		snaps, err := e.lxd.Snapshots(context.Background(), container)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range snaps {
			names = append(names, s.Name)
		}
		return names
	}
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckfresh")})
	t1 := e.prompt(t, chat.ID, "alice", "t1")
	if hasType(t1, api.EventCheckpoint) || !hasType(t1, api.EventComplete) || !slices.Contains(subtypes(t1), "container_starting") {
		t.Fatalf("first turn on a fresh container: events %v %v", types(t1), subtypes(t1))
	}
	if got := snapshots(proj.Container); len(got) != 0 {
		t.Fatalf("snapshots after the turn that created the container: %v, want none", got)
	}
	status, body := e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": t1[0].Seq, "withContainer": true})
	want := "no checkpoint " + checkpoint.Name(chat.ID, t1[0].Seq) + ` before that turn in project "` + proj.Name + `"`
	if status != http.StatusNotFound || !strings.HasPrefix(errorMessage(t, body), want) {
		t.Fatalf("fork with container at the first turn: %d %s, want 404 %q", status, body, want)
	}
	t2 := e.prompt(t, chat.ID, "alice", "t2")
	cp := checkpoint.Name(chat.ID, t2[0].Seq)
	if !slices.ContainsFunc(t2, func(ev api.Event) bool { return ev.Type == api.EventCheckpoint && ev.Snapshot == cp }) {
		t.Fatalf("second turn: no checkpoint event %s: %v", cp, types(t2))
	}
	if got := snapshots(proj.Container); len(got) != 1 || got[0] != cp {
		t.Fatalf("snapshots after the second turn: %v, want [%s]", got, cp)
	}

	started, chat2 := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckstarted")})
	e.startProject(t, started.Name)
	s1 := e.prompt(t, chat2.ID, "alice", "t1")
	cp = checkpoint.Name(chat2.ID, s1[0].Seq)
	if got := snapshots(started.Container); !hasType(s1, api.EventCheckpoint) || len(got) != 1 || got[0] != cp {
		t.Fatalf("first turn on a container started before it: events %v, snapshots %v, want [%s]", types(s1), got, cp)
	}
}

// TestCheckpointAfterContainerStopped: only a turn whose preparation
// created the container (or claimed a warm one) skips its checkpoint. The
// first turn after the container was stopped (remotectl project stop, an
// idle stop; stopped behind the daemon's back as by a host reboot) starts
// a container that holds the project's files: it takes its checkpoint, so
// it can be rolled back.
func TestCheckpointAfterContainerStopped(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckstop")})
	if t1 := e.prompt(t, chat.ID, "alice", "t1"); hasType(t1, api.EventCheckpoint) || !hasType(t1, api.EventComplete) {
		t.Fatalf("first turn (creates the container): events %v", types(t1))
	}
	hasSnapshot := func(name string) bool {
		t.Helper()
		snaps, err := e.lxd.Snapshots(context.Background(), proj.Container)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(snaps, func(s lxdexec.Snapshot) bool { return s.Name == name })
	}
	for _, tc := range []struct {
		turn string
		stop func()
	}{
		{"after project stop", func() {
			if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/stop", "alice", nil); status != http.StatusOK {
				t.Fatalf("stop: %d %s", status, body)
			}
		}},
		{"after a stop behind the daemon's back", func() {
			if err := e.lxd.SetState(context.Background(), proj.Container, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		tc.stop()
		if inst, _, err := e.lxd.Instance(context.Background(), proj.Container); err != nil || inst.Status != "Stopped" {
			t.Fatalf("%s: container %v %v, want it stopped", tc.turn, inst, err)
		}
		evs := e.prompt(t, chat.ID, "alice", strings.ReplaceAll(tc.turn, " ", "-"))
		cp := checkpoint.Name(chat.ID, evs[0].Seq)
		if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Type == api.EventCheckpoint && ev.Snapshot == cp }) ||
			!hasType(evs, api.EventComplete) || !hasSnapshot(cp) {
			t.Fatalf("first turn %s: events %v %v, snapshot %s taken %v; want its checkpoint", tc.turn, types(evs), subtypes(evs), cp, hasSnapshot(cp))
		}
	}
}

// TestCheckpointsPerTurn: every turn of a project chat whose container
// was made before it is preceded by an LXD snapshot, evented right after the user event and listed with its
// chat and seq; retention keeps the newest checkpoint_keep. On each
// storage path (dir, btrfs).
func TestCheckpointsPerTurn(t *testing.T) { forEachPool(t, testCheckpointsPerTurn) }

func testCheckpointsPerTurn(t *testing.T, pool testkit.Pool) {
	e := newProjectEnv(t, projectEnvOpts{checkpointKeep: 2, providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckpt"), Pool: pool.Name})
	e.startProject(t, proj.Name)
	var userSeqs []int64
	for _, turn := range []string{"t1", "t2", "t3"} {
		evs := e.prompt(t, chat.ID, "alice", turn)
		if len(evs) < 2 || evs[0].Type != api.EventUser {
			t.Fatalf("turn %s events %v", turn, types(evs))
		}
		var cp *api.Event
		for i := range evs {
			if evs[i].Type == api.EventCheckpoint {
				cp = &evs[i]
				break
			}
			if evs[i].Type != api.EventUser && evs[i].Type != api.EventSystem {
				t.Fatalf("turn %s: %s before the checkpoint event: %v", turn, evs[i].Type, types(evs))
			}
		}
		want := checkpoint.Name(chat.ID, evs[0].Seq)
		if cp == nil || cp.Snapshot != want || cp.Project != proj.Name {
			t.Fatalf("turn %s: checkpoint event %+v, want snapshot %s project %s; events %v", turn, cp, want, proj.Name, types(evs))
		}
		if !hasType(evs, api.EventComplete) {
			t.Fatalf("turn %s did not complete: %v", turn, types(evs))
		}
		userSeqs = append(userSeqs, evs[0].Seq)
		if turn == "t1" {
			// The operator's own snapshot, older than every later
			// checkpoint: retention deletes only the daemon's own.
			if err := e.lxd.CreateSnapshot(context.Background(), proj.Container, "operator-before-upgrade", time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.prep.WaitRetention(context.Background(), proj); err != nil {
		t.Fatal(err)
	}
	snaps, err := e.lxd.Snapshots(context.Background(), proj.Container)
	if err != nil || !slices.ContainsFunc(snaps, func(s lxdexec.Snapshot) bool { return s.Name == "operator-before-upgrade" }) {
		t.Fatalf("the operator's own snapshot did not survive checkpoint retention (keep 2, 3 turns): %+v, %v", snaps, err)
	}
	// The stored events decode with the new fields (fast decoder).
	stored := e.events(chat.ID)
	n := 0
	for _, ev := range stored {
		if ev.Type == api.EventCheckpoint && ev.Snapshot != "" && ev.Project == proj.Name {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("stored checkpoint events with snapshot and project: %d, want 3", n)
	}
	assertRootPool(t, e, proj.Container, pool)
	list := e.checkpointList(t, proj.Name)
	if len(list) != 2 {
		t.Fatalf("checkpoints after 3 turns with keep 2: %+v", list)
	}
	for i, cp := range list {
		seq := userSeqs[i+1]
		if cp.Name != checkpoint.Name(chat.ID, seq) || cp.ChatID != chat.ID || cp.Seq != seq || cp.CreatedAt.IsZero() {
			t.Fatalf("checkpoint %d = %+v, want chat %s seq %d", i, cp, chat.ID, seq)
		}
	}
}

// TestCheckpointsOff: a project with checkpoints off gets none.
func TestCheckpointsOff(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckoff"), Checkpoints: "off"})
	evs := e.prompt(t, chat.ID, "alice", "t1")
	if hasType(evs, api.EventCheckpoint) || !hasType(evs, api.EventComplete) {
		t.Fatalf("events %v", types(evs))
	}
	if list := e.checkpointList(t, proj.Name); len(list) != 0 {
		t.Fatalf("checkpoints with checkpoints off: %+v", list)
	}
	status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("ckbad"), Checkpoints: "always"})
	if status != http.StatusBadRequest || errorMessage(t, body) != `invalid checkpoints "always": turn or off` {
		t.Fatalf("bad checkpoints mode: %d %s", status, body)
	}
}

// TestFaultCheckpointFails: a snapshot that fails (injected: the pool is
// full) never fails the turn; the chat gets system/checkpoint_failed with
// the reason and the CLI still runs.
func TestFaultCheckpointFails(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{
		prepLXD:   func(c *lxdconn.Conn) provisioning.LXD { return failingSnapshots{c} },
		providers: []func(providers.AdapterConfig) providers.Provider{fileAgent},
	})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckfail")})
	e.startProject(t, proj.Name)
	evs := e.prompt(t, chat.ID, "alice", "t1")
	var failed *api.Event
	for i := range evs {
		if evs[i].Type == api.EventSystem && evs[i].Subtype == api.SubtypeCheckpointFailed {
			failed = &evs[i]
		}
	}
	if failed == nil || hasType(evs, api.EventCheckpoint) || !hasType(evs, api.EventComplete) {
		t.Fatalf("events %v", types(evs))
	}
	var data map[string]string
	_ = json.Unmarshal(failed.Data, &data)
	want := map[string]string{"project": proj.Name, "snapshot": checkpoint.Name(chat.ID, evs[0].Seq), "reason": "no space left on device"}
	if len(data) != 3 || data["project"] != want["project"] || data["snapshot"] != want["snapshot"] || data["reason"] != want["reason"] {
		t.Fatalf("checkpoint_failed data %s, want %v", failed.Data, want)
	}
	if got := strings.TrimSpace(lxdShell(t, e.lxd, proj.Container, "ls /root")); got != "t1" {
		t.Fatalf("the turn did not run: /root = %q", got)
	}
}

func assistantText(evs []api.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == api.EventAssistantText {
			b.WriteString(ev.Text)
		}
	}
	return strings.TrimSpace(b.String())
}

// TestCheckpointRestore: restoring the checkpoint taken before turn 2
// brings the container back to turn 1's files, marks every chat of the
// project with system/checkpoint_restored, and the next prompt starts a
// fresh provider session; a restore while a run is active is refused. On
// each storage path (dir, btrfs).
func TestCheckpointRestore(t *testing.T) { forEachPool(t, testCheckpointRestore) }

func testCheckpointRestore(t *testing.T, pool testkit.Pool) {
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckrest"), Pool: pool.Name})
	e.prompt(t, chat.ID, "alice", "t1")
	evs := e.prompt(t, chat.ID, "alice", "t2")
	if got := assistantText(evs); got != "resume=s-"+chat.ID+" files=t1 t2" {
		t.Fatalf("turn 2 said %q", got)
	}
	cp := checkpoint.Name(chat.ID, evs[0].Seq)
	status, body := e.do("POST", "/v1/projects/"+proj.Name+"/checkpoints/"+cp+"/restore", "alice", nil)
	if status != http.StatusOK {
		t.Fatalf("restore: %d %s", status, body)
	}
	if got := strings.TrimSpace(lxdShell(t, e.lxd, proj.Container, "ls /root | tr '\\n' ' '")); got != "t1" {
		t.Fatalf("after restore /root = %q, want t1", got)
	}
	assertRootPool(t, e, proj.Container, pool)
	all := e.events(chat.ID)
	last := all[len(all)-1]
	if last.Type != api.EventSystem || last.Subtype != api.SubtypeCheckpointRestored ||
		string(last.Data) != `{"checkpoint":"`+cp+`","project":"`+proj.Name+`"}` {
		t.Fatalf("last event %+v, want system/checkpoint_restored naming %s", last, cp)
	}
	evs = e.prompt(t, chat.ID, "alice", "t3")
	if got := assistantText(evs); got != "resume= files=t1 t3" {
		t.Fatalf("turn after restore said %q, want a fresh session on turn 1's files", got)
	}
	// Not another user's project; not an unknown or malformed checkpoint.
	if status, _ := e.do("POST", "/v1/projects/"+proj.Name+"/checkpoints/"+cp+"/restore", "bob", nil); status != http.StatusNotFound {
		t.Fatalf("bob restoring alice's project: %d", status)
	}
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/checkpoints/rc-"+chat.ID+"-999/restore", "alice", nil); status != http.StatusNotFound {
		t.Fatalf("unknown checkpoint: %d %s", status, body)
	}
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/checkpoints/snap0/restore", "alice", nil); status != http.StatusBadRequest ||
		errorMessage(t, body) != `invalid checkpoint "snap0": want rc-<chat>-<seq>` {
		t.Fatalf("malformed checkpoint: %d %s", status, body)
	}
}

// TestCheckpointRestoreWhileRunning: 409 while a chat of the project runs.
func TestCheckpointRestoreWhileRunning(t *testing.T) {
	release := make(chan struct{})
	slow := func(ports providers.AdapterConfig) providers.Provider {
		inner := fileAgent(ports).(*fakeProvider)
		return &fakeProvider{id: providers.Claude, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
			err := inner.run(ctx, req, emit)
			<-release
			return err
		}}
	}
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{slow}})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckbusy")})
	e.startProject(t, proj.Name)
	status, body := e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "t1"})
	if status != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", status, body)
	}
	cp := checkpoint.Name(chat.ID, 1)
	status, body = e.do("POST", "/v1/projects/"+proj.Name+"/checkpoints/"+cp+"/restore", "alice", nil)
	close(release)
	// The run ends before the test's cleanups remove its container.
	testkit.Eventually(t, 2*time.Minute, func() bool { return !e.hub.Running(chat.ID) }, "the run's end")
	want := "chat " + chat.ID + ` of project "` + proj.Name + `" is running; cancel it before restoring ` + cp
	if status != http.StatusConflict || errorCode(t, body) != api.CodeConflict || errorMessage(t, body) != want {
		t.Fatalf("restore while running: %d %s, want 409 %q", status, body, want)
	}
}

// TestForkWithContainer: forking at turn 2 with the container gives a new
// chat with turn 1's history only and a new project of the caller's whose
// container has turn 1's file and not turn 2's; the original keeps both.
// On each storage path (dir, btrfs): the fork's root disk stays on the
// original's pool.
func TestForkWithContainer(t *testing.T) { forEachPool(t, testForkWithContainer) }

func testForkWithContainer(t *testing.T, pool testkit.Pool) {
	pdir := t.TempDir() // previews: the fork gets its own sockets, not the original's
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}, previewDir: pdir})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckfork"), Credentials: api.CredentialsProject, Pool: pool.Name, Ports: []int{8080}})
	e.prompt(t, chat.ID, "alice", "t1")
	turn2 := e.prompt(t, chat.ID, "alice", "t2")
	at := turn2[len(turn2)-1].Seq // the turn's last event
	status, body := e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": at, "withContainer": true})
	if status != http.StatusCreated {
		t.Fatalf("fork: %d %s", status, body)
	}
	var fork api.Chat
	if err := json.Unmarshal(body, &fork); err != nil {
		t.Fatal(err)
	}
	if fork.ID == chat.ID || fork.Project == proj.Name || fork.Project == "" || len(fork.Sessions) != 0 {
		t.Fatalf("fork %+v", fork)
	}
	status, body = e.do("GET", "/v1/projects/"+fork.Project, "alice", nil)
	var np api.Project
	if status != http.StatusOK || json.Unmarshal(body, &np) != nil {
		t.Fatalf("forked project: %d %s", status, body)
	}
	testkit.CleanupContainer(t, testkit.LXD(t), np.Container)
	if np.Credentials != api.CredentialsProject {
		t.Fatalf("forked project's credentials %q: a tenant's own-login project must not fork into a shared one", np.Credentials)
	}
	if np.Owner != "alice" || np.ID != fork.ProjectID || np.Container == proj.Container {
		t.Fatalf("forked project %+v (fork chat %+v)", np, fork)
	}
	if status, _ := e.do("GET", "/v1/projects/"+fork.Project, "bob", nil); status != http.StatusNotFound {
		t.Fatalf("bob sees alice's forked project: %d", status)
	}
	// History: everything before turn 2's user event, nothing after.
	fevs := e.events(fork.ID)
	if len(fevs) == 0 || fevs[len(fevs)-1].Seq >= turn2[0].Seq || fevs[0].Type != api.EventUser || fevs[0].Text != "t1" {
		t.Fatalf("fork events %v (turn 2 starts at %d)", types(fevs), turn2[0].Seq)
	}
	if inst, _, err := e.lxd.Instance(context.Background(), np.Container); err != nil || inst.Devices["remote-port-8080"]["listen"] != "unix:"+pdir+"/"+np.ID+"-8080.sock" {
		t.Fatalf("forked container's preview device %v (%v): want the fork's own socket", inst.Devices["remote-port-8080"], err)
	}
	if status, body := e.do("POST", "/v1/projects/"+fork.Project+"/start", "alice", nil); status != http.StatusOK {
		t.Fatalf("start fork project: %d %s", status, body)
	}
	if got := strings.TrimSpace(lxdShell(t, e.lxd, np.Container, "ls /root | tr '\\n' ' '")); got != "t1" {
		t.Fatalf("forked container /root = %q, want t1", got)
	}
	if np.Pool != pool.Name {
		t.Fatalf("forked project's pool %q, want the original's %q", np.Pool, pool.Name)
	}
	assertRootPool(t, e, proj.Container, pool)
	assertRootPool(t, e, np.Container, pool)
	if got := strings.TrimSpace(lxdShell(t, e.lxd, proj.Container, "ls /root | tr '\\n' ' '")); got != "t1 t2" {
		t.Fatalf("original container /root = %q, want t1 t2", got)
	}
	// The fork runs in its own container, from visible history.
	if got := assistantText(e.prompt(t, fork.ID, "alice", "t3")); got != "resume= files=t1 t3" {
		t.Fatalf("fork's turn said %q", got)
	}
	if got := strings.TrimSpace(lxdShell(t, e.lxd, proj.Container, "ls /root | tr '\\n' ' '")); got != "t1 t2" {
		t.Fatalf("original container after the fork's turn: %q", got)
	}
	// Without the container: same project, history cut the same way.
	status, body = e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": at})
	var plain api.Chat
	if status != http.StatusCreated || json.Unmarshal(body, &plain) != nil || plain.Project != proj.Name || len(e.events(plain.ID)) != len(fevs) {
		t.Fatalf("fork without container: %d %s", status, body)
	}
	// Bad input.
	status, body = e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": 9999, "withContainer": true})
	if want := "atSeq 9999 is not an event of a turn of chat " + chat.ID; status != http.StatusBadRequest || errorMessage(t, body) != want {
		t.Fatalf("fork at a missing seq: %d %s, want 400 %q", status, body, want)
	}
	status, body = e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"withContainer": true})
	if want := "atSeq: a positive seq of chat " + chat.ID + " is required to fork at a turn"; status != http.StatusBadRequest || errorMessage(t, body) != want {
		t.Fatalf("fork without atSeq: %d %s, want 400 %q", status, body, want)
	}
}

// TestCheckpointExpiry: with [projects] checkpoint_expiry set, LXD holds
// each turn checkpoint with an expiry that long after it was taken (LXD
// then deletes it itself); without it a checkpoint never expires.
func TestCheckpointExpiry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expiry time.Duration
	}{{"7 days", 7 * 24 * time.Hour}, {"none", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newProjectEnv(t, projectEnvOpts{checkpointExpiry: tc.expiry, providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
			proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckexp")})
			e.startProject(t, proj.Name)
			if evs := e.prompt(t, chat.ID, "alice", "t1"); !hasType(evs, api.EventCheckpoint) {
				t.Fatalf("no checkpoint: %v", types(evs))
			}
			snaps, err := e.lxd.Snapshots(context.Background(), proj.Container)
			if err != nil || len(snaps) != 1 {
				t.Fatalf("snapshots %+v %v", snaps, err)
			}
			s := snaps[0]
			if tc.expiry == 0 {
				if !s.ExpiresAt.IsZero() && s.ExpiresAt.Year() > 1 {
					t.Fatalf("checkpoint expires at %v without checkpoint_expiry", s.ExpiresAt)
				}
				return
			}
			if d := s.ExpiresAt.Sub(s.CreatedAt); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour+time.Minute {
				t.Fatalf("checkpoint created %v expires %v (after %v), want 168h", s.CreatedAt, s.ExpiresAt, d)
			}
		})
	}
}
