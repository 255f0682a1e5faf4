package projectapi

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"remote/api"
	"remote/providers"
)

// branchChat creates alice's chat in project with branch and worktree.
func (e *repoEnv) branchChat(t *testing.T, project, branch string, worktree bool) api.Chat {
	t.Helper()
	status, body := e.call(t, "POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: project, Branch: branch, Worktree: worktree})
	if status != http.StatusCreated {
		t.Fatalf("create chat on %s: %d %s", branch, status, body)
	}
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatal(err)
	}
	return chat
}

// lxcSh runs script in container and returns its output.
func lxcSh(t *testing.T, container, script string) string {
	t.Helper()
	out, err := exec.Command("lxc", "exec", container, "--", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("lxc exec %q: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// eventText is what the run said: its text and error messages.
func eventText(evs []api.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == api.EventUser {
			continue // the prompt itself
		}
		b.WriteString(ev.Text)
		b.WriteString(ev.Message)
	}
	return b.String()
}

// TestChatBranchWorktrees: two chats of one project with worktrees work
// at the same time (chat A waits, running, until chat B has written),
// each in /workspace/.worktrees/<chat id> on its own branch made from the
// clone's base: both write same.txt and neither sees the other's; the
// main tree sees neither (excluded), its diff is empty; each chat's
// whole-chat and turn diffs hold its own change only; each push lands
// its own branch with its own file. A chat asking for A's branch gets a
// conflict (a branch works in one place), as does a chat whose branch
// would switch /workspace while A runs; once nothing runs, that chat's
// turn runs in /workspace on its branch. A chat asking for another
// chat's remote/<id8> is refused (and, were it made, could not put its
// commit into that chat's push). Bob sees none of alice's chats.
func TestChatBranchWorktrees(t *testing.T) {
	const token = "tok_branch_0123456789abcdef"
	e := newRepoEnv(t, token)
	url := e.git.NewRepo(t, "acme/calc", map[string]string{"calc.py": calcPy, "test_calc.py": testCalcPy})
	proj, plain := e.chatWithRepo(t, api.ProjectRepo{URL: url, TokenSecret: "GIT_TOKEN"}, token)
	a := e.branchChat(t, proj.Name, "feature/a", true)
	b := e.branchChat(t, proj.Name, "feature/b", true)
	c := e.branchChat(t, proj.Name, "feature/c", false)
	twin := e.branchChat(t, proj.Name, "feature/a", true)
	if a.Branch != "feature/a" || !a.Worktree || c.Branch != "feature/c" || c.Worktree {
		t.Errorf("created chats: %+v %+v", a, c)
	}
	if status, body := e.call(t, "GET", "/v1/chats/"+a.ID, "alice", nil); status != http.StatusOK ||
		!strings.Contains(string(body), `"branch":"feature/a","worktree":true`) {
		t.Errorf("GET chat: %d %s", status, body)
	}
	e.prompt(t, plain.ID, "alice", "true") // the container is made and cloned

	// A, running until B has written.
	status, body := e.call(t, "POST", "/v1/chats/"+a.ID+"/prompt", "alice", api.PromptRequest{
		Text: "pwd; git branch --show-current; echo A > same.txt; i=0; while [ ! -e /tmp/b-done ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo A-SAW-$(cat same.txt)"})
	if status != http.StatusAccepted {
		t.Fatalf("prompt A: %d %s", status, body)
	}
	// C would switch /workspace from main to feature/c under A's run.
	evsC := e.prompt(t, c.ID, "alice", "echo C-RAN")
	if txt := eventText(evsC); strings.Contains(txt, "C-RAN") || !strings.Contains(txt, "another chat of the project is running") {
		t.Errorf("C's turn while A runs: %q", txt)
	}
	// The twin asks for A's branch in a worktree of its own.
	if txt := eventText(e.prompt(t, twin.ID, "alice", "echo TWIN-RAN")); strings.Contains(txt, "TWIN-RAN") ||
		!strings.Contains(txt, `branch "feature/a" is checked out in /workspace/.worktrees/`+a.ID) {
		t.Errorf("the twin's turn: %q", txt)
	}
	evsB := e.prompt(t, b.ID, "alice", "pwd; git branch --show-current; echo B > same.txt; echo B-SAW-$(cat same.txt); touch /tmp/b-done")
	e.waitIdle(a.ID)
	evsA := e.events(a.ID)
	for chat, want := range map[string][]string{
		eventText(evsA): {"/workspace/.worktrees/" + a.ID + "\nfeature/a\n", "A-SAW-A"},
		eventText(evsB): {"/workspace/.worktrees/" + b.ID + "\nfeature/b\n", "B-SAW-B"},
	} {
		for _, w := range want {
			if !strings.Contains(chat, w) {
				t.Errorf("a chat's output %q lacks %q", chat, w)
			}
		}
	}
	if got := lxcSh(t, proj.Container, "cat /workspace/.worktrees/"+a.ID+"/same.txt /workspace/.worktrees/"+b.ID+"/same.txt; ls /workspace"); got != "A\nB\ncalc.py\ntest_calc.py" {
		t.Errorf("the files: %q", got)
	}
	if got := lxcSh(t, proj.Container, "git -C /workspace status --porcelain --ignored=no; git -C /workspace branch --show-current"); got != "main" {
		t.Errorf("the main tree: %q, want it clean on main", got)
	}
	if d := e.diff(t, plain.ID, ""); len(d.Files) != 0 {
		t.Errorf("the main tree's diff: %+v", d.Files)
	}
	userA, _ := eventOf(evsA, api.EventUser, "")
	for _, x := range []struct {
		chat, query string
	}{{a.ID, ""}, {b.ID, ""}, {a.ID, "?turn=" + strconv.FormatInt(userA.Seq, 10)}} {
		if d := e.diff(t, x.chat, x.query); len(d.Files) != 1 || d.Files[0] != (api.DiffFile{Path: "same.txt", Status: "A", Additions: 1}) {
			t.Errorf("diff of %s%s: %+v", x.chat, x.query, d.Files)
		}
	}

	// Each push lands its own branch with its own file.
	for chat, want := range map[string]string{a.ID: "feature/a|A", b.ID: "feature/b|B"} {
		status, body := e.call(t, "POST", "/v1/chats/"+chat+"/push", "alice", api.PushRequest{})
		var pushed api.PushResult
		if status != http.StatusOK || json.Unmarshal(body, &pushed) != nil {
			t.Fatalf("push %s: %d %s", chat, status, body)
		}
		if got := pushed.Branch + "|" + e.git.Git(t, "acme/calc", "show", pushed.SHA+":same.txt"); got != want {
			t.Errorf("push of %s: %q, want %q", chat, got, want)
		}
		if refs := e.git.LsRemote(t, "acme/calc"); !strings.Contains(refs, pushed.SHA+"\trefs/heads/"+pushed.Branch) {
			t.Errorf("ls-remote:\n%s\nwant %s", refs, pushed.Branch)
		}
	}

	// Nothing runs now: C's turn switches /workspace to its branch.
	if txt := eventText(e.prompt(t, c.ID, "alice", "pwd; git branch --show-current")); !strings.Contains(txt, "/workspace\nfeature/c\n") {
		t.Errorf("C's turn alone: %q", txt)
	}

	// Another chat's default push branch.
	status, body = e.call(t, "POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: proj.Name, Branch: "remote/" + plain.ID[:8]})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "branch") {
		t.Errorf("a chat on remote/%s: %d %s", plain.ID[:8], status, body)
	}
	if status == http.StatusCreated { // the attack, when it is let in
		var thief api.Chat
		_ = json.Unmarshal(body, &thief)
		e.prompt(t, thief.ID, "alice", "echo EVIL > evil.txt")
		e.call(t, "POST", "/v1/chats/"+thief.ID+"/push", "alice", api.PushRequest{})
		e.prompt(t, c.ID, "alice", "git checkout -q main")
		e.prompt(t, plain.ID, "alice", "echo mine > mine.txt")
		_, body := e.call(t, "POST", "/v1/chats/"+plain.ID+"/push", "alice", api.PushRequest{})
		var pushed api.PushResult
		_ = json.Unmarshal(body, &pushed)
		if got := e.git.Git(t, "acme/calc", "ls-tree", "--name-only", pushed.SHA); strings.Contains(got, "evil.txt") {
			t.Errorf("another chat's commit is in %s's push: %q", plain.ID, got)
		}
	}

	// Bob: alice's chats, their diffs and pushes, her project's branch.
	for _, r := range [][2]string{{"GET", "/v1/chats/" + a.ID}, {"GET", "/v1/chats/" + a.ID + "/diff"}, {"POST", "/v1/chats/" + a.ID + "/push"}} {
		if status, body := e.call(t, r[0], r[1], "bob", api.PushRequest{}); status != http.StatusNotFound {
			t.Errorf("bob's %s %s: %d %s", r[0], r[1], status, body)
		}
	}
	if status, body := e.call(t, "POST", "/v1/chats", "bob", api.CreateChatRequest{Provider: "claude", Project: proj.Name, Branch: "feature/a", Worktree: true}); status != http.StatusNotFound {
		t.Errorf("bob's chat on alice's branch: %d %s", status, body)
	}
	if status, body := e.call(t, "GET", "/v1/chats", "bob", nil); status != http.StatusOK || strings.Contains(string(body), "feature/") {
		t.Errorf("bob's chat list: %d %s", status, body)
	}
}

// TestChatBranchRefused: a branch that is an option, a path, a ref
// path, a revision expression or the daemon's own name, a branch of a
// loose chat or of a project without a repository, and a worktree without
// a branch are refused with 400 naming the field; no chat is made.
func TestChatBranchRefused(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{images: []string{devImage}, providers: []func(providers.AdapterConfig) providers.Provider{shellAgent}})
	withRepo := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("br"), Image: devImage,
		Repo: &api.ProjectRepo{URL: "https://git.example.com/acme/calc.git"}})
	bare := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("nobr"), Image: devImage})
	other := e.newChat(t, "claude", withRepo.Name)
	before, _ := e.st.Chats()
	for _, c := range []struct {
		req   api.CreateChatRequest
		field string
	}{
		{api.CreateChatRequest{Branch: "--upload-pack=touch /tmp/x"}, "branch"},
		{api.CreateChatRequest{Branch: "-b"}, "branch"},
		{api.CreateChatRequest{Branch: "../.."}, "branch"},
		{api.CreateChatRequest{Branch: "refs/heads/x"}, "branch"},
		{api.CreateChatRequest{Branch: "refs/remote/base"}, "branch"},
		{api.CreateChatRequest{Branch: "remote/" + other.ID[:8]}, "branch"},
		{api.CreateChatRequest{Branch: "main@{1}"}, "branch"},
		{api.CreateChatRequest{Branch: "a..b"}, "branch"},
		{api.CreateChatRequest{Branch: "x.lock"}, "branch"},
		{api.CreateChatRequest{Branch: "HEAD"}, "branch"},
		{api.CreateChatRequest{Branch: "a b"}, "branch"},
		{api.CreateChatRequest{Worktree: true}, "worktree"},
		{api.CreateChatRequest{Project: "-", Branch: "feature"}, "branch"},       // a loose chat
		{api.CreateChatRequest{Project: "-", Worktree: true}, "worktree"},        // a loose chat
		{api.CreateChatRequest{Project: bare.Name, Branch: "feature"}, "branch"}, // no repository
	} {
		req := c.req
		req.Provider = "claude"
		switch req.Project {
		case "":
			req.Project = withRepo.Name
		case "-":
			req.Project = ""
		}
		status, body := e.do("POST", "/v1/chats", "alice", req)
		if status != http.StatusBadRequest || !strings.Contains(string(body), `"`+c.field) {
			t.Errorf("%+v: %d %s, want 400 naming %s", req, status, body, c.field)
		}
	}
	if after, _ := e.st.Chats(); len(after) != len(before) {
		t.Errorf("%d chats made by refused requests", len(after)-len(before))
	}
}
