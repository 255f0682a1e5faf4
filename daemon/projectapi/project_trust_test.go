package projectapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/runner"
)

// envAgent is a provider whose "CLI" is a shell in the project's
// container, prepared by the real preparer over real LXD: it prints the
// BOB_TOKEN secret it was given and leaves /workspace/chat-<id>, as an
// agent reading its environment and writing files would.
func envAgent(calls *int, mu *sync.Mutex) func(ports providers.AdapterConfig) providers.Provider {
	return func(ports providers.AdapterConfig) providers.Provider {
		return &fakeProvider{id: providers.Claude, run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
			mu.Lock()
			*calls++
			mu.Unlock()
			target, launcher, err := runner.PrepareProject(ctx, ports, providers.Claude, errors.New("not wired"), req, emit)
			if err != nil {
				return err
			}
			env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
			for _, s := range target.Secrets {
				env = append(env, s.Key+"="+s.Value)
			}
			proc, err := launcher.Start(ctx, providers.Command{Path: "sh", Dir: "/", Env: env, Args: []string{"-c",
				`echo "token=$BOB_TOKEN"; mkdir -p /workspace; echo x > /workspace/chat-` + req.ConversationID}})
			if err != nil {
				return err
			}
			go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
			out, _ := io.ReadAll(proc.Stdout())
			if err := proc.Wait(); err != nil {
				return err
			}
			emit(providers.Event{Type: providers.EventAssistantDelta, Text: string(out), MessageID: "m1"})
			emit(providers.Event{Type: providers.EventRunCompleted})
			return nil
		}}
	}
}

// lxdShell runs script in container directly over LXD (behind the
// daemon's back) and returns its stdout.
func lxdShell(t *testing.T, cl *lxdexec.Client, container, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := cl.Exec(ctx, container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec in %s: %v", container, err)
	}
	_ = ex.Stdin().Close()
	go func() { _, _ = io.Copy(io.Discard, ex.Stderr()) }()
	out, _ := io.ReadAll(ex.Stdout())
	if _, err := ex.Wait(); err != nil {
		t.Fatalf("exec in %s: %v", container, err)
	}
	return string(out)
}

func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.Message
}

// TestAttackRecreatedProject (docs/threat-model.md, the project routes): alice
// deletes her project and bob creates one of the same name with a secret.
// Alice's old chat in it must not run: not in bob's container, not with bob's
// secret, and no container is touched.
func TestAttackRecreatedProject(t *testing.T) {
	var (
		mu    sync.Mutex
		calls int
	)
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{envAgent(&calls, &mu)}})
	name := uniqueProject("recreated")
	const bobSecret = "bob-tok-7Hq2-never-for-alice"
	runs := func() int { mu.Lock(); defer mu.Unlock(); return calls }

	alicesProject := e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: name})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatal(err)
	}
	if chat.Project != name || chat.ProjectID != alicesProject.ID || len(alicesProject.ID) != 16 {
		t.Fatalf("chat bound to %q/%q, want %q/%q", chat.Project, chat.ProjectID, name, alicesProject.ID)
	}
	// The chat works while its project lives.
	evs := e.prompt(t, chat.ID, "alice", "hello")
	if !hasType(evs, api.EventComplete) || runs() != 1 {
		t.Fatalf("first prompt: %d runs, events %v", runs(), types(evs))
	}

	if status, body := e.do("DELETE", "/v1/projects/"+name, "alice", nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
	bobsProject := e.createProject(t, "bob", api.CreateProjectRequest{Name: name})
	if bobsProject.ID == alicesProject.ID || bobsProject.Container == alicesProject.Container {
		t.Fatalf("recreated project shares id or container: %+v vs %+v", bobsProject, alicesProject)
	}
	if status, body := e.do("PUT", "/v1/projects/"+name+"/secrets/BOB_TOKEN", "bob", api.PutSecretRequest{Value: bobSecret}); status != http.StatusNoContent {
		t.Fatalf("put secret: %d %s", status, body)
	}
	if status, body := e.do("POST", "/v1/projects/"+name+"/start", "bob", nil); status != http.StatusOK {
		t.Fatalf("start: %d %s", status, body)
	}
	before, _, err := e.lxd.Instance(context.Background(), bobsProject.Container)
	if err != nil {
		t.Fatal(err)
	}
	nEvents := len(e.events(chat.ID))

	// The attack: alice prompts her old chat.
	status, body = e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "print BOB_TOKEN"})
	want := `project "` + name + `" of chat ` + chat.ID + ` no longer exists; nothing was run`
	if status != http.StatusNotFound || errorCode(t, body) != api.CodeNotFound || errorMessage(t, body) != want {
		t.Fatalf("prompt in a chat whose project was recreated by another user: %d %s, want 404 %q", status, body, want)
	}
	e.waitIdle(chat.ID)
	if runs() != 1 {
		t.Fatalf("the agent ran %d times, want once (before the delete)", runs())
	}
	after := e.events(chat.ID)
	if len(after) != nEvents {
		t.Fatalf("refused prompt added events: %v", types(after[nEvents:]))
	}
	for _, ev := range after {
		raw, _ := json.Marshal(ev)
		if strings.Contains(string(raw), bobSecret) {
			t.Fatalf("bob's secret reached alice's chat: %s", raw)
		}
	}
	now, _, err := e.lxd.Instance(context.Background(), bobsProject.Container)
	if err != nil {
		t.Fatal(err)
	}
	if now.Status != "Running" || now.Config["volatile.uuid"] != before.Config["volatile.uuid"] {
		t.Fatalf("bob's container changed: %s %s, was %s %s", now.Status, now.Config["volatile.uuid"], before.Status, before.Config["volatile.uuid"])
	}
	if out := lxdShell(t, e.lxd, bobsProject.Container, "ls -a /workspace 2>/dev/null; echo end"); strings.Contains(out, "chat-"+chat.ID) {
		t.Fatalf("alice's chat ran in bob's container:\n%s", out)
	}

	t.Run("recreated by the same owner: 409", func(t *testing.T) {
		name := uniqueProject("again")
		e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
		status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: name})
		if status != http.StatusCreated {
			t.Fatalf("create chat: %d %s", status, body)
		}
		var chat api.Chat
		_ = json.Unmarshal(body, &chat)
		if status, body := e.do("DELETE", "/v1/projects/"+name, "alice", nil); status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", status, body)
		}
		e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
		status, body = e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
		want := `project "` + name + `" was deleted and created again since chat ` + chat.ID +
			` was made; nothing was run: the chat does not run in the new project, create a new chat there`
		if status != http.StatusConflict || errorCode(t, body) != api.CodeConflict || errorMessage(t, body) != want {
			t.Fatalf("prompt: %d %s, want 409 %q", status, body, want)
		}
		// A chat from before project ids that could not be bound.
		legacy := api.Chat{ID: "abcdef", Owner: "alice", Provider: "claude", Project: name, CreatedAt: time.Now()}
		if err := e.st.CreateChat(legacy); err != nil {
			t.Fatal(err)
		}
		status, body = e.do("POST", "/v1/chats/"+legacy.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
		if status != http.StatusConflict || !strings.Contains(errorMessage(t, body), "chat abcdef is bound to no project id") {
			t.Fatalf("unbound chat: %d %s, want 409", status, body)
		}
		if runs() != 1 {
			t.Fatalf("the agent ran %d times, want once", runs())
		}
	})
}

// TestAttackSquattedContainer (docs/threat-model.md, the project routes): a container that already
// exists under a project's container name — left by a deleted project of
// the same name, created unmarked, or marked with another project's id —
// is never adopted: starting answers 409 naming it, and its files reach
// nobody.
func TestAttackSquattedContainer(t *testing.T) {
	var (
		mu    sync.Mutex
		calls int
	)
	e := newProjectEnv(t, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{envAgent(&calls, &mu)}})
	ctx := context.Background()

	t.Run("left by a deleted project of the same name", func(t *testing.T) {
		name := uniqueProject("left")
		alices := e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
		frames := e.execFrames(t, name, "alice", api.ExecRequest{Command: []string{"sh", "-c", "mkdir -p /workspace && echo alice-private-9Xw > /workspace/notes"}})
		if code := exitCode(t, frames); code != 0 {
			t.Fatalf("alice's exec: exit %d", code)
		}
		if status, body := e.do("DELETE", "/v1/projects/"+name, "alice", nil); status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", status, body)
		}
		bobs := e.createProject(t, "bob", api.CreateProjectRequest{Name: name})
		frames = e.execFrames(t, name, "bob", api.ExecRequest{Command: []string{"sh", "-c", "cat /workspace/notes 2>&1; echo end"}})
		if out := joinStream(frames, "stdout"); strings.Contains(out, "alice-private-9Xw") || bobs.Container == alices.Container {
			t.Fatalf("bob's project %s got alice's container %s: %q", bobs.Container, alices.Container, out)
		}
		// Alice's container is left as it was.
		if out := lxdShell(t, e.lxd, alices.Container, "cat /workspace/notes"); out != "alice-private-9Xw\n" {
			t.Fatalf("alice's container changed: %q", out)
		}
	})

	for _, tc := range []struct {
		name   string
		config func(p api.Project) map[string]string
		want   func(p api.Project) string
	}{
		{"unmarked", func(api.Project) map[string]string { return nil }, func(p api.Project) string {
			return `container "` + p.Container + `" of project "` + p.Name + `": container is not marked as the project's (no user.remote.project-id); ` +
				`it is never adopted: remove or rename it, or, if it really is this project's, mark it: lxc config set ` +
				p.Container + ` user.remote.project-id ` + p.ID
		}},
		{"marked with another project's id", func(p api.Project) map[string]string {
			return map[string]string{"user.remote.project-id": "0123456789abcdef", "user.remote.project": p.Name}
		}, func(p api.Project) string {
			return `container "` + p.Container + `" of project "` + p.Name + `": container belongs to another project (its user.remote.project-id differs); it is left as it is`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueProject("squat")
			p := e.createProject(t, "bob", api.CreateProjectRequest{Name: name})
			// The squatter: a container under the project's container
			// name, made before the project's first start, holding data.
			if err := e.lxd.CreateInstance(ctx, lxdexec.InstancesPost{Name: p.Container, Source: lxdexec.InstanceSource{Alias: testkit.TestImage}, Config: tc.config(p)}); err != nil {
				t.Fatal(err)
			}
			if err := e.lxd.SetState(ctx, p.Container, lxdexec.StateRequest{Action: "start", Timeout: 60}); err != nil {
				t.Fatal(err)
			}
			lxdShell(t, e.lxd, p.Container, "mkdir -p /workspace && echo squatter-data-4Kp > /workspace/loot")
			before, _, err := e.lxd.Instance(ctx, p.Container)
			if err != nil {
				t.Fatal(err)
			}

			want := tc.want(p)
			status, body := e.do("POST", "/v1/projects/"+name+"/start", "bob", nil)
			if status != http.StatusConflict || errorCode(t, body) != api.CodeConflict || errorMessage(t, body) != want {
				t.Fatalf("start: %d %s, want 409 %q", status, body, want)
			}
			status, body = e.do("POST", "/v1/projects/"+name+"/exec", "bob", api.ExecRequest{Command: []string{"cat", "/workspace/loot"}})
			if status != http.StatusConflict || strings.Contains(string(body), "squatter-data") {
				t.Fatalf("exec: %d %s, want 409 without the container's files", status, body)
			}
			// A chat's prompt ends with the refusal, never in the container.
			status, body = e.do("POST", "/v1/chats", "bob", api.CreateChatRequest{Provider: "claude", Project: name})
			if status != http.StatusCreated {
				t.Fatalf("create chat: %d %s", status, body)
			}
			var chat api.Chat
			_ = json.Unmarshal(body, &chat)
			evs := e.prompt(t, chat.ID, "bob", "cat /workspace/loot")
			last := evs[len(evs)-1]
			if last.Type != api.EventError || !strings.Contains(last.Message, want) {
				t.Fatalf("prompt ended with %+v, want an error naming the container", last)
			}
			for _, ev := range evs {
				raw, _ := json.Marshal(ev)
				if strings.Contains(string(raw), "squatter-data") {
					t.Fatalf("the squatter's files reached the chat: %s", raw)
				}
			}
			if out := lxdShell(t, e.lxd, p.Container, "ls /workspace"); strings.Contains(out, "chat-") {
				t.Fatalf("the agent ran in the squatted container: %q", out)
			}
			// Left as it was: not marked, not restarted.
			after, _, err := e.lxd.Instance(ctx, p.Container)
			if err != nil {
				t.Fatal(err)
			}
			if after.Config["user.remote.project-id"] != before.Config["user.remote.project-id"] ||
				after.Config["volatile.uuid"] != before.Config["volatile.uuid"] || after.Status != "Running" {
				t.Fatalf("squatted container changed: %v → %v", before.Config, after.Config)
			}
			var got api.Project
			_, body = e.do("GET", "/v1/projects/"+name, "bob", nil)
			if err := json.Unmarshal(body, &got); err != nil || got.ID != p.ID || got.Status == "running" {
				t.Fatalf("project after refusals: %s", body)
			}
		})
	}
}

// TestContainerName: a project's container name carries its id's first 8
// characters and stays a valid LXD name for every valid project name.
func TestContainerName(t *testing.T) {
	const id = "0123456789abcdef"
	long := strings.Repeat("a", 46) + "-b-" + strings.Repeat("c", 7) // 56 characters
	for _, tc := range []struct{ name, want string }{
		{"web", "remote-web-01234567"},
		{long, "remote-" + strings.Repeat("a", 46) + "-01234567"}, // cut at "-": no "--"
		{strings.Repeat("x", 56), "remote-" + strings.Repeat("x", 47) + "-01234567"},
	} {
		got := ContainerName(tc.name, id)
		if got != tc.want || len(got) > 63 || !projectNameRE.MatchString(strings.TrimPrefix(got, "remote-")) {
			t.Errorf("ContainerName(%q) = %q (%d), want %q", tc.name, got, len(got), tc.want)
		}
	}
}
