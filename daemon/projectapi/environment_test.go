package projectapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
)

// envProject creates alice's project with repo (token GIT_TOKEN) and env
// (nil: none), sets secrets, and makes a chat in it.
func (e *repoEnv) envProject(t *testing.T, url, token string, env *api.ProjectEnvironment, secrets map[string]string) (api.Project, api.Chat) {
	t.Helper()
	proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("env"), Image: devImage,
		Repo: &api.ProjectRepo{URL: url, TokenSecret: "GIT_TOKEN"}, Environment: env})
	secrets["GIT_TOKEN"] = token
	for k, v := range secrets {
		if status, body := e.call(t, "PUT", "/v1/projects/"+proj.Name+"/secrets/"+k, "alice", api.PutSecretRequest{Value: v}); status != http.StatusNoContent {
			t.Fatalf("put secret %s: %d %s", k, status, body)
		}
	}
	return proj, e.chatIn(t, proj.Name)
}

func (e *repoEnv) chatIn(t *testing.T, project string) api.Chat {
	t.Helper()
	status, body := e.call(t, "POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: project})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatal(err)
	}
	return chat
}

func (e *repoEnv) envStatus(t *testing.T, project string) api.EnvironmentStatus {
	t.Helper()
	status, body := e.call(t, "GET", "/v1/projects/"+project+"/environment", "alice", nil)
	if status != http.StatusOK {
		t.Fatalf("environment: %d %s", status, body)
	}
	var st api.EnvironmentStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// envEvents are the environment_setup events of evs, decoded.
func envEvents(evs []api.Event) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if ev.Type == api.EventSystem && ev.Subtype == api.SubtypeEnvironmentSetup {
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

// envPhases lists "phase:state" of the environment events, output lines
// left out.
func envPhases(evs []api.Event) string {
	var out []string
	for _, d := range envEvents(evs) {
		if d["state"] != "output" {
			out = append(out, d["phase"].(string)+":"+d["state"].(string))
		}
	}
	return strings.Join(out, ",")
}

func envOutput(evs []api.Event) string {
	var b strings.Builder
	for _, d := range envEvents(evs) {
		if l, ok := d["line"].(string); ok {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// turnText is what the agent answered (the prompt left out).
func turnText(evs []api.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type != api.EventUser {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// envSnapshots lists the container's environment snapshots.
func envSnapshots(t *testing.T, container string) []string {
	t.Helper()
	out, err := exec.Command("lxc", "query", "/1.0/instances/"+container+"/snapshots").CombinedOutput()
	if err != nil {
		t.Fatalf("lxc query snapshots: %v %s", err, out)
	}
	var urls []string
	if err := json.Unmarshal(out, &urls); err != nil {
		t.Fatalf("snapshots %s: %v", out, err)
	}
	var names []string
	for _, u := range urls {
		if n := u[strings.LastIndexByte(u, '/')+1:]; strings.HasPrefix(n, "env-") {
			names = append(names, n)
		}
	}
	return names
}

// TestEnvironmentSetupOnceCached: a Python repository whose project's
// setup makes a venv. The first turn runs the setup (its output as
// environment_setup events, then ready) before the agent, which finds
// the venv; the environment is kept as the snapshot env-<key>; a second
// turn of the chat runs neither setup nor maintenance, a new chat runs
// the maintenance only; changing the setup (PATCH) rebuilds at the next
// turn under a new key (the old snapshot gone); a failing setup is not
// cached and its turn fails naming its exit status and output, the
// agent never started; rebuild (202) sets it up again; the log route
// has the output.
func TestEnvironmentSetupOnceCached(t *testing.T) {
	const token = "tok_env_0123456789abcdef"
	e := newRepoEnv(t, token)
	url := e.git.NewRepo(t, "acme/calc", map[string]string{"calc.py": calcPy, "test_calc.py": testCalcPy, "requirements.txt": "# none\n"})
	env := api.ProjectEnvironment{Setup: "python3 -m venv --without-pip .venv\necho SETUP-RAN\n", Maintenance: "echo MAINT-RAN\n",
		CacheFiles: []string{"requirements.txt"}}
	proj, chat := e.envProject(t, url, token, &env, map[string]string{})
	if proj.Environment == nil || proj.Environment.Setup != env.Setup {
		t.Fatalf("created project's environment = %+v", proj.Environment)
	}
	if st := e.envStatus(t, proj.Name); st.State != api.EnvironmentNone {
		t.Errorf("status before any turn = %+v", st)
	}

	evs := e.prompt(t, chat.ID, "alice", "test -x .venv/bin/python3 && echo VENV-OK")
	if got := envPhases(evs); got != "setup:started,setup:ready" {
		t.Fatalf("first turn's environment events = %q (%s)", got, turnText(evs))
	}
	if !strings.Contains(envOutput(evs), "SETUP-RAN") || !strings.Contains(turnText(evs), "VENV-OK") {
		t.Fatalf("setup output %q, agent %q", envOutput(evs), turnText(evs))
	}
	st := e.envStatus(t, proj.Name)
	if st.State != api.EnvironmentReady || len(st.CacheKey) != 64 || st.LastRun == nil || !strings.Contains(st.LogTail, "SETUP-RAN") {
		t.Fatalf("status after setup = %+v", st)
	}
	key1 := st.CacheKey
	if snaps := envSnapshots(t, proj.Container); len(snaps) != 1 || snaps[0] != "env-"+key1[:32] {
		t.Fatalf("environment snapshots = %v, want env-%s", snaps, key1[:32])
	}

	evs = e.prompt(t, chat.ID, "alice", "echo SECOND")
	if got := envPhases(evs); got != "" || !strings.Contains(turnText(evs), "SECOND") {
		t.Fatalf("second turn: environment events %q, text %q", got, turnText(evs))
	}
	chat2 := e.chatIn(t, proj.Name)
	evs = e.prompt(t, chat2.ID, "alice", "echo NEWCHAT")
	if got := envPhases(evs); got != "maintenance:started,maintenance:ready" || !strings.Contains(envOutput(evs), "MAINT-RAN") {
		t.Fatalf("new chat's environment events = %q (%q)", got, envOutput(evs))
	}

	// The container's own record is what counts: without it (a restored
	// checkpoint from before the setup, say) the setup runs again.
	if out, err := exec.Command("lxc", "exec", proj.Container, "--", "cat", "/var/lib/remote/environment-key").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != key1 {
		t.Fatalf("the container's environment key = %q (%v), want %s", out, err, key1)
	}
	if out, err := exec.Command("lxc", "exec", proj.Container, "--", "rm", "/var/lib/remote/environment-key").CombinedOutput(); err != nil {
		t.Fatalf("rm the key: %v %s", err, out)
	}
	evs = e.prompt(t, chat2.ID, "alice", "echo UNRECORDED")
	if got := envPhases(evs); got != "setup:started,setup:ready" {
		t.Fatalf("turn on a container without the key: %q", got)
	}

	// A changed setup rebuilds at the next turn, under a new key.
	env.Setup += "echo V2\n"
	if status, body := e.call(t, "PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Environment: &env}); status != http.StatusOK {
		t.Fatalf("patch environment: %d %s", status, body)
	}
	evs = e.prompt(t, chat2.ID, "alice", "echo AFTER-PATCH")
	if got := envPhases(evs); got != "setup:started,setup:ready" || !strings.Contains(envOutput(evs), "V2") {
		t.Fatalf("turn after patch: %q (%q)", got, envOutput(evs))
	}
	key2 := e.envStatus(t, proj.Name).CacheKey
	if key2 == key1 {
		t.Fatal("the cache key did not change with the setup")
	}
	if snaps := envSnapshots(t, proj.Container); len(snaps) != 1 || snaps[0] != "env-"+key2[:32] {
		t.Fatalf("environment snapshots after rebuild = %v", snaps)
	}

	// A failing setup: not cached, the turn fails with its exit status
	// and output, the agent never runs.
	bad := api.ProjectEnvironment{Setup: "echo BROKEN-OUTPUT\nexit 7\n"}
	if status, body := e.call(t, "PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Environment: &bad}); status != http.StatusOK {
		t.Fatalf("patch environment: %d %s", status, body)
	}
	evs = e.prompt(t, chat2.ID, "alice", "echo AGENT-RAN")
	errEv, ok := eventOf(evs, api.EventError, "")
	if !ok || !strings.Contains(errEv.Message+errEv.Text, "exited 7") || !strings.Contains(errEv.Message+errEv.Text, "BROKEN-OUTPUT") {
		t.Fatalf("failed setup's error event = %+v (%v); events %+v", errEv, ok, evs)
	}
	if strings.Contains(turnText(evs), "AGENT-RAN") {
		t.Fatal("the agent ran on a failed setup")
	}
	st = e.envStatus(t, proj.Name)
	if st.State != api.EnvironmentFailed || st.ExitCode == nil || *st.ExitCode != 7 {
		t.Fatalf("status after a failed setup = %+v", st)
	}
	for _, s := range envSnapshots(t, proj.Container) {
		if s == "env-"+st.CacheKey[:32] {
			t.Fatalf("the failed setup was cached as %s", s)
		}
	}
	evs = e.prompt(t, chat2.ID, "alice", "echo AGENT-RAN")
	if got := envPhases(evs); got != "setup:started,setup:failed" {
		t.Fatalf("a failed setup is tried again at the next turn: %q", got)
	}

	// Rebuild: back to a good setup, run now (202), the log has it.
	good := api.ProjectEnvironment{Setup: "echo REBUILT\n"}
	if status, body := e.call(t, "PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Environment: &good}); status != http.StatusOK {
		t.Fatalf("patch environment: %d %s", status, body)
	}
	if status, body := e.call(t, "POST", "/v1/projects/"+proj.Name+"/environment/rebuild", "alice", nil); status != http.StatusAccepted {
		t.Fatalf("rebuild: %d %s", status, body)
	}
	testkit.Eventually(t, 3*time.Minute, func() bool { return e.envStatus(t, proj.Name).State == api.EnvironmentReady }, "the rebuild")
	status, body := e.call(t, "GET", "/v1/projects/"+proj.Name+"/environment/log", "alice", nil)
	if status != http.StatusOK || !strings.Contains(string(body), "REBUILT") {
		t.Fatalf("environment log: %d %s", status, body)
	}
	evs = e.prompt(t, chat2.ID, "alice", "echo AFTER-REBUILD")
	if got := envPhases(evs); got != "" || !strings.Contains(turnText(evs), "AFTER-REBUILD") {
		t.Fatalf("turn after rebuild: environment events %q, text %q", got, turnText(evs))
	}
}

// TestAttackEnvironmentSetupSecret: the repository's
// .remote/environment.toml names PIP_TOKEN in setup_secrets; its setup
// writes the secret's hash (showing it had the secret) and echoes the
// secret itself. The secret is in no event (redacted), not in the agent's
// environment (the agent prints it), in no file of the container, not
// in the container's LXD config, not in the daemon's log; another
// project secret the setup does not name is not in the setup's
// environment. With setupSecrets given to the agent like other secrets
// (the defence removed), the agent's environment holds it.
func TestAttackEnvironmentSetupSecret(t *testing.T) {
	const token = "tok_envsec_0123456789abcd"
	const secret = "pip_s3cr3t_9a8b7c6d5e4f"
	e := newRepoEnv(t, token)
	toml := "setup = \"\"\"\necho \"$PIP_TOKEN\" | sha256sum > /workspace/.setup-marker\necho \"leaked? $PIP_TOKEN\"\necho \"other=${OTHER_SECRET:-unset}\"\n\"\"\"\nsetup_secrets = [\"PIP_TOKEN\"]\n"
	url := e.git.NewRepo(t, "acme/calc", map[string]string{"calc.py": calcPy, ".remote/environment.toml": toml})
	proj, chat := e.envProject(t, url, token, nil, map[string]string{"PIP_TOKEN": secret, "OTHER_SECRET": "other_value_1234"})

	evs := e.prompt(t, chat.ID, "alice", "cat .setup-marker")
	if got := envPhases(evs); got != "setup:started,setup:ready" {
		t.Fatalf("environment events = %q (%s)", got, turnText(evs))
	}
	sum := sha256.Sum256([]byte(secret + "\n"))
	text := turnText(evs)
	if !strings.Contains(text, hex.EncodeToString(sum[:])) {
		t.Fatalf("the setup did not have the secret: agent saw %q", text)
	}
	if out := envOutput(evs); !strings.Contains(out, "leaked? [redacted]") || !strings.Contains(out, "other=unset") {
		t.Errorf("setup output = %q", out)
	}
	if !strings.Contains(text, "OTHER_SECRET=other_value_1234") {
		t.Errorf("a secret the setup does not name is not the agent's: %q", text)
	}
	if strings.Contains(text, "PIP_TOKEN") {
		t.Errorf("the agent's environment holds the setup secret: %q", text)
	}
	all, _ := json.Marshal(e.events(chat.ID))
	files, _ := exec.Command("lxc", "exec", proj.Container, "--", "grep", "-rlF", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev",
		"--", secret, "/").CombinedOutput()
	config, err := exec.Command("lxc", "config", "show", "--expanded", proj.Container).CombinedOutput()
	if err != nil {
		t.Fatalf("lxc config show: %v %s", err, config)
	}
	e.mu.Lock()
	answers := e.answers
	e.mu.Unlock()
	for what, b := range map[string][]byte{"events": all, "agent output": []byte(text), "container files": files,
		"LXD instance config": config, "daemon log": []byte(e.logs.String()), "API answers": answers} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the setup secret is in the %s", what)
		}
	}
	if len(files) != 0 {
		t.Errorf("grep for the secret in the container printed %q", files)
	}
}

// TestAttackEnvironmentOtherUser: bob's requests for alice's project's
// environment (status, log, rebuild) are not found, exactly like a
// missing project, and start nothing.
func TestAttackEnvironmentOtherUser(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{images: []string{devImage}})
	proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("envbob"), Image: devImage,
		Environment: &api.ProjectEnvironment{Setup: "echo hi"}})
	for _, c := range []struct{ method, path string }{
		{"GET", "/environment"}, {"GET", "/environment/log"}, {"POST", "/environment/rebuild"},
	} {
		status, body := e.do(c.method, "/v1/projects/"+proj.Name+c.path, "bob", nil)
		if status != http.StatusNotFound {
			t.Errorf("bob's %s %s: %d %s", c.method, c.path, status, body)
		}
	}
	if status, body := e.do("GET", "/v1/projects/"+proj.Name+"/environment", "alice", nil); status != http.StatusOK || !strings.Contains(string(body), `"state":"none"`) {
		t.Errorf("alice's environment: %d %s", status, body)
	}
}

// TestEnvironmentRefused: setupSecrets naming the repository's token
// secret (given to git on the host only), a bad secret name, a cache
// file outside /workspace: 400 naming the field, nothing made.
func TestEnvironmentRefused(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{images: []string{devImage}})
	repo := &api.ProjectRepo{URL: "https://example.com/o/r.git", TokenSecret: "GIT_TOKEN"}
	for _, c := range []struct {
		env  api.ProjectEnvironment
		want string
	}{
		{api.ProjectEnvironment{Setup: "x", SetupSecrets: []string{"GIT_TOKEN"}}, "repository's tokenSecret"},
		{api.ProjectEnvironment{Setup: "x", SetupSecrets: []string{"A-B"}}, "environment.setupSecrets"},
		{api.ProjectEnvironment{Setup: "x", CacheFiles: []string{"../etc/shadow"}}, "environment.cacheFiles"},
		{api.ProjectEnvironment{Setup: "x", Network: &api.EnvironmentNetwork{Allow: []string{"pypi.org"}}}, "environment.network.allow: this daemon has no egress proxy"},
	} {
		name := uniqueProject("envbad")
		status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: name, Image: devImage, Repo: repo, Environment: &c.env})
		if status != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
			t.Errorf("%+v: %d %s", c.env, status, body)
		}
		if status, _ := e.do("GET", "/v1/projects/"+name, "alice", nil); status != http.StatusNotFound {
			t.Errorf("%s was created", name)
		}
	}
	// PATCH: the same refusal, and nothing of the body is applied (the
	// ports neither).
	proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("envpatch"), Image: devImage, Repo: repo})
	ports := []int{8080}
	status, body := e.do("PATCH", "/v1/projects/"+proj.Name, "alice", api.PatchProjectRequest{Ports: &ports,
		Environment: &api.ProjectEnvironment{Setup: "x", SetupSecrets: []string{"GIT_TOKEN"}}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "repository's tokenSecret") {
		t.Errorf("patch: %d %s", status, body)
	}
	if got := e.project(t, proj.Name); got.Environment != nil || len(got.Ports) != 0 {
		t.Errorf("a refused patch changed the project: %+v", got)
	}
}
