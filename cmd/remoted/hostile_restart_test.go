package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeforge"
	"remote/internal/testkit/gitserver"
	"remote/lxdexec"
)

// shellCLI stands in for Claude Code in the container: it speaks the
// CLI's stream-json and runs the last line of the prompt (read from stdin,
// as the adapter gives it) with sh, replying with its output and the
// environment it ran in. `--version` answers the configured check.
const shellCLI = `#!/usr/bin/python3
import json, subprocess, sys
if "--version" in sys.argv:
    print("2.1.0 (Claude Code)")
    sys.exit(0)
lines = [l for l in sys.stdin.read().split("\n") if l.strip()]
script = lines[-1] if lines else "true"
p = subprocess.run(["sh", "-c", script + "; echo; env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
out = p.stdout.decode("utf-8", "replace")
sid = "shell-cli-session"
for rec in ({"type": "system", "subtype": "init", "session_id": sid, "model": "shell"},
            {"type": "stream_event", "session_id": sid, "event": {"type": "content_block_delta", "delta": {"type": "text_delta", "text": out}}},
            {"type": "result", "subtype": "success", "is_error": False, "session_id": sid, "usage": {"input_tokens": 1, "output_tokens": 1}, "total_cost_usd": 0}):
    print(json.dumps(rec), flush=True)
`

// hostileBed is remoted on a state directory of its own, its projects in
// the remote-dev image running shellCLI as their claude; a real git
// http-backend behind basic auth (the token) and a GitHub stand-in
// expecting the same token configured as its forge.
type hostileBed struct {
	d     *daemonProc
	lxd   *lxdexec.Client
	git   *gitserver.Server
	forge *fakeforge.Server
	state string
	logs  strings.Builder // the logs of the daemons stopped so far
}

func newHostileBed(t *testing.T, token string) *hostileBed {
	t.Helper()
	cl := testkit.LXD(t)
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "lxc client: %v", err)
	}
	lxdSock, err := lxdexec.DiscoverSocket()
	if err != nil {
		testkit.Missing(t, "LXD socket: %v", err)
	}
	bins := testkit.Binaries(t, "remoted", "remote-shim")
	b := &hostileBed{lxd: cl, git: gitserver.New(t, token), forge: fakeforge.New(t, "github")}
	b.forge.SetToken(token)
	dir, err := os.MkdirTemp("", "rdhostile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cli := filepath.Join(dir, "shell-cli")
	cred := filepath.Join(dir, "host", ".claude", ".credentials.json")
	if err := os.MkdirAll(filepath.Dir(cred), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cli, []byte(shellCLI), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cred, []byte(`{"token":"hostile-restart-test"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b.state = filepath.Join(dir, "state")
	sock := filepath.Join(dir, "remoted.sock")
	cfg := fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q
log_level = "debug"

[lxd]
socket = %q
image = "remote-dev"
profiles = ["default"]

[agent]
allowed_roots = [%q]
shim_binary = %q

[providers.claude]
binary = "/usr/local/bin/claude"
check = ["/usr/local/bin/claude", "--version"]

[[providers.claude.install_files]]
host = %q
container = "/usr/local/bin/claude"
mode = "0755"

[[providers.claude.credentials]]
host = %q
container = "/root/.claude/.credentials.json"

[forges.%q]
kind = "github"
api = %q
`, sock, b.state, lxdSock, dir, bins[1], cli, cred, strings.TrimPrefix(b.git.URL, "http://"), b.forge.URL())
	b.d = newDaemon(t, bins[0], cfg, sock)
	b.d.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("remoted logs:\n%s%s", b.logs.String(), b.d.logs)
		}
	})
	return b
}

// restart stops remoted with SIGTERM and starts it again on the same
// state directory.
func (b *hostileBed) restart() {
	b.d.t.Helper()
	b.d.stop()
	b.logs.WriteString(b.d.logs.String())
	b.d.start()
}

// turn prompts chatID with text and returns the run's events once the
// chat is idle again.
func (b *hostileBed) turn(t *testing.T, chatID, text string, within time.Duration) []api.Event {
	t.Helper()
	skip := len(b.d.events(chatID))
	b.d.promptRun(chatID, text)
	evs := b.d.runEnd(chatID, skip, within)
	if count(evs, api.EventComplete) != 1 || count(evs, api.EventError) != 0 {
		t.Fatalf("turn %.60q: %s", text, summarize(evs))
	}
	return evs
}

func (b *hostileBed) project(t *testing.T, name string) api.Project {
	t.Helper()
	st, body := b.d.do("GET", "/v1/projects/"+name, nil)
	var p api.Project
	if err := json.Unmarshal(body, &p); st != 200 || err != nil || p.Container == "" {
		t.Fatalf("project %s: %d %s", name, st, body)
	}
	return p
}

// writtenSince lists the regular files under root (but /proc, /sys and
// /dev) last written at or after since and holding s: a shell command
// that prints their paths. A file that holds a token this test made up was written during
// the test: the image's own files are left out, which keeps the search
// of a container and of each of its snapshots (full copies on a dir
// pool) to seconds. find, xargs and grep are named by their paths in
// /usr/bin, which the agent's wrappers (in /usr/local/bin) do not shadow.
func writtenSince(root string, since time.Time, s string) string {
	return fmt.Sprintf(`/usr/bin/find %[1]s/ \( -path %[1]s/proc -o -path %[1]s/sys -o -path %[1]s/dev \) -prune -o -type f -newermt @%[2]d -print0 | `+
		`/usr/bin/xargs -0 -r /usr/bin/grep -lF -- '%[3]s'`, strings.TrimSuffix(root, "/"), since.Unix()-2, s)
}

// grepContainer lists the files of a container's filesystem written
// since and holding s.
func grepContainer(t *testing.T, container string, since time.Time, s string) string {
	t.Helper()
	defer logPhase(t, "searched "+container)()
	out, _ := exec.Command("lxc", "exec", container, "--", "/bin/sh", "-c", writtenSince("/", since, s)).Output()
	return string(out)
}

// logPhase logs how long what took, once the returned function is called.
func logPhase(t *testing.T, what string) func() {
	start := time.Now()
	return func() { t.Logf("%s in %v", what, time.Since(start).Round(time.Millisecond)) }
}

// TestAttackHostileAgentAcrossDaemonRestart is the hostile agent of
// daemon/projectapi's TestAttackHostileAgentNeverSeesTheToken against the
// real remoted binary, with a real daemon restart between its turns: the
// agent plants testkit.HostileGitKit (every binary on its PATH and git
// itself replaced by environment dumpers, .git/config rewritten, a /proc
// scanner left running), moves .git away and remoted is stopped (SIGTERM)
// and started again on the same state directory; the first turn after the
// restart clones again (a new daemon with no memory of the clone, against
// a /workspace without .git, the very path that, when the clone ran in the
// container with the token in its environment, handed the token to the
// wrappers). The chat is then forked with its container, the fork runs a
// turn, the user pushes and opens a pull request. The push lands; the
// token is in nothing the agent collected, in no file of either container,
// in no file of the project's snapshots, in no event, API answer or log,
// and in no file of the daemon's git mirrors.
func TestAttackHostileAgentAcrossDaemonRestart(t *testing.T) {
	const token = "tok_hostile_restart_0123456789abcdef"
	began := time.Now()
	t.Cleanup(logPhase(t, "the test with its clean-up"))
	b := newHostileBed(t, token)
	url := b.git.NewRepo(t, "acme/calc", map[string]string{
		"calc.py":      "def add(a, b):\n    return a - b\n",
		"test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
	})
	var answers bytes.Buffer
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		st, out := b.d.do(method, path, body)
		answers.Write(out)
		return st, out
	}
	name := testkit.ContainerName("hostile")
	testkit.CleanupProjectContainers(t, b.lxd, name)
	autostart := false
	st, body := call("POST", "/v1/projects", api.CreateProjectRequest{Name: name, Provider: "claude", Autostart: &autostart,
		Repo: &api.ProjectRepo{URL: url, TokenSecret: "GIT_TOKEN"}})
	if st != 201 {
		t.Fatalf("create project: %d %s", st, body)
	}
	if st, body := call("PUT", "/v1/projects/"+name+"/secrets/GIT_TOKEN", api.PutSecretRequest{Value: token}); st/100 != 2 {
		t.Fatalf("put secret: %d %s", st, body)
	}
	st, body = call("POST", "/v1/chats", api.CreateChatRequest{Provider: "claude", Project: name})
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 201 || err != nil {
		t.Fatalf("create chat: %d %s", st, body)
	}

	var text strings.Builder
	turn := func(chatID, prompt string, within time.Duration) []api.Event {
		t.Helper()
		done := logPhase(t, fmt.Sprintf("turn %.50q", prompt))
		evs := b.turn(t, chatID, prompt, within)
		done()
		text.WriteString(assistantText(evs))
		return evs
	}
	cloned := func(evs []api.Event) bool {
		return slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Subtype == api.SubtypeRepoCloned })
	}
	// Before the restart: the first clone, the kit planted, a file
	// written, and .git moved away.
	if evs := turn(chat.ID, "true", firstRun); !cloned(evs) {
		t.Fatalf("the first turn did not clone: %s", summarize(evs))
	}
	container := b.project(t, name).Container
	turn(chat.ID, "export REPO="+url+"; echo "+base64.StdEncoding.EncodeToString([]byte(testkit.HostileGitKit))+" | base64 -d | sh", 3*time.Minute)
	turn(chat.ID, "echo draft > notes.txt", time.Minute)
	turn(chat.ID, "mv .git /var/tmp/stolen-git", time.Minute)

	done := logPhase(t, "remoted restarted")
	b.restart()
	done()

	// After it: the new daemon finds no .git and clones again, with the
	// agent's wrappers and scanner in place.
	if evs := turn(chat.ID, "git status --short; echo RECLONED", 2*time.Minute); !cloned(evs) {
		t.Errorf("the first turn after the restart did not clone again: %s", summarize(evs))
	}
	turn(chat.ID, "rm -rf .git && mv /var/tmp/stolen-git .git && git status --short", time.Minute)
	evs := turn(chat.ID, "sed -i 's/a - b/a + b/' calc.py", time.Minute)
	var forkAt int64
	for _, ev := range evs {
		if ev.Type == api.EventUser {
			forkAt = ev.Seq // a turn with a checkpoint, after the planting
		}
	}
	turn(chat.ID, "python3 -B -c 'import test_calc; test_calc.test_add()' && echo PASSES", time.Minute)
	if !strings.Contains(text.String(), "PLANTED") || !strings.Contains(text.String(), "RECLONED") || !strings.Contains(text.String(), "PASSES") {
		t.Fatalf("the agent's turns did not run as planned: %q", text.String())
	}

	// A fork with its container (which holds what the agent planted), and
	// a turn there.
	done = logPhase(t, "forked with the container")
	st, body = call("POST", "/v1/chats/"+chat.ID+"/fork", map[string]any{"atSeq": forkAt, "withContainer": true})
	done()
	var fork api.Chat
	if err := json.Unmarshal(body, &fork); st != 201 || err != nil {
		t.Fatalf("fork: %d %s", st, body)
	}
	testkit.CleanupProjectContainers(t, b.lxd, fork.Project)
	if fevs := turn(fork.ID, "git status --short; echo FORKED", 3*time.Minute); !strings.Contains(assistantText(fevs), "FORKED") {
		t.Errorf("the fork's turn did not run: %s", summarize(fevs))
	}
	forked := b.project(t, fork.Project).Container
	// The tenth turn: the original chat once more after the fork, the
	// agent's kit still in place, before the user pushes.
	if evs := turn(chat.ID, "git diff --stat; echo TENTH", time.Minute); !strings.Contains(assistantText(evs), "TENTH") {
		t.Errorf("the tenth turn did not run: %s", summarize(evs))
	}

	// Push and pull request, from the host.
	st, body = call("POST", "/v1/chats/"+chat.ID+"/push", api.PushRequest{Message: "Fix add"})
	var pushed api.PushResult
	if err := json.Unmarshal(body, &pushed); st != 200 || err != nil {
		t.Fatalf("push: %d %s", st, body)
	}
	if refs := b.git.LsRemote(t, "acme/calc"); !strings.Contains(refs, pushed.SHA+"\trefs/heads/"+pushed.Branch) {
		t.Errorf("the push did not land:\n%s", refs)
	}
	if st, body := call("POST", "/v1/chats/"+chat.ID+"/pull-request", api.PullRequestRequest{Title: "Fix add"}); st != 201 {
		t.Errorf("pull-request: %d %s", st, body)
	}

	// What the agent collected exists (its wrappers ran for the daemon's
	// own git, after the restart too) and holds no token. The scanner is
	// stopped first: the greps below have the token in their argv.
	for _, c := range []string{container, forked} {
		if out, err := exec.Command("lxc", "exec", c, "--", "/bin/sh", "-c",
			"test -e /var/tmp/.scanner.pid && /bin/kill $(/bin/cat /var/tmp/.scanner.pid); true").CombinedOutput(); err != nil {
			t.Fatalf("stop the agent's /proc scanner in %s: %v %s", c, err, out)
		}
	}
	collected, err := exec.Command("lxc", "exec", container, "--", "/bin/sh", "-c",
		"/bin/cat /var/tmp/.collected /var/tmp/.scan /var/tmp/.hooks /var/tmp/.helper /var/tmp/.ext /var/tmp/.ssh /var/tmp/.fsmonitor 2>/dev/null").Output()
	if len(collected) == 0 {
		t.Fatalf("read what the agent collected: %v", err)
	}
	if !bytes.Contains(collected, []byte("== git ")) || !bytes.Contains(collected, []byte("REMOTE_GIT_URL")) {
		t.Errorf("the wrappers never saw the daemon's clone (%d bytes collected): the test would prove nothing", len(collected))
	}
	if bytes.Contains(collected, []byte(token)) {
		t.Error("the agent collected the token")
	}
	if files := grepContainer(t, container, began, token); files != "" {
		t.Errorf("container files holding the token: %q", files)
	}
	if files := grepContainer(t, forked, began, token); files != "" {
		t.Errorf("the forked container's files holding the token: %q", files)
	}
	var snaps []string
	for _, c := range []string{container, forked} {
		dirs, _ := filepath.Glob("/var/lib/lxd/storage-pools/*/containers-snapshots/" + c)
		snaps = append(snaps, dirs...)
	}
	if len(snaps) == 0 {
		t.Errorf("no snapshot directory of %s found on this host's pools: the snapshots went unsearched", container)
	}
	for _, dir := range snaps {
		done := logPhase(t, "searched "+dir)
		out, _ := exec.Command("sh", "-c", writtenSince(dir, began, token)).Output()
		done()
		if len(out) != 0 {
			t.Errorf("snapshot files holding the token: %q", out)
		}
	}
	if out, _ := exec.Command("grep", "-rlF", "--", token, b.state).Output(); len(out) != 0 {
		t.Errorf("files of the daemon's state directory (its git mirrors) holding the token: %q", out)
	}
	for _, id := range []string{chat.ID, fork.ID} {
		all, _ := json.Marshal(b.d.events(id))
		if bytes.Contains(all, []byte(token)) {
			t.Errorf("the token is in chat %s's events", id)
		}
	}
	if bytes.Contains(answers.Bytes(), []byte(token)) {
		t.Error("the token is in an API answer")
	}
	if strings.Contains(b.logs.String(), token) || strings.Contains(b.d.logs.String(), token) {
		t.Error("the token is in the daemon's log")
	}
	t.Logf("the test's body took %v", time.Since(began).Round(time.Second))
}
