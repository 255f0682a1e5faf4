package web

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"remote/api"
	"remote/internal/testkit"
)

// chromiumPath is Debian's chromium, installed by scripts/install-browser.
const chromiumPath = "/usr/bin/chromium"

// browserTimeout bounds one browser test so a hung page fails instead of
// stalling the suite; it is a guard, not an assertion on speed.
const browserTimeout = 3 * time.Minute

// newBrowser starts a fresh headless chromium and returns a tab context.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	testkit.Short(t, "Chromium")
	if fi, err := os.Stat(chromiumPath); err != nil || fi.Mode()&0o111 == 0 {
		testkit.Missing(t, "%s not installed (scripts/install-browser)", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// The tests' DNS names (noRedirectClient's testName); *.localhost
		// is loopback in Chromium already.
		chromedp.Flag("host-resolver-rules", "MAP *.example.com 127.0.0.1, MAP *.example.net 127.0.0.1, MAP *.lan 127.0.0.1"),
		chromedp.WindowSize(1280, 900),
	}
	base, cancelTimeout := context.WithTimeout(context.Background(), browserTimeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		cancelTimeout()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshot saves the page under build/screenshots/<name>.png.
func screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	dir := filepath.Join(testkit.Root(), "build", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// loginInBrowser fills and submits the login form.
func loginInBrowser(t testing.TB, ctx context.Context, base, user, pw string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := chromedp.Do(sctx,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), pw),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#new-chat")),
	)
	if err != nil {
		screenshot(t, ctx, t.Name()+"-login-failed")
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerHTML`))
		t.Fatalf("log in as %s: %v (page %s: %.2000s)", user, err, loc, body)
	}
}

// steps runs browser steps with a 60 s guard; on failure it saves a
// screenshot and fails the test with the page's URL and text.
func steps(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name() + "-" + what)
		screenshot(t, ctx, name+"-failed")
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\npage %s:\n%.3000s", what, err, loc, body)
	}
}

// waitJS polls a JavaScript expression until it is true (30 s at most).
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return waitJSFor(expr, 30*time.Second)
}

// waitJSFor is waitJS polling for up to timeout.
func waitJSFor(expr string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			_, err := poll(ctx, t)
			if err == nil || !navigatedAway(err) || ctx.Err() != nil {
				return chromedp.Void{}, err
			}
			// The page navigated while the poll ran (a redirect, a
			// reload): its execution context went with it. Poll the new
			// page.
			time.Sleep(50 * time.Millisecond) //nolint:forbidigo // the page navigated mid-poll: give the new page a moment before polling it again
		}
	}
}

// navigatedAway reports whether err is Chromium's answer to an evaluation
// in a page that has since navigated: the expression never ran, so a poll
// may start again on the new page.
func navigatedAway(err error) bool {
	msg := err.Error()
	for _, s := range []string{
		"Cannot find context with specified id",
		"Execution context was destroyed",
		"Inspected target navigated or closed",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// eval runs a JavaScript expression and returns its value.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// scriptDaemon is a fake remoted for page tests: one chat whose WebSocket
// replays stored events after since, answers a prompt with a scripted run,
// and completes the run when the browser answers the interaction.
type scriptDaemon struct {
	socket  string
	mu      sync.Mutex
	events  []api.Event
	conns   map[*websocket.Conn]bool
	since   []int64
	frames  []api.ClientMessage
	running bool
	// dropAfterPrompt closes every socket once the first part of the run
	// is out, to exercise reconnect with since=.
	dropAfterPrompt bool
	// chats are the workspace: scriptChatID first, more added by tests.
	chats   []api.Chat
	wsConns map[*websocket.Conn]bool
	// histories records every history request's query; usageRows answer
	// GET /v1/usage.
	histories []string
	usageRows []api.UsageRow
	usageBy   []string
	// changes answers a project chat's diff, push and pull-request
	// (changes_test.go).
	changes scriptChanges
}

const scriptChatID = "abcdef012345"

func (d *scriptDaemon) appendEvents(evs ...api.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ev := range evs {
		ev.Seq = int64(len(d.events) + 1)
		ev.T = time.Now().UnixMilli()
		d.events = append(d.events, ev)
		for c := range d.conns {
			_ = c.WriteJSON(ev)
		}
	}
}

func (d *scriptDaemon) broadcast(ev api.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ev.Type == api.EventSync {
		d.running = ev.Running
	}
	for c := range d.conns {
		_ = c.WriteJSON(ev)
	}
}

func (d *scriptDaemon) dropAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.conns {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "test drop"), time.Now().Add(time.Second))
		_ = c.Close()
		delete(d.conns, c)
	}
}

func startScriptDaemon(t *testing.T) *scriptDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "rws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &scriptDaemon{socket: filepath.Join(dir, "d.sock"), conns: map[*websocket.Conn]bool{}, wsConns: map[*websocket.Conn]bool{}}
	chat := api.Chat{ID: scriptChatID, Title: "script", Provider: "claude", CreatedAt: time.Now()}
	d.chats = []api.Chat{chat}
	mux := http.NewServeMux()
	d.routes(mux)
	d.changesRoutes(mux)
	mux.HandleFunc("GET /v1/providers", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []api.ProviderInfo{{ID: "claude", Label: "Claude Code", Enabled: true, Capabilities: json.RawMessage(`{}`)}})
	})
	mux.HandleFunc("GET /v1/projects", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []api.Project{}) })
	mux.HandleFunc("GET /v1/chats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, d.chatList()) })
	mux.HandleFunc("POST /v1/chats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 201, d.chat(scriptChatID)) })
	mux.HandleFunc("GET /v1/chats/{id}", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, d.chat(r.PathValue("id"))) })
	up := websocket.Upgrader{}
	mux.HandleFunc("GET /ws/chat/{id}", func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		d.mu.Lock()
		d.since = append(d.since, since)
		for _, ev := range d.events {
			if ev.Seq > since {
				_ = c.WriteJSON(ev)
			}
		}
		_ = c.WriteJSON(api.Event{Type: api.EventSync, Running: d.running})
		d.conns[c] = true
		d.mu.Unlock()
		go d.read(c)
	})
	ln, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return d
}

func (d *scriptDaemon) read(c *websocket.Conn) {
	defer func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
		c.Close()
	}()
	for {
		var m api.ClientMessage
		if err := c.ReadJSON(&m); err != nil {
			return
		}
		d.mu.Lock()
		d.frames = append(d.frames, m)
		drop := d.dropAfterPrompt
		d.mu.Unlock()
		switch m.Type {
		case "prompt":
			d.mu.Lock()
			_ = c.WriteJSON(api.Event{Type: api.EventSystem, Subtype: api.SubtypePromptAccepted, Data: json.RawMessage(`{"clientId":"` + m.ClientID + `"}`)})
			d.mu.Unlock()
			d.appendEvents(api.Event{Type: api.EventUser, Text: m.Text})
			d.broadcast(api.Event{Type: api.EventSync, Running: true})
			d.appendEvents(
				api.Event{Type: api.EventThinking, MessageID: "t1", Text: "pondering the request"},
				api.Event{Type: api.EventAssistantText, MessageID: "m1", Text: "# Reply\n\nHere is **bold** "},
				api.Event{Type: api.EventAssistantText, MessageID: "m1", Text: `and <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>safe.`},
				api.Event{Type: api.EventToolUseStart, ID: "tool1", Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
			)
			if drop {
				d.dropAll()
			}
			d.appendEvents(
				api.Event{Type: api.EventToolUseEnd, ID: "tool1", Output: "README.md\n"},
				api.Event{Type: api.EventInteractionRequest, ID: "perm1", InteractionID: `"req-7"`, Name: "execCommandApproval", Input: json.RawMessage(`{"command":["rm","-rf","build"]}`)},
			)
		case "interaction_response":
			status := "declined"
			if strings.Contains(string(m.Result), `"accept`) {
				status = "accepted"
			}
			d.appendEvents(
				api.Event{Type: api.EventInteractionResolved, InteractionID: m.InteractionID, Status: status},
				api.Event{Type: api.EventAssistantText, MessageID: "m2", Text: "Finished after " + status + "."},
				api.Event{Type: api.EventComplete, Provider: "claude"},
			)
			d.broadcast(api.Event{Type: api.EventSync, Running: false})
		}
	}
}

// TestPageChatFlow drives the page in chromium against a scripted daemon:
// the prompt box (Shift+Enter newline, Enter sends), Cancel, safe Markdown,
// thinking, tool card pairing, the interaction card's Accept, the running
// indicator, and exactly-once events across a dropped connection and a
// reload.
func TestPageChatFlow(t *testing.T) {
	ctx := newBrowser(t)
	d := startScriptDaemon(t)
	d.dropAfterPrompt = true
	s, err := New(Options{Socket: d.socket, Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	loginInBrowser(t, ctx, hs.URL, testUser, testPassword)

	steps(t, ctx, "providers listed", waitJS(`!!document.querySelector('#new-provider option[value="claude"]')`))
	steps(t, ctx, "create chat",
		chromedp.Click(chromedp.CSS("#create-chat")),
		chromedp.WaitVisible(chromedp.CSS("#prompt")))
	steps(t, ctx, "chat flow",
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
		chromedp.SendKeys(chromedp.CSS("#prompt"), "list the files"),
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.SendKeys(chromedp.CSS("#prompt"), "please\n"),
		// The interaction card arrives only after the dropped socket reconnected.
		chromedp.WaitVisible(chromedp.CSS(`.interaction.pending button.accept`)),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'true'`),
		waitJS(`!document.querySelector('#cancel').disabled`),
		chromedp.Click(chromedp.CSS(`#cancel`)),
		chromedp.Click(chromedp.CSS(`.interaction.pending button.accept`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice-complete`)),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
	)
	screenshot(t, ctx, "page-chat-flow")
	xss := eval[any](t, ctx, `window.__xss`)
	userCount := eval[int](t, ctx, `document.querySelectorAll('.msg-user').length`)
	assistantCount := eval[int](t, ctx, `document.querySelectorAll('.msg-assistant').length`)
	toolDone := eval[int](t, ctx, `document.querySelectorAll('.tool.done').length`)
	text := eval[string](t, ctx, `document.querySelector('#chat-log').innerText`)
	if xss != nil {
		t.Errorf("agent HTML ran script: window.__xss = %v", xss)
	}
	if userCount != 1 || assistantCount != 2 || toolDone != 1 {
		t.Errorf("user=%d assistant=%d tools done=%d, want 1, 2, 1", userCount, assistantCount, toolDone)
	}
	for _, want := range []string{"Reply", "Here is bold and", "safe.", "Finished after accepted."} {
		if !strings.Contains(text, want) {
			t.Errorf("chat log lacks %q:\n%s", want, text)
		}
	}
	d.mu.Lock()
	sinces := append([]int64(nil), d.since...)
	frames := append([]api.ClientMessage(nil), d.frames...)
	d.mu.Unlock()
	var answered *api.ClientMessage
	for i := range frames {
		if frames[i].Type == "interaction_response" {
			answered = &frames[i]
		}
	}
	if len(sinces) < 2 || sinces[0] != 0 || sinces[1] == 0 {
		t.Errorf("since on each connect = %v, want 0 then the last seq seen", sinces)
	}
	if answered == nil || answered.InteractionID != `"req-7"` || string(answered.Result) != `{"decision":"accept"}` {
		t.Errorf("interaction answer = %+v", answered)
	}
	var types []string
	for _, f := range frames {
		types = append(types, f.Type)
	}
	if want := []string{"prompt", "cancel", "interaction_response"}; !slices.Equal(types, want) {
		t.Errorf("client frames %v, want %v", types, want)
	}
	if len(frames) > 0 && frames[0].Text != "list the files\nplease" {
		t.Errorf("prompt text %q: Shift+Enter must add a newline, Enter send", frames[0].Text)
	}

	d.mu.Lock()
	lastSeq := strconv.Itoa(len(d.events))
	d.mu.Unlock()
	t.Run("reload shows every event once", func(t *testing.T) {
		steps(t, ctx, "reload",
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`.notice-complete`)),
			waitJS(`document.querySelector('#chat-log').dataset.lastSeq === '`+lastSeq+`'`),
		)
		users := eval[int](t, ctx, `document.querySelectorAll('.msg-user').length`)
		assistants := eval[int](t, ctx, `document.querySelectorAll('.msg-assistant').length`)
		html := eval[string](t, ctx, `document.querySelector('.msg-assistant .msg-body').innerHTML`)
		if users != 1 || assistants != 2 {
			t.Errorf("after reload user=%d assistant=%d, want 1 and 2", users, assistants)
		}
		if strings.Contains(html, "onerror") || strings.Contains(html, "<script") {
			t.Errorf("unsanitized agent HTML in the page: %s", html)
		}
		if !strings.Contains(html, "<strong>bold</strong>") {
			t.Errorf("Markdown not rendered: %s", html)
		}
	})
}
