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
	testkit.Eventually(t, 3*time.Minute, func() bool { return !e.d.System.Hub.Running(chatID) }, "chat %s still running", chatID)
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

// state is the LXD status of container ("Running", "Stopped").
func (e *env) state(t *testing.T, container string) string {
	t.Helper()
	inst, _, err := e.d.LXD.Instance(context.Background(), container)
	if err != nil {
		t.Fatalf("instance %s: %v", container, err)
	}
	return inst.Status
}

// errorOf decodes an error answer.
func errorOf(t *testing.T, body string) api.ErrorBody {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error
}

// TestAttackDiffStartsNoContainer (security review finding 6): a GET of
// a chat's diff, which a link in agent-written Markdown can make the
// page send, never starts its project's stopped container: the whole
// chat's and a turn's diff answer 503 naming the project's state and how
// to start it, and the container stays stopped. Once started, the same
// diff answers.
func TestAttackDiffStartsNoContainer(t *testing.T) {
	e := newEnv(t, nil)
	url := e.git.NewRepo(t, "acme/stopped", map[string]string{"README": "stopped\n"})
	proj, chat := e.chat(t, "alice", url)
	seq := e.prompt(t, chat.ID, "alice", "echo x > a.txt")
	if status, body := e.do(t, "POST", "/v1/projects/"+proj.Name+"/stop", "alice", nil); status != http.StatusOK {
		t.Fatalf("stop: %d %s", status, body)
	}
	want := fmt.Sprintf("project %q is not running (its container is stopped): start it with POST /v1/projects/%s/start", proj.Name, proj.Name)
	for _, q := range []string{"", "?turn=" + strconv.FormatInt(seq, 10)} {
		status, _, body := e.diff(t, chat.ID, q)
		if eb := errorOf(t, body); status != http.StatusServiceUnavailable || eb.Code != "unavailable" || eb.Message != want {
			t.Errorf("diff%s of a stopped project: %d %s, want 503 %q", q, status, body, want)
		}
		if s := e.state(t, proj.Container); s != "Stopped" {
			t.Fatalf("after GET diff%s the container is %s", q, s)
		}
	}
	if status, body := e.do(t, "POST", "/v1/projects/"+proj.Name+"/start", "alice", nil); status != http.StatusOK {
		t.Fatalf("start: %d %s", status, body)
	}
	if status, d, body := e.diff(t, chat.ID, ""); status != http.StatusOK || paths(d) != "a.txt:A" {
		t.Errorf("diff once started: %d %q (%s)", status, paths(d), body)
	}
	// Stopped behind the daemon's back (its record still says running):
	// LXD refuses the exec, the diff answers 503 and starts nothing.
	testkit.BehindTheBack(t, "stop the container", func() ([]byte, error) {
		return exec.Command("lxc", "stop", "--force", proj.Container).CombinedOutput()
	})
	status, _, body := e.diff(t, chat.ID, "")
	if eb := errorOf(t, body); status != http.StatusServiceUnavailable || eb.Code != "unavailable" ||
		eb.Message != fmt.Sprintf("container %q is not running: start its project", proj.Container) {
		t.Errorf("diff of a container stopped behind the daemon's back: %d %s", status, body)
	}
	if s := e.state(t, proj.Container); s != "Stopped" {
		t.Errorf("after GET diff the container is %s", s)
	}
}

// TestAttackDiffOfManyFiles (security review finding 5): the agent
// fills the working tree with more files than a diff lists, then with
// fewer files of long names whose listing is past its bound. Each diff
// is refused with 413 naming the bound (it was a 500 after the daemon
// had read up to 64 MiB of git's listing, and a 200 of every name
// below that); the daemon answers the next diff.
func TestAttackDiffOfManyFiles(t *testing.T) {
	e := newEnv(t, nil)
	url := e.git.NewRepo(t, "acme/many", map[string]string{"README": "many\n"})
	_, chat := e.chat(t, "alice", url)
	const hint = ": diff one turn (?turn=), or push the chat and compare its branch on the forge"
	e.prompt(t, chat.ID, "alice", `mkdir many && cd many && python3 -c 'for i in range(10001): open("f%d" % i, "w").close()'`)
	status, _, body := e.diff(t, chat.ID, "")
	if eb := errorOf(t, body); status != http.StatusRequestEntityTooLarge || eb.Code != "bad_request" || eb.Message != "the diff lists more than 10000 files"+hint {
		t.Errorf("10001 files: %d %s", status, body)
	}
	// 9000 names of 240 bytes: about 5 MiB of listing.
	e.prompt(t, chat.ID, "alice", `rm -rf many && mkdir long && cd long && python3 -c 'for i in range(9000): open("n" * 234 + "%06d" % i, "w").close()'`)
	status, _, body = e.diff(t, chat.ID, "")
	if eb := errorOf(t, body); status != http.StatusRequestEntityTooLarge || eb.Code != "bad_request" ||
		eb.Message != "the diff's file list (its paths and git's records of them) is longer than 4194304 bytes"+hint {
		t.Errorf("9000 long names: %d %s", status, body)
	}
	e.prompt(t, chat.ID, "alice", `rm -rf long && echo ok > small.txt`)
	if status, d, body := e.diff(t, chat.ID, ""); status != http.StatusOK || paths(d) != "small.txt:A" {
		t.Errorf("diff afterwards: %d %q (%s)", status, paths(d), body)
	}
}

// lxcIn runs script in container and returns its output (its exit status
// aside).
func lxcIn(container, script string) string {
	out, _ := exec.Command("lxc", "exec", container, "--", "sh", "-c", script).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// held counts the diffs held in container: the daemon's copies of its own
// index (cp, the first step of recording the working tree), blocked on
// the FIFO the agent put in its place.
func held(container string) int {
	n, _ := strconv.Atoi(lxcIn(container, `for d in /proc/[0-9]*; do [ "$(cat "$d/comm" 2>/dev/null)" = cp ] && echo; done | wc -l`))
	return n
}

// TestAttackDiffsPastTheBudget (security review finding 5): alice's agent
// makes every diff of her chat hang (the daemon's index of her working
// tree becomes a FIFO, which the diff's copy waits on), and she asks for
// diffs while two are held. The third is refused at once with 503 naming
// the per-user bound (it would hang, and hold its memory, too); bob's,
// in a project of his own, is refused naming the daemon's diff budget,
// which her two diffs fill (a budget of two diffs here). Once they end,
// both answer again.
func TestAttackDiffsPastTheBudget(t *testing.T) {
	cost := int64(35 << 20) // one diff's worst case with the default bounds
	e := newEnv(t, func(o *repoapi.Options) { o.DiffMemory = 2 * cost })
	url := e.git.NewRepo(t, "acme/budget", map[string]string{"README": "budget\n"})
	alice, aliceChat := e.chat(t, "alice", url)
	_, bobChat := e.chat(t, "bob", url)
	e.prompt(t, bobChat.ID, "bob", "echo b > b.txt")
	e.prompt(t, aliceChat.ID, "alice", "echo a > a.txt && rm -f .git/remote-tree-index && mkfifo .git/remote-tree-index")

	type answer struct {
		status int
		body   string
	}
	diff := func(chatID, user string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("GET", "http://remoted/v1/chats/"+chatID+"/diff", nil)
			req.Header.Set(api.HeaderUser, user)
			resp, err := e.http.Do(req)
			if err != nil {
				ch <- answer{0, err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ch <- answer{resp.StatusCode, string(b)}
		}()
		return ch
	}
	// waitHeld waits until n diffs are held in alice's container or one
	// of chs answers (its answer is returned).
	waitHeld := func(n int, chs ...chan answer) (answer, bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for held(alice.Container) < n {
			for _, ch := range chs {
				select {
				case a := <-ch:
					return a, true
				default:
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d diffs held in alice's container, want %d", held(alice.Container), n)
			}
			time.Sleep(50 * time.Millisecond) //nolint:forbidigo // polls three channels and the container together
		}
		return answer{}, false
	}
	first, second := diff(aliceChat.ID, "alice"), diff(aliceChat.ID, "alice")
	if a, early := waitHeld(2, first, second); early {
		t.Fatalf("a held diff answered: %d %s", a.status, a.body)
	}

	third := diff(aliceChat.ID, "alice")
	a, answered := waitHeld(3, third)
	if !answered {
		t.Error("alice's third diff was admitted while two were held")
	} else if eb := errorOf(t, a.body); a.status != http.StatusServiceUnavailable || eb.Code != "unavailable" ||
		eb.Message != `2 diffs of user "alice" are in progress, at most 2 at once: retry when one has ended` {
		t.Errorf("alice's third diff: %d %s", a.status, a.body)
	}
	status, body := e.do(t, "GET", "/v1/chats/"+bobChat.ID+"/diff", "bob", nil)
	want := fmt.Sprintf("the diffs in progress hold %d of the daemon's %d bytes for diffs and this one needs %d: retry shortly", 2*cost, 2*cost, cost)
	if eb := errorOf(t, string(body)); status != http.StatusServiceUnavailable || eb.Code != "unavailable" || eb.Message != want {
		t.Errorf("bob's diff past the budget: %d %s, want 503 %q", status, body, want)
	}

	// The FIFO opened for writing: the held copies read nothing and end.
	lxcIn(alice.Container, ": > /workspace/.git/remote-tree-index")
	for _, ch := range []chan answer{first, second, third} {
		if !answered || ch != third {
			<-ch
		}
	}
	lxcIn(alice.Container, "rm -f /workspace/.git/remote-tree-index")
	if status, d, body := e.diff(t, aliceChat.ID, ""); status != http.StatusOK || paths(d) != "a.txt:A" {
		t.Errorf("alice's diff afterwards: %d %q (%s)", status, paths(d), body)
	}
	if status, body := e.do(t, "GET", "/v1/chats/"+bobChat.ID+"/diff", "bob", nil); status != http.StatusOK {
		t.Errorf("bob's diff afterwards: %d %s", status, body)
	}
}
