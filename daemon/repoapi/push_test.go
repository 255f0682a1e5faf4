package repoapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"remote/api"
)

// push answers POST /v1/chats/{id}/push with req as alice.
func (e *env) push(t *testing.T, chatID string, req api.PushRequest) (int, api.PushResult, string) {
	t.Helper()
	status, body := e.do(t, "POST", "/v1/chats/"+chatID+"/push", "alice", req)
	var res api.PushResult
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
	}
	return status, res, string(body)
}

// changed lists the files commit sha of repository repo changed against
// its parent, as the server has it.
func (e *env) changed(t *testing.T, repo, sha string) string {
	t.Helper()
	return strings.Join(strings.Fields(e.git.Git(t, repo, "diff-tree", "--no-commit-id", "--name-status", "-r", sha)), " ")
}

// TestPushTakesWhatTheUserMeans (issue "the operator's path"): a turn
// writes a source file, Python's byte code and a file .gitignore names.
// The default push commits the source and the tracked file's change, not
// the byte code (it committed everything untracked before); all: true
// commits the byte code too; neither ever commits the ignored file;
// paths commits only the paths named (a deletion included). A path that
// matches nothing, or an ignored one, is 400 naming it, and pushes
// nothing.
func TestPushTakesWhatTheUserMeans(t *testing.T) {
	e := newEnv(t, nil)
	const repo = "acme/means"
	url := e.git.NewRepo(t, repo, map[string]string{"README": "means\n", ".gitignore": "secret.env\n", "src/old.py": "old\n"})
	_, chat := e.chat(t, "alice", url)
	e.prompt(t, chat.ID, "alice", "mkdir -p src __pycache__ src/node_modules/m && echo x > src/x.py && echo m >> src/old.py && "+
		"echo c > __pycache__/x.cpython.pyc && echo c > src/node_modules/m/i.js && echo s > secret.env")
	status, res, body := e.push(t, chat.ID, api.PushRequest{})
	if status != http.StatusOK {
		t.Fatalf("default push: %d %s", status, body)
	}
	if got := e.changed(t, repo, res.SHA); got != "M src/old.py A src/x.py" {
		t.Errorf("default push committed %q, want the source only", got)
	}
	status, res, body = e.push(t, chat.ID, api.PushRequest{All: true})
	if status != http.StatusOK {
		t.Fatalf("push all: %d %s", status, body)
	}
	if got := e.changed(t, repo, res.SHA); got != "A __pycache__/x.cpython.pyc A src/node_modules/m/i.js" {
		t.Errorf("push all committed %q, want the build output", got)
	}
	if tree := e.git.Git(t, repo, "ls-tree", "-r", "--name-only", res.SHA); strings.Contains(tree, "secret.env") {
		t.Errorf("the ignored file was pushed:\n%s", tree)
	}

	e.prompt(t, chat.ID, "alice", "echo a > a.txt && mkdir d && echo b > d/b.txt && echo c > c.txt && rm README")
	before := e.git.LsRemote(t, repo)
	for _, c := range []struct{ path, want string }{
		{"nope.txt", `paths[1] "nope.txt": matches no file in the chat's working tree (/workspace)`},
		{"secret.env", `paths[1] "secret.env": is ignored (.gitignore or .git/info/exclude); a push never commits ignored files`},
	} {
		status, _, body := e.push(t, chat.ID, api.PushRequest{Paths: []string{"a.txt", c.path}})
		if eb := errorOf(t, body); status != http.StatusBadRequest || eb.Message != c.want {
			t.Errorf("push of %q: %d %s, want 400 %q", c.path, status, body, c.want)
		}
	}
	if after := e.git.LsRemote(t, repo); after != before {
		t.Errorf("a refused push pushed:\n%s\nwas\n%s", after, before)
	}
	status, res, body = e.push(t, chat.ID, api.PushRequest{Paths: []string{"a.txt", "d/", "README"}})
	if status != http.StatusOK {
		t.Fatalf("push paths: %d %s", status, body)
	}
	if got := e.changed(t, repo, res.SHA); got != "D README A a.txt A d/b.txt" {
		t.Errorf("push of paths committed %q, want those paths only", got)
	}
}

// TestAttackPushPaths: push paths that would leave the chat's working
// tree, read as options of git, or widen to other files as pathspec magic
// or globs are refused with 400 naming the path, and nothing is pushed.
func TestAttackPushPaths(t *testing.T) {
	e := newEnv(t, nil)
	const repo = "acme/paths"
	url := e.git.NewRepo(t, repo, map[string]string{"README": "paths\n"})
	_, chat := e.chat(t, "alice", url)
	e.prompt(t, chat.ID, "alice", "echo x > x.txt && echo y > y.txt")
	before := e.git.LsRemote(t, repo)
	for _, c := range []struct{ path, want string }{
		{"../etc/passwd", `paths[0] "../etc/passwd": must not contain '..'`},
		{"x/../../etc/passwd", `paths[0] "x/../../etc/passwd": must not contain '..'`},
		{"/etc/passwd", `paths[0] "/etc/passwd": must be relative`},
		{"/workspace/x.txt", `paths[0] "/workspace/x.txt": must be relative`},
		{"-c", `paths[0] "-c": must not start with '-'`},
		{"--upload-pack=x", `paths[0] "--upload-pack=x": must not start with '-'`},
		{"x.txt\x00y.txt", `paths[0] "x.txt\x00y.txt": must not contain control characters`},
		{".git/config", `paths[0] ".git/config": must not name .git`},
		{"", `paths[0] "": must not be empty`},
		{"*", `paths[0] "*": matches no file`},
		{":(glob)**", `paths[0] ":(glob)**": matches no file`},
		{":(exclude)README", `paths[0] ":(exclude)README": matches no file`},
	} {
		status, _, body := e.push(t, chat.ID, api.PushRequest{Paths: []string{c.path}})
		if eb := errorOf(t, body); status != http.StatusBadRequest || !strings.HasPrefix(eb.Message, c.want) {
			t.Errorf("push of %q: %d %s, want 400 %q", c.path, status, body, c.want)
		}
	}
	many := make([]string, 257)
	for i := range many {
		many[i] = "x.txt"
	}
	for _, req := range []api.PushRequest{{Paths: many}, {Paths: []string{strings.Repeat("a", 4097)}}, {All: true, Paths: []string{"x.txt"}}} {
		if status, _, body := e.push(t, chat.ID, req); status != http.StatusBadRequest {
			t.Errorf("push of %d paths (all %v): %d %s, want 400", len(req.Paths), req.All, status, body)
		}
	}
	if after := e.git.LsRemote(t, repo); after != before {
		t.Errorf("a refused push pushed:\n%s\nwas\n%s", after, before)
	}
}
