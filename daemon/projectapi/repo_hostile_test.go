package projectapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"remote/api"
	"remote/internal/testkit"
)

// TestAttackHostileAgentNeverSeesTheToken: over ten turns an agent that
// replaces every binary on its PATH and git itself with environment
// dumpers, rewrites .git/config (helpers, insteadOf, protocol.*, core.*,
// hooks) and leaves a /proc scanner running, then makes the daemon clone
// again (it moves .git away, as a restart or a failed clone would leave
// /workspace: the daemon keeps no "cloned" state of its own, so a restart
// takes this same path), the chat is forked with its container and the
// fork runs a turn, then the user pushes and opens a pull request. The push
// lands; the token is in nothing the agent collected, in no file of the
// container and in no file of its snapshots (its checkpoints). Before
// the clone and the push ran on the host (gitrepo.Remote), the re-clone
// ran the clone script with the token in its environment, and the
// wrappers collected it.
func TestAttackHostileAgentNeverSeesTheToken(t *testing.T) {
	const token = "tok_hostile_0123456789abcdef"
	e := newRepoEnv(t, token)
	url := e.git.NewRepo(t, "acme/calc", map[string]string{"calc.py": calcPy, "test_calc.py": testCalcPy})
	proj, chat := e.chatWithRepo(t, api.ProjectRepo{URL: url, TokenSecret: "GIT_TOKEN"}, token)
	turns := []string{
		"true",
		// The fake agent runs a prompt's last line: the script goes whole.
		"export REPO=" + url + "; echo " + base64.StdEncoding.EncodeToString([]byte(testkit.HostileGitKit)) + " | base64 -d | sh",
		"sed -i 's/a - b/a + b/' calc.py",
		"mv .git /var/tmp/stolen-git", // the next turn clones again
		"git status --short; echo RECLONED",
		"rm -rf .git && mv /var/tmp/stolen-git .git && git status --short",
		"echo more >> notes.txt",
		"git log --oneline | head -3",
		"python3 -B -c 'import test_calc; test_calc.test_add()' && echo PASSES",
		"ls /var/tmp",
	}
	var text strings.Builder
	var forkAt int64
	for i, p := range turns {
		t.Logf("turn %d: %.60s", i+1, p)
		evs := e.prompt(t, chat.ID, "alice", p)
		if u, ok := eventOf(evs, api.EventUser, ""); ok && i == 7 {
			forkAt = u.Seq // a turn with a checkpoint, after the planting
		}
		for _, ev := range evs {
			text.WriteString(ev.Text)
		}
		if i == 4 {
			if _, ok := eventOf(evs, api.EventSystem, api.SubtypeRepoCloned); !ok {
				t.Errorf("turn %d: no second clone: %+v", i+1, evs)
			}
		}
	}
	if !strings.Contains(text.String(), "PLANTED") || !strings.Contains(text.String(), "PASSES") {
		t.Fatalf("the agent's turns did not run as planned: %q", text.String())
	}
	// A fork with its container: the copy holds what the agent planted;
	// a turn there finds no token either (below).
	status, body := e.call(t, "POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": forkAt, "withContainer": true})
	if status != http.StatusCreated {
		t.Fatalf("fork: %d %s", status, body)
	}
	var fork api.Chat
	if err := json.Unmarshal(body, &fork); err != nil {
		t.Fatal(err)
	}
	status, body = e.call(t, "GET", "/v1/projects/"+fork.Project, "alice", nil)
	var forked api.Project
	if err := json.Unmarshal(body, &forked); status != http.StatusOK || err != nil {
		t.Fatalf("forked project: %d %s", status, body)
	}
	testkit.CleanupContainer(t, testkit.LXD(t), forked.Container)
	fevs := e.prompt(t, fork.ID, "alice", "git status --short; echo FORKED")
	if _, ok := eventOf(fevs, api.EventAssistantText, ""); !ok {
		t.Errorf("the forked chat's turn did not run: %+v", fevs)
	}
	status, body = e.call(t, "POST", "/v1/chats/"+chat.ID+"/push", "alice", api.PushRequest{Message: "Fix add"})
	if status != http.StatusOK {
		t.Fatalf("push: %d %s", status, body)
	}
	var pushed api.PushResult
	if err := json.Unmarshal(body, &pushed); err != nil {
		t.Fatal(err)
	}
	if refs := e.git.LsRemote(t, "acme/calc"); !strings.Contains(refs, pushed.SHA+"\trefs/heads/"+pushed.Branch) {
		t.Errorf("the push did not land:\n%s", refs)
	}
	if status, body := e.call(t, "POST", "/v1/chats/"+chat.ID+"/pull-request", "alice", api.PullRequestRequest{Title: "Fix add"}); status != http.StatusCreated {
		t.Errorf("pull-request: %d %s", status, body)
	}
	// What the agent collected exists (its wrappers ran for the daemon's
	// own git), and holds no token. The scanner is stopped first: the
	// test's own grep below has the token in its argv.
	if out, err := exec.Command("lxc", "exec", proj.Container, "--", "/bin/sh", "-c", "/bin/kill $(/bin/cat /var/tmp/.scanner.pid)").CombinedOutput(); err != nil {
		t.Fatalf("stop the agent's /proc scanner: %v %s", err, out)
	}
	collected, err := exec.Command("lxc", "exec", proj.Container, "--", "sh", "-c", "cat /var/tmp/.collected /var/tmp/.scan /var/tmp/.hooks /var/tmp/.helper /var/tmp/.ext /var/tmp/.ssh /var/tmp/.fsmonitor 2>/dev/null").Output()
	if len(collected) == 0 {
		ls, _ := exec.Command("lxc", "exec", proj.Container, "--", "ls", "-la", "/var/tmp", "/usr/bin/git").CombinedOutput()
		t.Fatalf("read what the agent collected: %v\n%s", err, ls)
	}
	if !bytes.Contains(collected, []byte("== git ")) || !bytes.Contains(collected, []byte("REMOTE_GIT")) {
		t.Errorf("the wrappers never saw the daemon's git (%d bytes collected): the test would prove nothing", len(collected))
	}
	if bytes.Contains(collected, []byte(token)) {
		t.Error("the agent collected the token")
	}
	files, _ := exec.Command("lxc", "exec", proj.Container, "--", "/bin/grep", "-rlF", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev",
		"--", token, "/").CombinedOutput()
	if len(files) != 0 {
		t.Errorf("container files holding the token: %q", files)
	}
	forkFiles, _ := exec.Command("lxc", "exec", forked.Container, "--", "/bin/grep", "-rlF", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev",
		"--", token, "/").CombinedOutput()
	if len(forkFiles) != 0 {
		t.Errorf("the forked container's files holding the token: %q", forkFiles)
	}
	snaps, _ := filepath.Glob("/var/lib/lxd/storage-pools/*/containers-snapshots/" + proj.Container)
	if len(snaps) == 0 {
		t.Logf("no snapshot directory of %s found on this host's pools", proj.Container)
	}
	for _, dir := range snaps {
		if out, _ := exec.Command("grep", "-rlF", "--", token, dir).CombinedOutput(); len(out) != 0 {
			t.Errorf("snapshot files holding the token: %q", out)
		}
	}
	all, _ := json.Marshal(e.events(chat.ID))
	if bytes.Contains(all, []byte(token)) || strings.Contains(e.logs.String(), token) {
		t.Error("the token is in the events or the daemon's log")
	}
}
