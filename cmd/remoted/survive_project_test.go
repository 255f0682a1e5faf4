package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/lxdexec"
)

// Runs that outlive the daemon, project chats (docs/architecture.md, "Runs that
// outlive the daemon"): the real Claude Code CLI runs inside a busybox project
// container under remote-shim, talking to the fake model on the host through an
// LXD proxy device. The tests share one project and its container (the 373 MB
// CLI is pushed once per test process): projectBed, made by the first test that
// needs it and removed after the package's tests (TestMain calls runAfterTests).

// afterTests are run by TestMain once every test has run.
var afterTests struct {
	mu  sync.Mutex
	fns []func()
}

func atTestsEnd(f func()) {
	afterTests.mu.Lock()
	defer afterTests.mu.Unlock()
	afterTests.fns = append(afterTests.fns, f)
}

// runAfterTests runs the registered functions, last first.
func runAfterTests() {
	afterTests.mu.Lock()
	fns := afterTests.fns
	afterTests.fns = nil
	afterTests.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// projectGlibc are the libraries the Claude Code native binary needs and
// the host's bash with its library (the CLI's Bash tool wants bash or zsh:
// busybox's sh is not enough), pushed to the same paths in the busybox
// container.
var projectGlibc = []string{
	"/bin/bash",
	"/lib/x86_64-linux-gnu/libtinfo.so.6",
	"/lib64/ld-linux-x86-64.so.2",
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/lib/x86_64-linux-gnu/libm.so.6",
	"/lib/x86_64-linux-gnu/libpthread.so.0",
	"/lib/x86_64-linux-gnu/libdl.so.2",
	"/lib/x86_64-linux-gnu/librt.so.1",
}

// projectBed is the state the project survive tests share: remoted's
// configuration and state directory, the proxy profile that gives project
// containers the fake model on 127.0.0.1:port, and one project.
type projectBed struct {
	dir     string // state, socket, credentials; removed after the tests
	config  string // remoted's configuration text
	sock    string
	remoted string
	port    int
	project string // name
	// container is the project's container, known after the first prompt.
	container string
	lxd       *lxdexec.Client
}

var (
	bedMu sync.Mutex
	bed   *projectBed
)

// projectSurviveBed returns the shared bed, making it on first use. What
// a test's runs leave in the container is killed when it ends, so one
// failing test does not fail the next.
func projectSurviveBed(t *testing.T) *projectBed {
	t.Helper()
	b := makeProjectBed(t)
	t.Cleanup(func() {
		ps, _ := b.procs()
		var pids []string
		for _, l := range filterRunProcs(ps, sleepMarker) {
			pids = append(pids, strings.Fields(l)[0])
		}
		if len(pids) > 0 {
			t.Logf("killing what the test's runs left in %s:\n%s", b.container, strings.Join(filterRunProcs(ps, sleepMarker), "\n"))
			_, _ = b.sh("kill -9 " + strings.Join(pids, " ") + "; rm -rf /var/lib/remote/runs/*")
		}
	})
	return b
}

func makeProjectBed(t *testing.T) *projectBed {
	t.Helper()
	claude := testkit.ClaudeBinary(t)
	cl := testkit.LXD(t)
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "lxc client: %v", err)
	}
	for _, lib := range projectGlibc {
		if _, err := os.Stat(lib); err != nil {
			testkit.Missing(t, "host library %s: %v", lib, err)
		}
	}
	lxdSock, err := lxdexec.DiscoverSocket()
	if err != nil {
		testkit.Missing(t, "LXD socket: %v", err)
	}
	bins := testkit.Binaries(t, "remoted", "remote-shim")
	bedMu.Lock()
	defer bedMu.Unlock()
	if bed != nil {
		return bed
	}
	b := &projectBed{remoted: bins[0], lxd: cl, project: testkit.ContainerName("psurv")}
	b.dir, err = os.MkdirTemp("", "rdpsurvive")
	if err != nil {
		t.Fatal(err)
	}
	dir := b.dir
	atTestsEnd(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	profile := "rt-psurv-" + strings.TrimPrefix(testkit.ContainerName("p"), "t-p-")
	testkit.BehindTheBack(t, "lxc profile create", lxcCommand("profile", "create", profile))
	// Registered first, so it runs after the containers are deleted.
	atTestsEnd(func() { _ = exec.Command("lxc", "profile", "delete", profile).Run() })
	testkit.BehindTheBack(t, "lxc profile device add", lxcCommand("profile", "device", "add", profile, "model", "proxy",
		fmt.Sprintf("listen=tcp:127.0.0.1:%d", b.port), fmt.Sprintf("connect=tcp:127.0.0.1:%d", b.port), "bind=instance"))
	project := b.project
	atTestsEnd(func() { deleteProjectContainers(cl, project) })

	cred := filepath.Join(dir, "host", ".claude", ".credentials.json")
	if err := os.MkdirAll(filepath.Dir(cred), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cred, []byte(`{"token":"project-survive-test"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var files strings.Builder
	fmt.Fprintf(&files, "[[providers.claude.install_files]]\nhost = %q\ncontainer = \"/usr/local/bin/claude\"\nmode = \"0755\"\n", claude)
	for _, lib := range projectGlibc {
		fmt.Fprintf(&files, "[[providers.claude.install_files]]\nhost = %q\ncontainer = %q\nmode = \"0755\"\n", lib, lib)
	}
	b.sock = filepath.Join(dir, "remoted.sock")
	b.config = fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q
log_level = "debug"

[lxd]
socket = %q
image = %q
profiles = ["default", %q]

[agent]
allowed_roots = [%q]
shim_binary = %q

[providers.claude]
binary = "/usr/local/bin/claude"
check = ["/usr/local/bin/claude", "--version"]
env = { SHELL = "/bin/bash", ANTHROPIC_BASE_URL = "http://127.0.0.1:%d", ANTHROPIC_API_KEY = "sk-ant-test-dummy", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }
project_env = ["SHELL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]
%s
[[providers.claude.credentials]]
host = %q
container = "/root/.claude/.credentials.json"
`, b.sock, filepath.Join(dir, "state"), lxdSock, testkit.TestImage, profile, dir, bins[1], b.port, files.String(), cred)

	d := b.daemon(t)
	autostart := false
	st, body := d.do("POST", "/v1/projects", api.CreateProjectRequest{Name: b.project, Provider: "claude",
		Autostart: &autostart, Checkpoints: "off"})
	var p api.Project
	if err := json.Unmarshal(body, &p); st != 201 || err != nil {
		t.Fatalf("create project %s: %d %s", b.project, st, body)
	}
	b.container = p.Container
	d.stop()
	bed = b
	return b
}

// deleteProjectContainers force-deletes the containers of project
// ("remote-<project>-<id prefix>").
func deleteProjectContainers(cl *lxdexec.Client, project string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	all, err := cl.Instances(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cleanup: list containers: %v\n", err)
		return
	}
	for _, inst := range all {
		if rest, ok := strings.CutPrefix(inst.Name, "remote-"+project+"-"); ok && !strings.Contains(rest, "-") {
			if err := cl.ForceDeleteInstance(ctx, inst.Name); err != nil {
				fmt.Fprintf(os.Stderr, "cleanup: delete container %s: %v\n", inst.Name, err)
			}
		}
	}
}

// lxcCommand runs the lxc client (tests only: the product never does).
func lxcCommand(args ...string) func() ([]byte, error) {
	return func() ([]byte, error) { return exec.Command("lxc", args...).CombinedOutput() }
}

// daemon starts remoted on the bed's configuration and state.
func (b *projectBed) daemon(t *testing.T) *daemonProc {
	t.Helper()
	d := newDaemon(t, b.remoted, b.config, b.sock)
	d.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("remoted log:\n%s", d.logs)
		}
	})
	return d
}

// model starts the fake model on the port the bed's proxy device forwards
// to; it stops when the test ends.
func (b *projectBed) model(t *testing.T, replies ...fakeanthropic.Reply) *fakeanthropic.Server {
	t.Helper()
	var ln net.Listener
	var err error
	// The previous test's server may still be closing.
	_ = testkit.Poll(5*time.Second, func() error {
		ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", b.port))
		return err
	})
	if err != nil {
		t.Fatalf("listen on the proxied port: %v", err)
	}
	return fakeanthropic.NewListener(t, ln, replies...)
}

// stop stops remoted gracefully (SIGTERM) and waits for it.
func (d *daemonProc) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	d.cmd.Wait()
}

func (d *daemonProc) projectChat(project string) api.Chat {
	d.t.Helper()
	st, body := d.do("POST", "/v1/chats", api.CreateChatRequest{Provider: "claude", Project: project})
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 201 || err != nil {
		d.t.Fatalf("create chat in project %s: %d %s", project, st, body)
	}
	return chat
}

// promptRun sends a prompt and returns its run id.
func (d *daemonProc) promptRun(chatID, text string) string {
	d.t.Helper()
	st, body := d.do("POST", "/v1/chats/"+chatID+"/prompt", api.PromptRequest{Text: text})
	var pr api.PromptResponse
	if err := json.Unmarshal(body, &pr); st != 202 || err != nil {
		d.t.Fatalf("prompt: %d %s", st, body)
	}
	return pr.RunID
}

func (d *daemonProc) chat(chatID string) api.Chat {
	d.t.Helper()
	st, body := d.do("GET", "/v1/chats/"+chatID, nil)
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 200 || err != nil {
		d.t.Fatalf("get chat: %d %s", st, body)
	}
	return chat
}

// runEnd waits for the run after the chat's first skip events to end and
// for the chat to be idle (nothing more is stored for the run), and
// returns the events after skip.
func (d *daemonProc) runEnd(chatID string, skip int, within time.Duration) []api.Event {
	d.t.Helper()
	d.waitEvents(chatID, within, func(evs []api.Event) bool { return len(evs) > skip && ended(evs[skip:]) })
	if testkit.Poll(within, func() bool { return !d.chat(chatID).Running }) != nil {
		d.t.Fatalf("chat %s still running %v after its run ended: %s", chatID, within, summarize(d.events(chatID)))
	}
	return d.events(chatID)[skip:]
}

func (d *daemonProc) runs() []api.Run {
	d.t.Helper()
	st, body := d.do("GET", "/v1/runs", nil)
	var runs []api.Run
	if err := json.Unmarshal(body, &runs); st != 200 || err != nil {
		d.t.Fatalf("GET /v1/runs: %d %s", st, body)
	}
	return runs
}

// procs lists the processes of the bed's container as "pid ppid=P
// pgid=G sid=S cmdline" lines (read from /proc inside it).
func (b *projectBed) procs() ([]string, error) {
	const script = `for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null) && [ -n "$c" ] && ` +
		`set -- $(sed 's/.*) //' $p/stat) && echo "${p#/proc/} ppid=$2 pgid=$3 sid=$4 $c"; done; true`
	out, err := b.sh(script)
	if err != nil {
		return nil, fmt.Errorf("list the processes of %s: %w", b.container, err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		// The listing's own shell shows up too.
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "/proc/[0-9]*") {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// sh runs script in the bed's container; err is set unless it exits 0.
func (b *projectBed) sh(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := b.lxd.Exec(ctx, b.container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		return "", err
	}
	_ = ex.Stdin().Close()
	var out strings.Builder
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&out, ex.Stdout()); close(done) }()
	_, _ = io.Copy(io.Discard, ex.Stderr())
	<-done
	code, err := ex.Wait()
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	return out.String(), err
}

// runCLI marks the command line of a run's CLI (not the provisioning's
// `claude --version`).
const runCLI = "/usr/local/bin/claude -p "

// runProcs are the container's processes of a run: its CLIs, its shims
// and whatever else matches one of extra.
func (b *projectBed) runProcs(t *testing.T, extra ...string) []string {
	t.Helper()
	ps, err := b.procs()
	if err != nil {
		t.Fatal(err)
	}
	return filterRunProcs(ps, extra...)
}

func filterRunProcs(ps []string, extra ...string) []string {
	var out []string
	for _, l := range ps {
		if strings.Contains(l, runCLI) || strings.Contains(l, "remote-shim") ||
			slices.ContainsFunc(extra, func(s string) bool { return strings.Contains(l, s) }) {
			out = append(out, l)
		}
	}
	return out
}

// waitProcs polls the container's run processes until done says so. The
// container may not be there yet (the first prompt creates it).
func (b *projectBed) waitProcs(t *testing.T, what string, within time.Duration, done func([]string) bool, extra ...string) []string {
	t.Helper()
	var ps []string
	testkit.Eventually(t, within, func() error {
		all, err := b.procs()
		ps = filterRunProcs(all, extra...)
		if err == nil && done(ps) {
			return nil
		}
		return fmt.Errorf("(%v); run processes:\n%s", err, strings.Join(ps, "\n"))
	}, "container %s: %s", b.container, what)
	return ps
}

func anyContains(lines []string, s string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, s) })
}

func anyEndsWith(lines []string, s string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.HasSuffix(l, s) })
}

// firstRun is how long a project chat's first prompt may take to stream:
// it creates the container and pushes the 373 MB CLI on a busy machine.
const firstRun = 6 * time.Minute

// TestProjectRunSurvivesKill9 kills remoted with SIGKILL while a project
// chat's Claude Code run streams in its container; the restarted daemon
// re-attaches to the run's shim in the container and the chat gets every
// delta exactly once and one complete, no error.
func TestProjectRunSurvivesKill9(t *testing.T) {
	const parts = 40
	b := projectSurviveBed(t)
	b.model(t, surviveReply(parts, 200*time.Millisecond))
	d := b.daemon(t)
	chat := d.projectChat(b.project)
	runID := d.promptRun(chat.ID, "count slowly in the container")
	before := d.waitEvents(chat.ID, firstRun, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 6 })
	if ended(before) {
		t.Fatalf("the run ended before the kill: %s", summarize(before))
	}
	d.kill9()
	if ps := b.runProcs(t); !anyContains(ps, runCLI) {
		t.Fatalf("the CLI in the container died with remoted; run processes:\n%s", strings.Join(ps, "\n"))
	}
	d.start()
	runs := d.runs()
	if len(runs) != 1 || runs[0].ChatID != chat.ID || runs[0].Shim == nil || runs[0].Shim.Instance != b.container ||
		!strings.Contains(runs[0].Shim.Dir, runID) {
		t.Errorf("GET /v1/runs after the restart: %+v; want the run %s with its shim in %s", runs, runID, b.container)
	}
	evs := d.runEnd(chat.ID, 0, 2*time.Minute)
	checkExactlyOnce(t, evs, surviveText(parts))
	b.waitProcs(t, "the run's CLI and shim gone", 30*time.Second, func(ps []string) bool { return len(ps) == 0 })
	d.waitRunsEmpty()
	if len(runs) == 1 && runs[0].Shim != nil {
		// The shim removes its run directory once the end is stored.
		if out, err := b.sh("test ! -e " + runs[0].Shim.Dir); err != nil {
			t.Errorf("the run directory %s is still in the container: %v %s", runs[0].Shim.Dir, err, out)
		}
	}
}

// TestProjectRunFinishesWhileDaemonDown: the CLI in the container ends its
// turn while remoted is down; the next daemon drains the shim's spool and
// completes the run, every delta exactly once.
func TestProjectRunFinishesWhileDaemonDown(t *testing.T) {
	const parts = 12
	b := projectSurviveBed(t)
	b.model(t, surviveReply(parts, 100*time.Millisecond))
	d := b.daemon(t)
	chat := d.projectChat(b.project)
	d.promptRun(chat.ID, "count in the container")
	d.waitEvents(chat.ID, firstRun, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 1 })
	d.kill9()
	// The turn ends while no daemon runs: the CLI exits, its shim stays.
	b.waitProcs(t, "the CLI's exit", time.Minute, func(ps []string) bool { return !anyContains(ps, runCLI) })
	d.start()
	evs := d.runEnd(chat.ID, 0, 2*time.Minute)
	checkExactlyOnce(t, evs, surviveText(parts))
	b.waitProcs(t, "the run's shim gone", 30*time.Second, func(ps []string) bool { return len(ps) == 0 })
	d.waitRunsEmpty()
}

// sleepMarker is in the commands the fake model has the CLI run through
// its Bash tool: one in the foreground (the tool call goes on until the
// cancel) and one in the background, orphaned (the CLI no longer knows
// it). Neither may outlive a cancel. (The CLI refuses a plain `sleep`.)
const (
	sleepMarker = "tail -f /dev/null"
	bashCommand = `{"command":"(tail -f /dev/null -n 7 &); echo waiting; tail -f /dev/null","description":"wait a long time"}`
)

// TestProjectCancelLeavesNothing cancels a project chat's run while its
// CLI runs a long Bash command, without and after a daemon restart: no
// process of the run (CLI, shim, the command) is left in the container.
func TestProjectCancelLeavesNothing(t *testing.T) {
	b := projectSurviveBed(t)
	for _, restart := range []bool{false, true} {
		name := "cancel"
		if restart {
			name = "cancel after a kill -9 restart"
		}
		t.Run(name, func(t *testing.T) {
			model := b.model(t, fakeanthropic.ToolUse("Bash", bashCommand))
			d := b.daemon(t)
			chat := d.projectChat(b.project)
			d.promptRun(chat.ID, "wait in the container")
			var evs []api.Event
			running := func() bool {
				ps, err := b.procs()
				return err == nil && anyEndsWith(ps, " "+sleepMarker+" -n 7") && anyEndsWith(ps, " "+sleepMarker)
			}
			if testkit.Poll(firstRun, func() bool { evs = d.events(chat.ID); return running() || ended(evs) }) != nil || !running() {
				var results []fakeanthropic.ToolResult
				for _, r := range model.MessageRequests() {
					results = append(results, r.LastToolResult()...)
				}
				_, err := b.procs()
				t.Fatalf("the CLI's %q never ran in the container (%v): %s; tool results %+v", sleepMarker, err, summarize(evs), results)
			}
			if restart {
				d.kill9()
				d.start()
			}
			if st, body := d.do("POST", "/v1/chats/"+chat.ID+"/cancel", nil); st/100 != 2 {
				t.Errorf("cancel: %d %s", st, body) // and see what the run left
			}
			evs = d.runEnd(chat.ID, 0, time.Minute)
			if n := count(evs, api.EventError); n != 0 {
				t.Errorf("the cancel ended in an error: %s", summarize(evs))
			}
			b.waitProcs(t, "no process of the cancelled run", 30*time.Second, func(ps []string) bool { return len(ps) == 0 }, sleepMarker)
			d.waitRunsEmpty()
		})
	}
}

// TestProjectRunShimGoneAfterContainerRestart: remoted is killed while a
// project run streams and the container is restarted behind its back,
// which ends the run's shim; the restarted daemon ends the run with
// daemon_restarted and an error saying it could not be re-attached and
// why, and the next prompt resumes the CLI's native session.
func TestProjectRunShimGoneAfterContainerRestart(t *testing.T) {
	b := projectSurviveBed(t)
	g := b.shimGone(t, "lxc restart --force", lxcCommand("restart", "--force", b.container))

	// The next prompt resumes the native session: the CLI runs with
	// --resume, and the model sees the first prompt as an earlier turn.
	ps, evs, last := g.next(t, b)
	if !anyContains(ps, "--resume "+g.session) {
		t.Errorf("the next prompt's CLI does not resume session %s:\n%s", g.session, strings.Join(ps, "\n"))
	}
	for _, ev := range evs {
		if ev.Subtype == api.SubtypeSessionRecovered {
			t.Errorf("the session was not resumed but recovered from the visible history: %s", summarize(evs))
		}
	}
	// Resumed, the first prompt is a block of its own in an earlier turn;
	// recovered from the visible history, it would be quoted inside the
	// new prompt's transcript.
	var own, next bool
	for _, m := range last.Messages {
		for _, c := range m.Blocks() {
			own = own || (m.Role == "user" && strings.Contains(c.Text, shimGoneFirst) && !strings.Contains(c.Text, shimGoneNext))
			next = next || strings.Contains(c.Text, shimGoneNext)
		}
	}
	if !own || !next {
		t.Errorf("the model's request for the next prompt does not carry the first turn as conversation: %d messages, user text %q", len(last.Messages), last.UserText())
	}
}

// TestProjectRunShimGoneAfterContainerStop: as above, the container left
// stopped: the daemon does not start it to re-attach (the shim went with
// it); the next prompt starts it and resumes the session.
func TestProjectRunShimGoneAfterContainerStop(t *testing.T) {
	b := projectSurviveBed(t)
	g := b.shimGone(t, "lxc stop --force", lxcCommand("stop", "--force", b.container))
	ps, evs, _ := g.next(t, b)
	if !anyContains(ps, "--resume "+g.session) {
		t.Errorf("the next prompt's CLI does not resume session %s:\n%s", g.session, strings.Join(ps, "\n"))
	}
	if slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Subtype == api.SubtypeSessionRecovered }) {
		t.Errorf("the session was not resumed but recovered from the visible history: %s", summarize(evs))
	}
}

// TestProjectRunShimGoneAfterContainerDelete: as above, the container
// deleted instead. The session went with the container: the next prompt
// recreates it and carries the chat on from its visible history.
func TestProjectRunShimGoneAfterContainerDelete(t *testing.T) {
	b := projectSurviveBed(t)
	g := b.shimGone(t, "lxc delete --force", lxcCommand("delete", "--force", b.container))
	_, evs, last := g.next(t, b)
	if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Subtype == api.SubtypeSessionRecovered }) {
		t.Errorf("no system/session_recovered after the container (and the session in it) was deleted: %s", summarize(evs))
	}
	if !strings.Contains(last.UserText(), shimGoneFirst) {
		t.Errorf("the next prompt's request lacks the first prompt (visible history): %q", last.UserText())
	}
}

// TestProjectContainerRestartMidRun: the container restarts behind the
// back of a running remoted while a run streams: the run's shim goes with
// it, and the run ends (it does not hang) with an error; the chat takes
// the next prompt.
func TestProjectContainerRestartMidRun(t *testing.T) {
	b := projectSurviveBed(t)
	model := b.model(t, surviveReply(300, 200*time.Millisecond))
	d := b.daemon(t)
	chat := d.projectChat(b.project)
	d.promptRun(chat.ID, "count for long")
	before := d.waitEvents(chat.ID, firstRun, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 4 })
	if ended(before) {
		t.Fatalf("the run ended early: %s", summarize(before))
	}
	testkit.BehindTheBack(t, "lxc restart --force", lxcCommand("restart", "--force", b.container))
	evs := d.runEnd(chat.ID, 0, 2*time.Minute)
	if count(evs, api.EventError) != 1 || count(evs, api.EventComplete) != 0 {
		t.Errorf("the run whose container restarted: %s; want it ended by one error", summarize(evs))
	}
	for _, ev := range evs {
		if ev.Type == api.EventError {
			t.Logf("the run ended with: %s", ev.Message)
		}
	}
	d.waitRunsEmpty()
	model.Push(fakeanthropic.Text("after the container restart"))
	skip := len(evs)
	d.promptRun(chat.ID, "still there?")
	evs = d.runEnd(chat.ID, skip, 2*time.Minute)
	if count(evs, api.EventComplete) != 1 || count(evs, api.EventError) != 0 || assistantText(evs) != "after the container restart" {
		t.Errorf("the next prompt: %s", summarize(evs))
	}
}

// TestProjectShimKilledMidRun: the run's shim is killed (SIGKILL) in the
// container while the run streams: the run ends with one error naming the
// shim, its CLI does not go on alone, and the chat takes the next prompt.
func TestProjectShimKilledMidRun(t *testing.T) {
	b := projectSurviveBed(t)
	model := b.model(t, surviveReply(300, 200*time.Millisecond))
	d := b.daemon(t)
	chat := d.projectChat(b.project)
	d.promptRun(chat.ID, "count for long")
	before := d.waitEvents(chat.ID, firstRun, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 4 })
	if ended(before) {
		t.Fatalf("the run ended early: %s", summarize(before))
	}
	ps := b.runProcs(t)
	var shims []string
	for _, l := range ps {
		if strings.Contains(l, "remote-shim") && strings.Contains(l, " serve ") {
			shims = append(shims, strings.Fields(l)[0])
		}
	}
	if len(shims) != 1 {
		t.Fatalf("want one remote-shim serving the run in the container:\n%s", strings.Join(ps, "\n"))
	}
	if out, err := b.sh("kill -9 " + shims[0]); err != nil {
		t.Fatalf("kill the shim: %v %s", err, out)
	}
	evs := d.runEnd(chat.ID, 0, 2*time.Minute)
	var errs []string
	for _, ev := range evs {
		if ev.Type == api.EventError {
			errs = append(errs, ev.Message)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "remote-shim") || count(evs, api.EventComplete) != 0 {
		t.Errorf("the run whose shim was killed: %s; want it ended by one error naming remote-shim", summarize(evs))
	} else {
		t.Logf("the run ended with: %s", errs[0])
	}
	b.waitProcs(t, "the run's CLI gone with its shim", time.Minute, func(ps []string) bool { return len(ps) == 0 })
	d.waitRunsEmpty()
	model.Push(fakeanthropic.Text("after the shim was killed"))
	skip := len(evs)
	d.promptRun(chat.ID, "still there?")
	evs = d.runEnd(chat.ID, skip, 2*time.Minute)
	if count(evs, api.EventComplete) != 1 || count(evs, api.EventError) != 0 || assistantText(evs) != "after the shim was killed" {
		t.Errorf("the next prompt: %s", summarize(evs))
	}
}

const (
	shimGoneFirst = "remember the word pelican-4711"
	shimGoneNext  = "what was the word?"
)

// shimGoneRun is a project run whose shim went while remoted was down.
type shimGoneRun struct {
	d       *daemonProc
	model   *fakeanthropic.Server
	chat    api.Chat
	session string // the chat's Claude session
}

// shimGone streams a long run, kills remoted, does what to the container
// behind the daemon's back, starts remoted again and checks that the run
// ended as one whose shim is gone.
func (b *projectBed) shimGone(t *testing.T, what string, behind func() ([]byte, error)) shimGoneRun {
	t.Helper()
	model := b.model(t, surviveReply(300, 200*time.Millisecond))
	d := b.daemon(t)
	chat := d.projectChat(b.project)
	d.promptRun(chat.ID, shimGoneFirst)
	before := d.waitEvents(chat.ID, firstRun, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 4 })
	if ended(before) {
		t.Fatalf("the run ended before the kill: %s", summarize(before))
	}
	d.kill9()
	testkit.BehindTheBack(t, what, behind)
	d.start()
	evs := d.runEnd(chat.ID, 0, 2*time.Minute)
	var restarted bool
	var errs []string
	for _, ev := range evs {
		restarted = restarted || ev.Subtype == api.SubtypeDaemonRestarted
		if ev.Type == api.EventError {
			errs = append(errs, ev.Message)
		}
	}
	if !restarted {
		t.Errorf("no system/daemon_restarted: %s", summarize(evs))
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "could not be re-attached") || !strings.Contains(errs[0], "remote-shim") {
		t.Errorf("errors %q, want one naming that the run could not be re-attached and why (its remote-shim)", errs)
	}
	if n := count(evs, api.EventComplete); n != 0 {
		t.Errorf("%d complete events for a run whose shim is gone: %s", n, summarize(evs))
	}
	got := d.chat(chat.ID)
	if got.Sessions["claude"] == "" {
		t.Fatalf("the chat kept no Claude session: %+v", got.Sessions)
	}
	d.waitRunsEmpty()
	return shimGoneRun{d: d, model: model, chat: chat, session: got.Sessions["claude"]}
}

// next sends the next prompt (a slow reply, so its CLI can be seen) and
// returns the container's run processes while it ran, its events and the
// model's last request for it.
func (g shimGoneRun) next(t *testing.T, b *projectBed) ([]string, []api.Event, *fakeanthropic.Request) {
	t.Helper()
	d := g.d
	seen := len(g.model.MessageRequests())
	g.model.Push(surviveReply(10, 300*time.Millisecond))
	skip := len(d.events(g.chat.ID))
	d.promptRun(g.chat.ID, shimGoneNext)
	ps := b.waitProcs(t, "the CLI of the next prompt", 2*time.Minute, func(ps []string) bool { return anyContains(ps, runCLI) })
	evs := d.runEnd(g.chat.ID, skip, 2*time.Minute)
	if count(evs, api.EventComplete) != 1 || count(evs, api.EventError) != 0 || assistantText(evs) != surviveText(10) {
		t.Errorf("the next prompt: %s", summarize(evs))
	}
	reqs := g.model.MessageRequests()[seen:]
	if len(reqs) == 0 {
		t.Fatal("the model got no request for the next prompt")
	}
	return ps, evs, reqs[len(reqs)-1]
}
