package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/fakeopenai"
	"remote/providers"
	"remote/providers/clistore"
)

// TestMain removes the binaries built for this package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinaries()
	os.Exit(code)
}

// syncBuffer is a log sink shared by a process and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 4<<20 {
		return len(p), nil // bounded: enough to debug a failure
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stack is a real remoted and a real remote-web sharing one TOML file.
type stack struct {
	dir  string
	work string
	base string // remote-web's URL
	// preview is remote-web's wildcard preview origin (preview_url); sock
	// the daemon's socket.
	preview, sock string
	model         *fakeanthropic.Server
	api           *http.Client // testUser's, logged in by getJSON
	codex         *fakeopenai.Server
	// dlogs and wlogs are remoted's and remote-web's logs.
	dlogs, wlogs *syncBuffer
}

func startProc(t testing.TB, name, bin string, args ...string) *syncBuffer {
	t.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = io.Discard
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs)
		}
	})
	return logs
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startStack starts remoted (Claude against the fake Anthropic server, and
// Codex against the fake Responses server when withCodex) and remote-web.
func startStack(t *testing.T, model *fakeanthropic.Server, withCodex bool) *stack {
	t.Helper()
	return startStackSeeded(t, model, withCodex, nil)
}

// startStackSeeded is startStack with seed run on the daemon's state
// directory before remoted starts (to open a store filled beforehand).
func startStackSeeded(t testing.TB, model *fakeanthropic.Server, withCodex bool, seed func(stateDir string)) *stack {
	t.Helper()
	return startStackWith(t, model, stackOpts{codex: withCodex, seed: seed})
}

// stackOpts shape a stack: pageHost is the DNS name browsers use for the
// page (added to allowed_hosts; Chromium maps it to 127.0.0.1), and
// previewDomain the domain under which previews get their host names
// (default localhost).
//
// image and profiles are [lxd] image (default busybox) and profiles;
// storeClaude runs project chats' Claude from the CLI store (the pinned
// CLI imported into the state directory) instead of the host binary;
// toml is appended to the configuration (e.g. [forges] tables); shim
// sets [agent] shim_binary (the file routes need remote-shim).
type stackOpts struct {
	shim                    bool
	codex                   bool
	seed                    func(stateDir string)
	pageHost, previewDomain string
	image                   string
	profiles                []string
	storeClaude             bool
	toml                    string
}

// previewOrigin is the origin of p's port.
func (s *stack) previewOrigin(p api.Project, port int) string {
	return strings.Replace(s.preview, "*", fmt.Sprintf("%d-%s", port, p.ID), 1)
}

func startStackWith(t testing.TB, model *fakeanthropic.Server, o stackOpts) *stack {
	t.Helper()
	withCodex, seed := o.codex, o.seed
	if testing.Short() {
		t.Skip("end-to-end test builds and runs remoted and remote-web")
	}
	claude := testkit.ClaudeBinary(t)
	bins := testkit.Binaries(t, "remoted", "remote-web")
	remoted, remoteWeb := bins[0], bins[1]
	dir, err := os.MkdirTemp("", "rwe2e") // short: the socket path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &stack{dir: dir, work: filepath.Join(dir, "work"), model: model}
	home := filepath.Join(dir, "home")
	for _, d := range []string{s.work, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "remoted.sock")
	addr := freeAddr(t)
	s.base = "http://" + addr
	paddr := freeAddr(t)
	_, pport, _ := net.SplitHostPort(paddr)
	_, port, _ := net.SplitHostPort(addr)
	if o.previewDomain == "" {
		o.previewDomain = "localhost"
	}
	s.preview, s.sock = "http://*."+o.previewDomain+":"+pport, sock
	var hosts []string
	if o.pageHost != "" {
		s.base = "http://" + o.pageHost + ":" + port
		hosts = append(hosts, o.pageHost)
	}
	if o.image == "" {
		o.image = testkit.TestImage
	}
	binary := claude
	if o.storeClaude {
		binary = "claude" // a bare name: the CLI store's link in the container
	}
	cfg := fmt.Sprintf(`version = 1
[daemon]
socket = %q
state_dir = %q
log_level = "debug"

[agent]
allowed_roots = [%q]

# Projects start from the busybox test image unless a test needs the
# development image (heavy).
[lxd]
image = %q
profiles = %s

[providers.claude]
binary = %q
env = { HOME = %q, ANTHROPIC_BASE_URL = %q, ANTHROPIC_API_KEY = "sk-ant-test-dummy", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }
project_env = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]
`, sock, filepath.Join(dir, "state"), dir, o.image, tomlList(append([]string{"default"}, o.profiles...)), binary, home, model.URL)
	if o.shim {
		cfg = strings.Replace(cfg, "[agent]\n", fmt.Sprintf("[agent]\nshim_binary = %q\n", testkit.ShimBinary(t)), 1)
	}
	if o.storeClaude {
		// The host user's own Claude login stays on the host.
		cfg += fmt.Sprintf("[[providers.claude.credentials]]\nhost = %q\ncontainer = \"/root/.claude/.credentials.json\"\n",
			filepath.Join(home, ".claude", ".credentials.json"))
	}
	if withCodex {
		codexBin := testkit.CodexBinary(t)
		srv, err := fakeopenai.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		s.codex = srv
		codexHome := filepath.Join(dir, "codex-home")
		if err := fakeopenai.WriteCodexConfig(codexHome, fakeopenai.CodexConfig{BaseURL: srv.URL}); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf(`
[providers.codex]
binary = %q
env = { CODEX_HOME = %q, HOME = %q, FAKE_OPENAI_API_KEY = "test-key" }
project_env = ["FAKE_OPENAI_API_KEY"]
`, codexBin, codexHome, home)
	}
	cfg += fmt.Sprintf(`
[web]
listen = %q
preview_listen = %q
preview_url = %q
allowed_hosts = %s

[[web.users]]
name = %q
password_hash = %q

[[web.users]]
name = "bob"
password_hash = %q
`, addr, paddr, s.preview, tomlList(hosts), testUser, testHash(t, testPassword), testHash(t, bobPassword)) + o.toml
	cfgPath := filepath.Join(dir, "remote.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if o.storeClaude {
		nm := filepath.Join(testkit.Root(), "build", "npm", "node_modules")
		st := clistore.New(filepath.Join(dir, "state", "clis"))
		if _, err := st.Import(context.Background(), providers.Claude, "", nm, clistore.InstallOptions{Select: true}); err != nil {
			t.Fatalf("import claude into the CLI store: %v", err)
		}
	}
	if seed != nil {
		seed(filepath.Join(dir, "state"))
	}
	dlogs := startProc(t, "remoted", remoted, "-config", cfgPath)
	wlogs := startProc(t, "remote-web", remoteWeb, "-config", cfgPath)
	s.dlogs, s.wlogs = dlogs, wlogs
	// Both are up when an unauthenticated API call gets remote-web's 401
	// and the daemon's socket exists.
	if err := testkit.Poll(time.Minute, func() error {
		resp, err := http.Get("http://" + addr + "/login")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /login: %s", resp.Status)
		}
		_, err = os.Stat(sock)
		return err
	}); err != nil {
		t.Fatalf("stack did not come up: %v\nremoted:\n%s\nremote-web:\n%s", err, dlogs, wlogs)
	}
	waitDaemonLXD(t, sock, dlogs)
	return s
}

// waitDaemonLXD waits, on a machine with LXD, until remoted reports LXD
// reachable: a busy LXD (other packages' tests create containers) can take
// longer than remoted's first dial allows, and the daemon then serves
// degraded until its next attempt.
func waitDaemonLXD(t testing.TB, sock string, dlogs *syncBuffer) {
	t.Helper()
	if _, err := os.Stat("/var/lib/lxd/unix.socket"); err != nil {
		return
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer c.CloseIdleConnections()
	if err := testkit.Poll(2*time.Minute, func() error {
		var info api.Info
		resp, err := c.Get("http://remoted/v1/info")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
			return err
		}
		if !info.LXD.Reachable {
			return fmt.Errorf("LXD %+v", info.LXD)
		}
		return nil
	}); err != nil {
		t.Fatalf("remoted did not reach LXD in 2m: %v\nremoted:\n%s", err, dlogs)
	}
}

// bobPassword is the stack's second web user's, bob's, password.
const bobPassword = "bob's own passphrase"

// tomlList writes strs as a TOML array.
func tomlList(strs []string) string {
	q := make([]string, len(strs))
	for i, v := range strs {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// createChat fills the new-chat form and waits for the chat view.
func createChat(t *testing.T, ctx context.Context, base, provider, cwd string) {
	t.Helper()
	createChatWith(t, ctx, base, provider, cwd, "")
}

// createChatWith is createChat that also picks an approval policy in the
// form's Approvals select when approval is not empty.
func createChatWith(t *testing.T, ctx context.Context, base, provider, cwd, approval string) {
	t.Helper()
	actions := []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(base + "/#/chats"),
		waitJS(`!!document.querySelector('#new-provider option[value="` + provider + `"]')`),
		chromedp.SetValue(chromedp.CSS("#new-provider"), provider),
	}
	if approval != "" {
		actions = append(actions,
			// SetValue fires no change event, which a user's pick does and
			// which makes the form show the Approvals select.
			waitJS(`document.querySelector('#new-provider').dispatchEvent(new Event('change'))`),
			waitJS(`!document.querySelector('#new-approval-label').hidden`),
			chromedp.SetValue(chromedp.CSS("#new-approval"), approval),
		)
	}
	actions = append(actions,
		chromedp.SendKeys(chromedp.CSS("#new-cwd"), cwd),
		chromedp.Click(chromedp.CSS("#create-chat")),
		chromedp.WaitVisible(chromedp.CSS("#prompt")),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
	)
	steps(t, ctx, "create "+provider+" chat", actions...)
}

// getJSON calls the API through remote-web as testUser and returns the
// body. It logs in once per stack (successful logins are rate-limited).
func getJSON(t *testing.T, s *stack, path string) string {
	t.Helper()
	if s.api == nil {
		c := noRedirectClient()
		resp, err := c.PostForm(s.base+"/login", url.Values{"username": {testUser}, "password": {testPassword}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s.api = c
	}
	c := s.api
	resp, err := c.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

func loginStack(t *testing.T, s *stack) context.Context {
	t.Helper()
	ctx := newBrowser(t)
	loginInBrowser(t, ctx, s.base, testUser, testPassword)
	return ctx
}

// typeText focuses sel and inserts text as one input event, the way a
// paste or an IME does. (Synthesized key events reach xterm.js both as
// keypress and input and would type every character twice.)
func typeText(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(chromedp.CSS(sel)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
			return err
		}),
	)
}

// TestE2EClaudeChatStreamsAndSurvivesReload: a browser logs in through
// remote-web, creates a loose Claude chat, sends a prompt, watches the
// reply stream in from the real Claude CLI (talking to the fake model), is
// reloaded in the middle of the stream, and ends with the whole reply
// shown exactly once.
func TestE2EClaudeChatStreamsAndSurvivesReload(t *testing.T) {
	const parts = 30
	var blocks []fakeanthropic.Block
	var want []string
	for i := range parts {
		s := fmt.Sprintf("chunk-%02d ", i)
		want = append(want, strings.TrimSpace(s))
		blocks = append(blocks, fakeanthropic.TextBlock(s))
	}
	model := fakeanthropic.New(t)
	model.Push(fakeanthropic.Reply{
		Blocks: blocks, Delay: 150 * time.Millisecond,
		When: func(r *fakeanthropic.Request) bool { return strings.Contains(r.UserText(), "e2e-stream") },
	})
	s := startStack(t, model, false)
	ctx := loginStack(t, s)
	createChat(t, ctx, s.base, "claude", s.work)
	steps(t, ctx, "prompt and first deltas",
		chromedp.SendKeys(chromedp.CSS("#prompt"), "e2e-stream: count for me\n"),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'true'`),
		waitJS(`document.querySelector('#chat-log').innerText.includes('chunk-03')`),
	)
	screenshot(t, ctx, "e2e-claude-mid-stream")
	midText := eval[string](t, ctx, `document.querySelector('#chat-log').innerText`)
	if strings.Contains(midText, want[parts-1]) {
		t.Log("the reply finished before the reload; the reload still checks exactly-once replay")
	}
	steps(t, ctx, "reload mid-stream and wait for the end",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#chat-log")),
		waitJS(`document.querySelector('#chat-log').innerText.includes('`+want[parts-1]+`')`),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
	)
	screenshot(t, ctx, "e2e-claude-chat")
	text := eval[string](t, ctx, `document.querySelector('#chat-log').innerText`)
	for _, w := range want {
		if n := strings.Count(text, w); n != 1 {
			t.Errorf("%s shown %d times, want once; chat log:\n%s", w, n, text)
			break
		}
	}
	if n := strings.Count(text, "e2e-stream: count for me"); n != 1 {
		t.Errorf("the prompt is shown %d times, want once", n)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('.msg-user').length`); n != 1 {
		t.Errorf("%d user messages, want 1", n)
	}
	// The page's last seq equals the daemon's: nothing was skipped either.
	if seq := eval[string](t, ctx, `document.querySelector('#chat-log').dataset.lastSeq`); seq == "" || seq == "0" {
		t.Errorf("page saw no stored events (lastSeq %q)", seq)
	}
}

// TestE2ECodexApprovalAccept: a Codex chat created in the page with the
// approval policy "untrusted" asks before it runs a command; the interaction
// card's Accept answers through the API and the run completes with the
// command's output shown.
func TestE2ECodexApprovalAccept(t *testing.T) {
	model := fakeanthropic.New(t)
	s := startStack(t, model, true)
	usage := fakeopenai.Usage{InputTokens: 10, OutputTokens: 5}
	s.codex.Enqueue(
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Shell("echo approved-e2e")}, Usage: usage},
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("codex-e2e-finished")}, Usage: usage},
	)
	ctx := loginStack(t, s)
	if providers := getJSON(t, s, "/v1/providers"); !strings.Contains(providers, `"id":"codex"`) || !strings.Contains(providers, `"approvals":true`) {
		t.Fatalf("remoted offers no codex provider with approvals: %s", providers)
	}
	pick := func(provider string) string {
		return `(document.querySelector('#new-provider').value = '` + provider + `', document.querySelector('#new-provider').dispatchEvent(new Event('change')))`
	}
	steps(t, ctx, "Approvals only for a provider that declares them",
		chromedp.Navigate(s.base+"/#/chats"),
		waitJS(`!!document.querySelector('#new-provider option[value="codex"]')`),
		waitJS(pick("claude")),
		waitJS(`document.querySelector('#new-approval-label').hidden`),
		waitJS(pick("codex")),
		waitJS(`!document.querySelector('#new-approval-label').hidden && document.querySelectorAll('#new-approval option').length === 5`),
	)
	createChatWith(t, ctx, s.base, "codex", s.work, "untrusted")
	steps(t, ctx, "prompt until the approval card",
		waitJS(`document.querySelector('.chat-title').innerText.includes('approvals: untrusted')`),
		chromedp.SendKeys(chromedp.CSS("#prompt"), "run the approved command\n"),
		// The final text shows too if Codex ran the command without asking.
		waitJS(`!!document.querySelector('.interaction.pending button.accept') || document.querySelector('#chat-log').innerText.includes('codex-e2e-finished')`),
	)
	if eval[bool](t, ctx, `!document.querySelector('.interaction.pending button.accept')`) {
		t.Fatalf("the run ended without an approval card:\n%s", eval[string](t, ctx, `document.querySelector('#chat-log').innerText`))
	}
	if text := eval[string](t, ctx, `document.querySelector('#chat-log').innerText`); strings.Contains(text, "codex-e2e-finished") {
		t.Fatalf("the run went on before the approval was answered:\n%s", text)
	}
	screenshot(t, ctx, "e2e-codex-approval")
	// The card says what will run and where, as a person reads it.
	q := eval[string](t, ctx, `document.querySelector('.interaction.pending .approval-question').innerText`)
	if !strings.HasPrefix(q, "Run ") || !strings.Contains(q, "echo approved-e2e") || !strings.HasSuffix(q, " in "+s.work+"?") {
		t.Errorf("approval question = %q, want Run `…echo approved-e2e…` in %s?", q, s.work)
	}
	if text := eval[string](t, ctx, `document.querySelector('#chat-log').innerText`); strings.Contains(text, "requestApproval") {
		t.Errorf("the raw method name is shown:\n%s", text)
	}
	// The live sidebar (GET /ws/workspace from the real daemon) marks the
	// chat as waiting.
	steps(t, ctx, "sidebar shows waiting",
		waitJS(`!!document.querySelector('#side-chats li.current .badge.waiting')`))
	steps(t, ctx, "accept and finish",
		chromedp.Click(chromedp.CSS(".interaction.pending button.accept")),
		waitJS(`!!document.querySelector('.interaction.resolved')`),
		waitJS(`document.querySelector('#chat-log').innerText.includes('codex-e2e-finished')`),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
	)
	screenshot(t, ctx, "e2e-codex-accepted")
	steps(t, ctx, "sidebar badge cleared", waitJS(`!document.querySelector('#side-chats li.current .badge')`))
	text := eval[string](t, ctx, `document.querySelector('#chat-log').innerText`)
	if !strings.Contains(text, "approved-e2e") {
		t.Errorf("the approved command's output is not shown:\n%s", text)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('.tool.done').length`); n != 1 {
		t.Errorf("%d finished tool cards, want 1:\n%s", n, text)
	}
}

// TestE2ETerminal: the Projects view creates and starts a project, sets a
// secret (only its name comes back), opens the terminal (xterm.js over
// /v1/projects/{name}/terminal through remote-web) where a typed command's
// output appears, and stops the project.
func TestE2ETerminal(t *testing.T) {
	cl := testkit.LXD(t)
	model := fakeanthropic.New(t)
	s := startStackWith(t, model, stackOpts{shim: true})
	name := strings.TrimPrefix(testkit.ContainerName("web"), "t-")
	testkit.CleanupProjectContainers(t, cl, name)
	ctx := loginStack(t, s)
	steps(t, ctx, "create project",
		chromedp.Navigate(s.base+"/#/projects"),
		chromedp.WaitVisible(chromedp.CSS("#project-name")),
		chromedp.SendKeys(chromedp.CSS("#project-name"), name),
		chromedp.Click(chromedp.CSS("#create-project")),
		chromedp.WaitVisible(chromedp.CSS(`.project[data-project="`+name+`"] .terminal-link`)),
		chromedp.Click(chromedp.CSS(`.project[data-project="`+name+`"] .start`)),
		waitJS(`(document.querySelector('.project[data-project="`+name+`"] .badge')||{}).textContent === 'running'`),
	)
	card := `.project[data-project="` + name + `"]`
	const secretValue = "e2e-secret-value-0451"
	steps(t, ctx, "set a secret",
		chromedp.Click(chromedp.CSS(card+" .project-secrets summary")),
		waitJS(`document.querySelector('`+card+` .secrets').innerText.includes('No secrets')`),
		chromedp.SendKeys(chromedp.CSS(card+" .secret-key"), "E2E_TOKEN"),
		chromedp.SendKeys(chromedp.CSS(card+" .secret-value"), secretValue),
		chromedp.Click(chromedp.CSS(card+" .project-secrets button[type=submit]")),
		waitJS(`document.querySelector('`+card+` .secrets').innerText.includes('E2E_TOKEN')`),
	)
	if text := eval[string](t, ctx, `document.body.innerText + document.body.innerHTML`); strings.Contains(text, secretValue) {
		t.Error("the secret's value is in the page")
	}
	screenshot(t, ctx, "e2e-project-secrets")
	steps(t, ctx, "open terminal and run a command",
		chromedp.Click(chromedp.CSS(`.project[data-project="`+name+`"] .terminal-link`)),
		waitJS(`(document.querySelector('#terminal')||{dataset:{}}).dataset.connected === 'true'`),
		waitJS(`Number(document.querySelector('#terminal').dataset.bytes || 0) > 0`), // the prompt
		typeText(".xterm-helper-textarea", "echo e2e-$((6*7))"),
		chromedp.KeyEvent("\r"),
		waitJS(`document.querySelector('.xterm-rows').innerText.includes('e2e-42')`),
	)
	screenshot(t, ctx, "e2e-terminal")
	upload := filepath.Join(t.TempDir(), "notes-e2e.txt")
	if err := os.WriteFile(upload, []byte("uploaded through the page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps(t, ctx, "upload a file and find it listed with a download link",
		chromedp.Navigate(s.base+"/#/projects"),
		chromedp.WaitVisible(chromedp.CSS(card+" .files-link")),
		chromedp.Click(chromedp.CSS(card+" .files-link")),
		waitJS(`document.querySelector('#files-path') && document.querySelector('#files-path').textContent === '/workspace'`),
		chromedp.SetUploadFiles(chromedp.CSS("#file-upload"), []string{upload}),
		chromedp.Click(chromedp.CSS("#file-upload-form button[type=submit]")),
		waitJS(`!!document.querySelector('#file-list tr[data-name="notes-e2e.txt"] a.download')`),
	)
	href := eval[string](t, ctx, `document.querySelector('#file-list tr[data-name="notes-e2e.txt"] a.download').getAttribute('href')`)
	if href != "/v1/projects/"+name+"/files/raw?path=%2Fworkspace%2Fnotes-e2e.txt" {
		t.Errorf("download link %q", href)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('`+href+`').then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got != "uploaded through the page\n" {
		t.Errorf("download through the page: %q", got)
	}
	// The same URL as an image (what a chat's Markdown would render) is
	// refused: Chromium sends Sec-Fetch-Dest: image.
	img, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new Promise(ok => { const i = new Image(); i.onload = () => ok('loaded'); i.onerror = () => ok('refused'); i.src = '`+href+`'; })`, chromedp.EvalAwaitPromise))
	if err != nil || img != "refused" || !strings.Contains(s.wlogs.String(), "sec_fetch_dest=image") {
		t.Errorf("the download as an image: %q %v; remote-web's log:\n%s", img, err, s.wlogs.String())
	}
	screenshot(t, ctx, "e2e-files")
	steps(t, ctx, "stop the project",
		chromedp.Navigate(s.base+"/#/projects"),
		chromedp.WaitVisible(chromedp.CSS(card+" .stop")),
		chromedp.Click(chromedp.CSS(card+" .stop")),
		waitJS(`(document.querySelector('`+card+` .badge')||{}).textContent === 'stopped'`),
	)
}
