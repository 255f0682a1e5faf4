package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/fakeforge"
	"remote/internal/testkit/gitserver"
	"remote/providers"
	"remote/providers/clistore"
)

// walkthroughBlocks returns the ```sh blocks of docs/walkthrough.md that
// follow an HTML comment "<!-- walkthrough MARK -->" (MARK "" or
// "config"), in the document's order.
func walkthroughBlocks(t *testing.T, mark string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testkit.Root(), "docs", "walkthrough.md"))
	if err != nil {
		t.Fatal(err)
	}
	comment := "<!-- walkthrough -->"
	if mark != "" {
		comment = "<!-- walkthrough " + mark + " -->"
	}
	lines := strings.Split(string(data), "\n")
	var blocks []string
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != comment {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			t.Fatalf("docs/walkthrough.md:%d: %s is not followed by a ```sh block", i+1, comment)
		}
		var b []string
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b = append(b, lines[i])
		}
		blocks = append(blocks, strings.Join(b, "\n")+"\n")
	}
	return blocks
}

// markedWalkthrough returns the walkthrough's config block and command
// blocks, failing the test when a step the walkthrough is about is no
// longer marked for the test (a marker lost in an edit would let that
// step drift untested).
func markedWalkthrough(t *testing.T) (config, commands []string) {
	t.Helper()
	config, commands = walkthroughBlocks(t, "config"), walkthroughBlocks(t, "")
	all := strings.Join(commands, "")
	for _, want := range []string{"info", "doctor", "project create", "project secret set", "chat create", "prompt", "chat diff", "chat pr", "project rm"} {
		if !strings.Contains(all, "$C "+want) {
			t.Errorf("docs/walkthrough.md's tested blocks lack `$C %s`", want)
		}
	}
	if len(config) != 1 || !strings.Contains(config[0], "[forges.") {
		t.Errorf("docs/walkthrough.md: %d config blocks marked for the test, want 1 writing the [forges] table", len(config))
	}
	if t.Failed() {
		t.FailNow()
	}
	return config, commands
}

// TestWalkthroughMarked: the walkthrough's steps are marked for
// TestWalkthrough (which needs LXD; this runs everywhere, -short too).
func TestWalkthroughMarked(t *testing.T) { markedWalkthrough(t) }

// walkthroughModelProfile makes an LXD profile whose proxy device lets a
// container reach the fake model on the host's loopback at the same
// address; it is deleted when the test ends, after the containers.
func walkthroughModelProfile(t *testing.T, modelURL string) string {
	t.Helper()
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "lxc client: %v", err)
	}
	port := modelURL[strings.LastIndexByte(modelURL, ':')+1:]
	name := "rt-proxy-" + strings.TrimPrefix(testkit.ContainerName("walk"), "t-walk-")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("lxc", args...).CombinedOutput(); err != nil {
			t.Fatalf("lxc %v: %v\n%s", args, err, out)
		}
	}
	run("profile", "create", name)
	t.Cleanup(func() { _ = exec.Command("lxc", "profile", "delete", name).Run() })
	run("profile", "device", "add", name, "model", "proxy",
		"listen=tcp:127.0.0.1:"+port, "connect=tcp:127.0.0.1:"+port, "bind=instance")
	return name
}

// TestWalkthrough runs the commands of docs/walkthrough.md, in order, with
// bash, against a test bed: a real remoted and remotectl built from this
// tree, the development image, the real Claude Code CLI (from the CLI
// store, in the project's container) talking to a scripted Anthropic
// stand-in that fixes the failing test, a real git server behind basic
// auth holding that repository, and a GitHub stand-in as the forge of the
// git server's host. The doc's config block writes the [forges] table the
// daemon then starts with. Every command must exit 0, the pull request
// must reach the forge stand-in (head the chat's branch, the token as
// Authorization) and the pushed branch must hold the fix. So the operator's
// walkthrough cannot drift from the product.
func TestWalkthrough(t *testing.T) {
	config, commands := markedWalkthrough(t)
	if testing.Short() {
		t.Skip("end-to-end test builds and runs remoted")
	}
	all := strings.Join(commands, "")

	const token = "tok_walkthrough_7c6b5a4d3e2f"
	cl := testkit.LXD(t)
	ictx, cancel := context.WithTimeout(context.Background(), time.Minute)
	_, err := cl.ImageAlias(ictx, testkit.DevImage)
	cancel()
	if err != nil {
		testkit.Missing(t, "LXD has no image %s (run make image): %v", testkit.DevImage, err)
	}
	claude := testkit.ClaudeBinary(t)
	bins := testkit.Binaries(t, "remoted", "remotectl")
	remoted, ctl := bins[0], bins[1]

	git := gitserver.New(t, token)
	repoURL := git.NewRepo(t, "acme/calc", map[string]string{
		"calc.py":      "def add(a, b):\n    return a - b\n",
		"test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
	})
	forge := fakeforge.New(t, "github")
	forge.SetToken(token)
	model := fakeanthropic.New(t)
	test := `{"command":"cd /workspace && python3 -B -c 'import test_calc; test_calc.test_add()' && echo TEST-PASSED","description":"run the test"}`
	model.Push(
		fakeanthropic.Reply{Blocks: []fakeanthropic.Block{fakeanthropic.ToolUseBlock("Bash", test)},
			When: func(r *fakeanthropic.Request) bool { return strings.Contains(r.UserText(), "test_add fails") }},
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Read", `{"file_path":"/workspace/calc.py"}`)),
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Edit", `{"file_path":"/workspace/calc.py","old_string":"return a - b","new_string":"return a + b"}`)),
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Bash", test)),
		fakeanthropic.AfterToolResult(fakeanthropic.Text("Fixed add: test_add passes.")),
	)
	profile := walkthroughModelProfile(t, model.URL)

	dir, err := os.MkdirTemp("", "walk") // short: the socket path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	sock, state := filepath.Join(dir, "remoted.sock"), filepath.Join(dir, "state")
	project := strings.TrimPrefix(testkit.ContainerName("walk"), "t-")
	testkit.CleanupProjectContainers(t, cl, project)
	// The host user's PATH finds the pinned Claude Code, as step 1's npm
	// install does; project containers run it from the CLI store.
	path := filepath.Dir(claude) + ":" + os.Getenv("PATH")
	env := append(os.Environ(), "PATH="+path, "HOME="+home)

	bash := func(script string, extra ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\ntrap 'echo \"walkthrough: failed: $BASH_COMMAND\" >&2' ERR\n"+script)
		cmd.Dir = dir
		cmd.Env = append(append([]string{}, env...), extra...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	// Step 2: the doc's config block writes remoted.toml.
	if out, err := bash(config[0], "GIT_HOST="+strings.TrimPrefix(git.URL, "http://"), "FORGE_KIND=github", "FORGE_API="+forge.URL()); err != nil {
		t.Fatalf("the config block: %v\n%s", err, out)
	}
	forges, err := os.ReadFile(filepath.Join(dir, "remoted.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// The test bed's own keys (where make run puts the socket and state,
	// the fake model, the proxy profile), then the doc's.
	cfg := fmt.Sprintf(`version = 1
[daemon]
socket = %q
state_dir = %q
[agent]
allowed_roots = [%q]
[lxd]
profiles = ["default", %q]
[providers.claude]
binary = "claude"
env = { HOME = %q, ANTHROPIC_BASE_URL = %q, ANTHROPIC_API_KEY = "sk-ant-test-dummy", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }
project_env = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]
[[providers.claude.credentials]]
host = %q
container = "/root/.claude/.credentials.json"
`, sock, state, dir, profile, home, model.URL, filepath.Join(home, ".claude", ".credentials.json")) + "\n" + string(forges)
	cfgPath := filepath.Join(dir, "test.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Step 4's providers install claude: the pinned CLI imported into the
	// store (the test bed has no npm registry).
	nm := filepath.Dir(filepath.Dir(filepath.Dir(claude)))
	if _, err := clistore.New(filepath.Join(state, "clis")).Import(context.Background(), providers.Claude, "", nm, clistore.InstallOptions{Select: true}); err != nil {
		t.Fatalf("import claude into the CLI store: %v", err)
	}

	// Step 3: the daemon.
	e := &e2e{t: t, dir: dir, socket: sock, ctl: ctl, model: model, daemonE: &bytes.Buffer{}}
	e.daemon = exec.Command(remoted, "-config", cfgPath)
	e.daemon.Env = env
	dlog := &lockedWriter{w: e.daemonE}
	e.daemon.Stderr = dlog
	if err := e.daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.daemon.Process.Signal(syscall.SIGTERM)
		e.daemon.Wait()
		if t.Failed() {
			t.Logf("remoted log:\n%s", e.daemonE)
		}
	})
	if testkit.Poll(time.Minute, func() bool { return e.run("", "info").code == 0 }) != nil {
		t.Fatalf("remoted did not come up; log:\n%s", e.daemonE)
	}
	e.waitLXD()

	// Steps 4 to 9, as a user types them, in one shell.
	out, err := bash(all, "C="+ctl+" -socket "+sock, "REPO_URL="+repoURL, "TOKEN="+token, "PROJECT="+project)
	t.Logf("the walkthrough's commands printed:\n%s", out)
	if err != nil {
		t.Fatalf("the walkthrough's commands: %v", err)
	}

	reqs := forge.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the forge stand-in got %d requests, want 1 pull request", len(reqs))
	}
	got := reqs[0]
	if got.Problem != "" || got.Method != "POST" || got.Path != "/repos/acme/calc/pulls" || got.Header.Get("Authorization") != "Bearer "+token {
		t.Errorf("forge request: %s %s, Authorization ok %v, problem %q", got.Method, got.Path, got.Header.Get("Authorization") == "Bearer "+token, got.Problem)
	}
	if got.Fields["head"] != "fix-add" || got.Fields["base"] != "main" || got.Fields["title"] != "Fix add" {
		t.Errorf("pull request fields %v, want head fix-add, base main, title Fix add", got.Fields)
	}
	if calc := git.Git(t, "acme/calc", "show", "fix-add:calc.py"); !strings.Contains(calc, "return a + b") {
		t.Errorf("the pushed branch's calc.py:\n%s", calc)
	}
	dlog.mu.Lock() // remoted still writes its log
	logged := strings.Contains(e.daemonE.String(), token)
	dlog.mu.Unlock()
	if strings.Contains(out, token) || logged {
		t.Error("the token is in the commands' output or remoted's log")
	}
}
