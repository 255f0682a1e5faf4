package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/fakeforge"
	"remote/internal/testkit/gitserver"
)

// proxyProfile makes an LXD profile whose proxy devices let a container
// reach the host's loopback ports (the fake model, the git server) at the
// same addresses; it is deleted when the test ends, after the containers.
func proxyProfile(t *testing.T, ports ...int) string {
	t.Helper()
	testkit.LXD(t)
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "lxc client: %v", err)
	}
	name := "rt-proxy-" + strings.TrimPrefix(testkit.ContainerName("w"), "t-w-")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("lxc", args...).CombinedOutput(); err != nil {
			t.Fatalf("lxc %v: %v\n%s", args, err, out)
		}
	}
	run("profile", "create", name)
	t.Cleanup(func() { _ = exec.Command("lxc", "profile", "delete", name).Run() })
	for i, port := range ports {
		run("profile", "device", "add", name, fmt.Sprintf("loop%d", i), "proxy",
			fmt.Sprintf("listen=tcp:127.0.0.1:%d", port), fmt.Sprintf("connect=tcp:127.0.0.1:%d", port), "bind=instance")
	}
	return name
}

// portOf is the port of a http://127.0.0.1:PORT URL.
func portOf(t *testing.T, url string) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(url[strings.LastIndexByte(url, ':')+1:], "%d", &port); err != nil {
		t.Fatalf("no port in %q", url)
	}
	return port
}

// TestE2EChangesPushPullRequest is the repository feature's acceptance on the
// page (docs/operating.md, "A repository per project"): a project on the
// development image whose repository (a real git http-backend behind basic auth,
// reached through a proxy device) is cloned with the token of its tokenSecret;
// in the page, the real Claude Code CLI in the container (its model scripted)
// runs the failing test, reads and edits calc.py and runs the test again; the
// Changes view of that turn lists exactly calc.py (M +1 −1) and its change; Push
// lands the branch on the git server (git ls-remote); Open pull request reaches
// the GitHub stand-in with the documented request (head, base, title, body, the
// token as Authorization) and the page shows its link (a new tab, noopener
// noreferrer). The token is nowhere in the page's DOM, the chat's events or
// remoted's and remote-web's logs.
func TestE2EChangesPushPullRequest(t *testing.T) {
	const token = "tok_e2e_page_5f4e3d2c1b0a99"
	cl := testkit.LXD(t)
	ictx, cancel := context.WithTimeout(context.Background(), time.Minute)
	_, err := cl.ImageAlias(ictx, testkit.DevImage)
	cancel()
	if err != nil {
		testkit.Missing(t, "LXD has no image %s (run make image): %v", testkit.DevImage, err)
	}
	git := gitserver.New(t, token)
	repoURL := git.NewRepo(t, "acme/calc", map[string]string{
		"calc.py":      "def add(a, b):\n    return a - b\n",
		"test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
	})
	forge := fakeforge.New(t, "github")
	forge.SetToken(token)
	model := fakeanthropic.New(t)
	profile := proxyProfile(t, portOf(t, model.URL), git.Port)
	test := `{"command":"cd /workspace && python3 -B -c 'import test_calc; test_calc.test_add()' && echo TEST-PASSED","description":"run the test"}`
	model.Push(
		fakeanthropic.Reply{Blocks: []fakeanthropic.Block{fakeanthropic.ToolUseBlock("Bash", test)},
			When: func(r *fakeanthropic.Request) bool { return strings.Contains(r.UserText(), "fix-the-test") }},
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Read", `{"file_path":"/workspace/calc.py"}`)),
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Edit", `{"file_path":"/workspace/calc.py","old_string":"return a - b","new_string":"return a + b"}`)),
		fakeanthropic.AfterToolResult(fakeanthropic.ToolUse("Bash", test)),
		fakeanthropic.AfterToolResult(fakeanthropic.Text("Fixed add: test_add passes.")),
	)
	s := startStackWith(t, model, stackOpts{image: testkit.DevImage, profiles: []string{profile}, storeClaude: true,
		toml: fmt.Sprintf("\n[forges.%q]\nkind = \"github\"\napi = %q\n", strings.TrimPrefix(git.URL, "http://"), forge.URL())})
	name := strings.TrimPrefix(testkit.ContainerName("chg"), "t-")
	testkit.CleanupProjectContainers(t, cl, name)
	status, body := daemonDo(t, s, "POST", "/v1/projects", testUser, api.CreateProjectRequest{Name: name, Provider: "claude",
		Repo: &api.ProjectRepo{URL: repoURL, TokenSecret: "GIT_TOKEN"}})
	if status != http.StatusCreated {
		t.Fatalf("create project: %d %s", status, body)
	}
	if status, body := daemonDo(t, s, "PUT", "/v1/projects/"+name+"/secrets/GIT_TOKEN", testUser, api.PutSecretRequest{Value: token}); status/100 != 2 {
		t.Fatalf("set the token secret: %d %s", status, body)
	}
	status, body = daemonDo(t, s, "POST", "/v1/chats", testUser, api.CreateChatRequest{Provider: "claude", Project: name, Title: "fix calc"})
	var chat api.Chat
	if status != http.StatusCreated || json.Unmarshal(body, &chat) != nil {
		t.Fatalf("create chat: %d %s", status, body)
	}

	// The container is made (and the repository cloned) before the
	// browser starts: the browser's life is bounded.
	if status, body := daemonDo(t, s, "POST", "/v1/projects/"+name+"/start", testUser, nil); status != http.StatusOK {
		t.Fatalf("start project: %d %s", status, body)
	}
	ctx := loginStack(t, s)
	steps(t, ctx, "Claude fixes the failing test in the container",
		chromedp.Navigate(s.base+"/#/chat/"+chat.ID),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
		chromedp.SendKeys(chromedp.CSS("#prompt"), "fix-the-test: make test_calc pass\n"),
		// A turn's checkpoint copies the container's root disk first.
		waitJSFor(`document.querySelector('#chat-log').innerText.includes('Fixed add: test_add passes.')`, 110*time.Second),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
	)
	screenshot(t, ctx, "e2e-changes-chat")
	outputs := eval[[]string](t, ctx, `[...document.querySelectorAll('.tool .tool-output')].map(e => e.textContent)`)
	if len(outputs) != 4 || !strings.Contains(outputs[0], "AssertionError") || !strings.Contains(outputs[3], "TEST-PASSED") {
		t.Fatalf("the tools' outputs (the test failing, then passing) = %q", outputs)
	}

	var user api.Event
	for _, ev := range chatEvents(t, s, chat.ID) {
		if ev.Type == api.EventUser {
			user = ev
		}
	}
	turn := fmt.Sprint(user.Seq)
	steps(t, ctx, "the Changes view of the turn",
		waitJS(`!document.querySelector('#changes-link').hidden`),
		chromedp.Click(chromedp.CSS("#changes-link")),
		waitJS(`!!document.querySelector('#changes-turn option[value="`+turn+`"]')`),
		chromedp.SetValue(chromedp.CSS("#changes-turn"), turn),
		waitJS(`document.querySelector('#changes-turn').dispatchEvent(new Event('change'))`),
		waitJS(`!!document.querySelector('#changes-diff') && document.querySelector('#changes-summary').innerText.startsWith('1 file')`),
	)
	screenshot(t, ctx, "e2e-changes-turn")
	if rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#changes-files tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim())`); strings.Join(rows, "|") != "M calc.py +1 −1" {
		t.Errorf("the turn's files = %q, want exactly calc.py modified +1 −1", rows)
	}
	patch := eval[string](t, ctx, `document.querySelector('#changes-diff').textContent`)
	if !strings.Contains(patch, "--- a/calc.py\n+++ b/calc.py\n") || !strings.Contains(patch, "-    return a - b\n+    return a + b\n") {
		t.Errorf("the turn's patch:\n%s", patch)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#changes-truncated').length`); n != 0 {
		t.Error("a small diff is marked truncated")
	}

	// More work in the working tree: a new file and a deleted one. The
	// whole chat's changes list the three; notes.txt is unchecked, so Push
	// sends the paths of calc.py and of the deletion only.
	cts := testkit.ProjectContainers(t, cl, name)
	if len(cts) != 1 {
		t.Fatalf("the project's containers: %q", cts)
	}
	if out, err := exec.Command("lxc", "exec", cts[0], "--", "sh", "-c",
		"cd /workspace && echo draft > notes.txt && chown --reference=calc.py notes.txt && rm test_calc.py").CombinedOutput(); err != nil {
		t.Fatalf("change the working tree: %v\n%s", err, out)
	}
	steps(t, ctx, "the whole chat's changes, notes.txt unchecked",
		chromedp.SetValue(chromedp.CSS("#changes-turn"), ""), // fires change
		waitJS(`document.querySelector('#changes-summary').innerText.startsWith('3 files')`),
		chromedp.Click(chromedp.CSS(`#changes-files input.file-pick[aria-label="Push notes.txt"]`)),
		waitJS(`document.querySelector('#push-all').disabled && document.querySelector('#push-pick').innerText === 'pushes 2 of 3 files'`),
	)
	screenshot(t, ctx, "e2e-changes-pick")
	if rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#changes-files tr')].map(r => r.querySelector('input').checked + ' ' + r.innerText.replace(/\s+/g, ' ').trim())`); strings.Join(rows, "|") != "true M calc.py +1 −1|false A notes.txt +1 −0|true D test_calc.py +0 −5" {
		t.Errorf("the whole chat's files = %q", rows)
	}

	steps(t, ctx, "Push",
		chromedp.SendKeys(chromedp.CSS("#push-message"), "Fix add"),
		chromedp.Click(chromedp.CSS("#push")),
		waitJS(`!!document.querySelector('#changes-result .pushed') || document.querySelector('#changes-msg .notice-error') !== null`),
	)
	if msg := eval[string](t, ctx, `document.querySelector('#changes-msg').innerText`); msg != "" {
		t.Fatalf("push: %s", msg)
	}
	branch := eval[string](t, ctx, `document.querySelector('#changes-result .pushed-branch').textContent`)
	sha := eval[string](t, ctx, `document.querySelector('#changes-result .pushed-sha').title`)
	if branch != "remote/"+chat.ID[:8] || len(sha) != 40 {
		t.Errorf("pushed %q at %q", branch, sha)
	}
	if refs := git.LsRemote(t, "acme/calc"); !strings.Contains(refs, sha+"\trefs/heads/"+branch) {
		t.Errorf("git ls-remote:\n%s\nwant %s refs/heads/%s", refs, sha, branch)
	}
	if got := git.Git(t, "acme/calc", "log", "-1", "--format=%s", sha); got != "Fix add" {
		t.Errorf("pushed commit message %q", got)
	}
	// Only the checked files: calc.py's change and the deletion.
	if got := strings.TrimSpace(git.Git(t, "acme/calc", "show", "--name-status", "--format=", sha)); got != "M\tcalc.py\nD\ttest_calc.py" {
		t.Errorf("the pushed commit's files:\n%s\nwant calc.py modified and test_calc.py deleted only", got)
	}

	steps(t, ctx, "Open pull request",
		chromedp.SendKeys(chromedp.CSS("#pr-title"), "Fix add"),
		chromedp.SendKeys(chromedp.CSS("#pr-body"), "test_add passes."),
		chromedp.Click(chromedp.CSS("#open-pr")),
		waitJS(`!!document.querySelector('#changes-result .pull-request') || document.querySelector('#changes-msg .notice-error') !== null`),
	)
	screenshot(t, ctx, "e2e-changes-pull-request")
	if msg := eval[string](t, ctx, `document.querySelector('#changes-msg').innerText`); msg != "" {
		t.Fatalf("pull request: %s", msg)
	}
	wantURL := "http://" + forge.Host() + "/acme/calc/pull/1"
	if a := eval[string](t, ctx, `(a => a ? [a.getAttribute('href'), a.target, a.rel].join(' ') : '')(document.querySelector('#changes-result .pull-request a.pr-link'))`); a != wantURL+" _blank noopener noreferrer" {
		t.Errorf("pull request link %q, want %s in a new tab", a, wantURL)
	}
	reqs := forge.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the forge got %d requests", len(reqs))
	}
	got := reqs[0]
	if got.Problem != "" || got.Method != "POST" || got.Path != "/repos/acme/calc/pulls" || got.Header.Get("Authorization") != "Bearer "+token {
		t.Errorf("forge request: %s %s, Authorization ok %v, problem %q", got.Method, got.Path, got.Header.Get("Authorization") == "Bearer "+token, got.Problem)
	}
	if want := map[string]any{"title": "Fix add", "head": branch, "base": "main", "body": "test_add passes."}; fmt.Sprint(got.Fields) != fmt.Sprint(want) {
		t.Errorf("forge request fields = %v, want %v", got.Fields, want)
	}

	steps(t, ctx, "the chat shows the push and the pull request",
		chromedp.Click(chromedp.CSS("#changes-back")),
		waitJS(`!!document.querySelector('#chat-log .pull-request a.pr-link')`),
	)
	screenshot(t, ctx, "e2e-changes-cards")
	if href := eval[string](t, ctx, `document.querySelector('#chat-log .pull-request a.pr-link').getAttribute('href')`); href != wantURL {
		t.Errorf("the chat's pull request card links %q", href)
	}

	// The token: not in the page (either view), the events, the logs.
	dom := eval[string](t, ctx, `document.documentElement.outerHTML`)
	steps(t, ctx, "the Changes view once more", chromedp.Click(chromedp.CSS("#changes-link")), waitJS(`!!document.querySelector('#changes-diff')`))
	dom += eval[string](t, ctx, `document.documentElement.outerHTML`)
	events, _ := json.Marshal(chatEvents(t, s, chat.ID))
	for what, text := range map[string]string{"page's DOM": dom, "chat's events": string(events),
		"remoted's log": s.dlogs.String(), "remote-web's log": s.wlogs.String()} {
		if strings.Contains(text, token) {
			t.Errorf("the token is in the %s", what)
		}
	}
	if !strings.Contains(string(events), `"subtype":"pull_request"`) {
		t.Errorf("no pull_request event: %s", events)
	}
}

// chatEvents reads a chat's stored events through remote-web.
func chatEvents(t *testing.T, s *stack, chatID string) []api.Event {
	t.Helper()
	var page struct {
		Events []api.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(getJSON(t, s, "/v1/chats/"+chatID+"/history?limit=1000")), &page); err != nil {
		t.Fatal(err)
	}
	return page.Events
}
