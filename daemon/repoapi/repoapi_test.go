package repoapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/daemontest"
	"remote/daemon/projectapi"
	"remote/daemon/repoapi"
	"remote/internal/testkit"
	"remote/internal/testkit/gitserver"
	"remote/providers"
	"remote/providers/runner"
)

// devImage is the development image with git.
const devImage = "remote-dev"

// gitToken is the git server's password, the projects' GIT_TOKEN secret.
const gitToken = "tok_diff_0123456789abcdef"

// env is a real daemon on the real LXD whose project containers reach a
// real git server on the host's loopback (a proxy device in a profile of
// their own), with a "claude" whose run is a shell script: the prompt's
// last line, run in the chat's working directory in the container.
type env struct {
	d    *daemontest.Daemon
	git  *gitserver.Server
	http *http.Client
}

func newEnv(t *testing.T, repos func(*repoapi.Options)) *env {
	t.Helper()
	testkit.LXD(t)
	git := gitserver.New(t, gitToken)
	e := &env{git: git}
	agent := daemontest.NewProvider("claude", providers.Capabilities{Label: "Claude Code", Resume: true})
	agent.SetRun(func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		target, launcher, err := runner.PrepareProject(ctx, e.d.Ports, providers.Claude, fmt.Errorf("not wired"), req, emit)
		if err != nil {
			return err
		}
		script := req.Prompt[strings.LastIndexByte(req.Prompt, '\n')+1:]
		proc, err := launcher.Start(ctx, providers.Command{Path: "sh", Dir: cmp.Or(target.Cwd, "/workspace"),
			Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Args: []string{"-c", script}})
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
	})
	e.d = daemontest.New(t, daemontest.Options{LXD: true, Providers: []providers.Provider{agent},
		Profiles: []string{"default", proxyProfile(t, git.Port)},
		Projects: func(o *projectapi.ProjectsOptions) { o.Images = []string{devImage} },
		Repos:    repos,
	})
	e.http = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.d.Socket)
	}}}
	return e
}

// proxyProfile creates an LXD profile whose proxy device makes the host's
// 127.0.0.1:port reachable on the container's 127.0.0.1:port.
func proxyProfile(t *testing.T, port int) string {
	t.Helper()
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "lxc client: %v", err)
	}
	name := "rt-proxy-" + strings.TrimPrefix(testkit.ContainerName("p"), "t-p-")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("lxc", args...).CombinedOutput(); err != nil {
			t.Fatalf("lxc %v: %v\n%s", args, err, out)
		}
	}
	run("profile", "create", name)
	// Registered before the containers' cleanups, so it runs after them.
	t.Cleanup(func() { _ = exec.Command("lxc", "profile", "delete", name).Run() })
	run("profile", "device", "add", name, fmt.Sprintf("port%d", port), "proxy",
		fmt.Sprintf("listen=tcp:127.0.0.1:%d", port), fmt.Sprintf("connect=tcp:127.0.0.1:%d", port), "bind=instance")
	return name
}

// do sends a request as user and returns the status and body.
func (e *env) do(t *testing.T, method, path, user string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://remoted"+path, r)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(api.HeaderUser, user)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// chat creates user's project (the development image, repository url)
// and a chat in it; the container is removed when the test ends.
func (e *env) chat(t *testing.T, user, url string) (api.Project, api.Chat) {
	t.Helper()
	name := strings.TrimPrefix(testkit.ContainerName("diff"), "t-")
	status, body := e.do(t, "POST", "/v1/projects", user, api.CreateProjectRequest{Name: name, Image: devImage,
		Repo: &api.ProjectRepo{URL: url, TokenSecret: "GIT_TOKEN"}})
	if status != http.StatusCreated {
		t.Fatalf("create project: %d %s", status, body)
	}
	var proj api.Project
	if err := json.Unmarshal(body, &proj); err != nil {
		t.Fatal(err)
	}
	testkit.CleanupContainer(t, testkit.LXD(t), proj.Container)
	if status, body := e.do(t, "PUT", "/v1/projects/"+name+"/secrets/GIT_TOKEN", user, api.PutSecretRequest{Value: gitToken}); status != http.StatusNoContent {
		t.Fatalf("put secret: %d %s", status, body)
	}
	status, body = e.do(t, "POST", "/v1/chats", user, api.CreateChatRequest{Provider: "claude", Project: proj.Name})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatal(err)
	}
	return proj, chat
}

// prompt runs one turn (script is its shell line) and returns the seq of
// its user event.
func (e *env) prompt(t *testing.T, chatID, user, script string) int64 {
	t.Helper()
	status, body := e.do(t, "POST", "/v1/chats/"+chatID+"/prompt", user, api.PromptRequest{Text: script})
	if status != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", status, body)
	}
	// The run lock is taken before 202, so waiting for idle is enough.
	deadline := time.Now().Add(3 * time.Minute)
	for e.d.Server.Hub().Running(chatID) {
		if time.Now().After(deadline) {
			t.Fatalf("chat %s still running", chatID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var user1 int64
	var ended api.Event
	_ = e.d.Store.Events(chatID, 0, 0, func(ev api.Event) error {
		if ev.Type == api.EventUser {
			user1 = ev.Seq
		}
		ended = ev
		return nil
	})
	if ended.Type != api.EventComplete {
		t.Fatalf("turn %q ended with %+v", script, ended)
	}
	return user1
}

// diff answers GET /v1/chats/{id}/diff{query} as alice.
func (e *env) diff(t *testing.T, chatID, query string) (int, api.Diff, string) {
	t.Helper()
	status, body := e.do(t, "GET", "/v1/chats/"+chatID+"/diff"+query, "alice", nil)
	var d api.Diff
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
	}
	return status, d, string(body)
}

func paths(d api.Diff) string {
	var out []string
	for _, f := range d.Files {
		out = append(out, f.Path+":"+f.Status)
	}
	return strings.Join(out, ",")
}

// TestDiffTurnIsThatTurnAlone: in a chat of four turns each writing a
// file of its own, ?turn= of each of the first three turns lists exactly
// that turn's file (from the tree at its start to the one at the next
// turn's start), the last turn's the working tree now, and the whole
// chat's diff every file.
func TestDiffTurnIsThatTurnAlone(t *testing.T) {
	e := newEnv(t, nil)
	url := e.git.NewRepo(t, "acme/turns", map[string]string{"README": "turns\n"})
	_, chat := e.chat(t, "alice", url)
	var seqs []int64
	for i := 1; i <= 4; i++ {
		seqs = append(seqs, e.prompt(t, chat.ID, "alice", fmt.Sprintf("echo %d > turn%d.txt", i, i)))
	}
	for i, seq := range seqs {
		status, d, body := e.diff(t, chat.ID, "?turn="+strconv.FormatInt(seq, 10))
		if want := fmt.Sprintf("turn%d.txt:A", i+1); status != http.StatusOK || paths(d) != want {
			t.Errorf("turn %d (seq %d): %d files %q, want %q (%s)", i+1, seq, status, paths(d), want, body)
		}
	}
	if status, d, body := e.diff(t, chat.ID, ""); status != http.StatusOK || paths(d) != "turn1.txt:A,turn2.txt:A,turn3.txt:A,turn4.txt:A" {
		t.Errorf("whole chat: %d files %q (%s)", status, paths(d), body)
	}
}
