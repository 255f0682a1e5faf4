package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"remote/api"
)

// scriptChanges is what the scripted daemon answers for a project chat's
// changes: diffs by ?turn= ("" is the whole chat), and the push and
// pull-request handlers; bodies records the POSTed bodies.
type scriptChanges struct {
	diffs        map[string]api.Diff
	push, pull   http.HandlerFunc
	bodies       []string
	projectsSeen []string
}

// changesRoutes adds GET /v1/projects/{name} (project "calc" has a
// repository), the diff, push and pull-request routes to mux.
func (d *scriptDaemon) changesRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/projects/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := api.Project{Name: r.PathValue("name"), Status: "running"}
		if p.Name == "calc" {
			p.Repo = &api.ProjectRepo{URL: "https://forge.example/acme/calc.git", TokenSecret: "GIT_TOKEN"}
		}
		d.mu.Lock()
		d.changes.projectsSeen = append(d.changes.projectsSeen, p.Name)
		d.mu.Unlock()
		writeJSON(w, 200, p)
	})
	mux.HandleFunc("GET /v1/chats/{id}/diff", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		diff, ok := d.changes.diffs[r.URL.Query().Get("turn")]
		d.mu.Unlock()
		if !ok {
			writeError(w, 404, api.CodeNotFound, "no such turn")
			return
		}
		writeJSON(w, 200, diff)
	})
	post := func(pick func() http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			d.mu.Lock()
			d.changes.bodies = append(d.changes.bodies, r.URL.Path+" "+string(b))
			h := pick()
			d.mu.Unlock()
			h(w, r)
		}
	}
	mux.HandleFunc("POST /v1/chats/{id}/push", post(func() http.HandlerFunc { return d.changes.push }))
	mux.HandleFunc("POST /v1/chats/{id}/pull-request", post(func() http.HandlerFunc { return d.changes.pull }))
}

// hostileName is a file name the agent chose: HTML that runs script when
// it is parsed as markup.
const hostileName = `<img src=x onerror="window.__xss=1">`

// TestAttackChangesHostileWork: hostile model output names a file with
// markup and writes <script> and an <img onerror> into it; the forge's
// answer and a stored system/pull_request event carry a javascript: URL.
// The Changes view shows the name and the patch as text (no element of
// theirs, no script run), marks the cut patch, lists the recorded turns;
// the javascript: URLs are text, never a link, while the https pull
// request is a link opening a new tab without a handle on the page. Push
// shows its progress with the buttons disabled, then the daemon's error.
func TestAttackChangesHostileWork(t *testing.T) {
	d, hs, ctx := pageServer(t)
	const chatID = "abcdef999999"
	d.upsertChat(api.Chat{ID: chatID, Title: "fix calc", Provider: "claude", Project: "calc", CreatedAt: time.Now()}, false)
	hostilePatch := "diff --git a/" + hostileName + " b/" + hostileName + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + hostileName +
		"\n@@ -0,0 +1,2 @@\n+<script>window.__xss=2</script>\n+<img src=x onerror=\"window.__xss=3\">\n"
	d.mu.Lock()
	d.changes.diffs = map[string]api.Diff{
		"": {Base: "b1", Head: "h1", Truncated: true, Patch: hostilePatch, Files: []api.DiffFile{
			{Path: hostileName, Status: "A", Additions: 2}, {Path: "logo.png", Status: "M", Binary: true}}},
		"1": {Base: "b1", Head: "h2", Patch: "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n",
			Files: []api.DiffFile{{Path: "calc.py", Status: "M", Additions: 1, Deletions: 1}}},
	}
	d.changes.push = func(w http.ResponseWriter, r *http.Request) {
		var req api.PushRequest
		if json.NewDecoder(r.Body).Decode(&req) == nil && len(req.Paths) > 0 {
			writeError(w, 400, api.CodeBadRequest, refusedPath)
			return
		}
		time.Sleep(1500 * time.Millisecond) //nolint:forbidigo // a push takes seconds
		writeError(w, 409, api.CodeConflict, "git push: ! [rejected] remote/abcdef99 (non-fast-forward)")
	}
	d.changes.pull = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 201, api.PullRequestResult{URL: "javascript:window.__xss=5", Number: 9, Head: "remote/abcdef99", SHA: strings.Repeat("a", 40), Base: "main"})
	}
	d.mu.Unlock()
	sys := func(subtype, data string) api.Event {
		return api.Event{Type: api.EventSystem, Subtype: subtype, Data: json.RawMessage(data)}
	}
	d.appendEvents(
		api.Event{Type: api.EventUser, Text: "fix the failing test"},
		sys(api.SubtypeTurnTree, `{"turn":1,"tree":"4b825dc642cb6eb9a060e54bf8d69288fbee4904"}`),
		sys(api.SubtypePushed, `{"branch":"remote/abcdef99","sha":"0123456789abcdef0123456789abcdef01234567"}`),
		sys(api.SubtypePullRequest, `{"url":"javascript:window.__xss=4","number":7}`),
		sys(api.SubtypePullRequest, `{"url":"https://forge.example/acme/calc/pull/8","number":8}`),
		api.Event{Type: api.EventUser, Text: "and a second turn\nwith two lines"},
		sys(api.SubtypeTurnTree, `{"turn":6,"error":"git write-tree: boom"}`),
	)

	steps(t, ctx, "the chat links to its changes",
		chromedp.Navigate(chatURL(hs.URL, chatID)),
		waitJS(`!!document.querySelector('.pull-request .pr-link')`),
		chromedp.WaitVisible(chromedp.CSS(`#changes-link`)),
	)
	// The stored events: the https pull request is a safe link, the
	// javascript: one text only.
	links := eval[[]string](t, ctx, `[...document.querySelectorAll('#chat-log .pull-request a')].map(a => [a.getAttribute('href'), a.target, a.rel].join(' '))`)
	if strings.Join(links, "|") != "https://forge.example/acme/calc/pull/8 _blank noopener noreferrer" {
		t.Errorf("pull request links in the chat: %q", links)
	}
	if txt := eval[string](t, ctx, `[...document.querySelectorAll('#chat-log .pull-request')].map(c => c.innerText).join('|')`); !strings.Contains(txt, "#7 javascript:window.__xss=4 (not a web address: no link)") {
		t.Errorf("the javascript: pull request reads %q", txt)
	}
	if pushed := eval[string](t, ctx, `document.querySelector('#chat-log .pushed').innerText`); pushed != "Pushed branch remote/abcdef99 at 0123456789ab" {
		t.Errorf("pushed card = %q", pushed)
	}

	steps(t, ctx, "open the Changes view",
		chromedp.Click(chromedp.CSS(`#changes-link`)),
		waitJS(`document.querySelectorAll('#changes-files tr').length === 2`),
		waitJS(`document.querySelectorAll('#changes-turn option').length === 3`),
		chromedp.Sleep(300*time.Millisecond), // an <img onerror> would have fired
	)
	screenshot(t, ctx, "attack-changes")
	if got := eval[string](t, ctx, `document.querySelector('#changes-files code.file-path').textContent`); got != hostileName {
		t.Errorf("file name shown as %q, want the text %q", got, hostileName)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('.changes img, .changes script, #chat-log img').length`); n != 0 {
		t.Errorf("the agent's file name or patch made %d elements", n)
	}
	if xss := eval[string](t, ctx, `String(window.__xss)`); xss != "undefined" {
		t.Errorf("the agent's markup ran: window.__xss = %s", xss)
	}
	if patch := eval[string](t, ctx, `document.querySelector('#changes-diff').textContent`); patch != hostilePatch+"\n" {
		t.Errorf("patch shown as %q", patch)
	}
	if add := eval[string](t, ctx, `[...document.querySelectorAll('#changes-diff .dl.add')].map(e => e.textContent).join('')`); add != "+<script>window.__xss=2</script>\n+<img src=x onerror=\"window.__xss=3\">\n" {
		t.Errorf("added lines = %q", add)
	}
	if s := eval[string](t, ctx, `document.querySelector('#changes-summary').innerText`); s != "2 files changed, +2 −0" {
		t.Errorf("summary = %q", s)
	}
	if s := eval[string](t, ctx, `document.querySelector('#changes-truncated').innerText`); s != "The diff is too long: it is cut short below (the file list above is complete)." {
		t.Errorf("truncated notice = %q", s)
	}
	if rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#changes-files tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim())`); strings.Join(rows, "|") != "A "+hostileName+" +2 −0|M logo.png binary" {
		t.Errorf("file rows = %q", rows)
	}
	opts := eval[[]string](t, ctx, `[...document.querySelectorAll('#changes-turn option')].map(o => o.value + '=' + o.textContent + (o.disabled ? ' [disabled]' : ''))`)
	if strings.Join(opts, "|") != "=Whole chat|6=Turn 6: and a second turn (not recorded) [disabled]|1=Turn 1: fix the failing test" {
		t.Errorf("turn options = %q", opts)
	}
	// The checkboxes: one per file, all checked, labelled with the name
	// as an attribute value; unchecking one turns the build output toggle
	// off and makes Push send the checked file's literal path.
	if boxes := eval[[]string](t, ctx, `[...document.querySelectorAll('#changes-files input.file-pick')].map(b => b.checked + ' ' + b.getAttribute('aria-label'))`); strings.Join(boxes, "|") != "true Push "+hostileName+"|true Push logo.png" {
		t.Errorf("file checkboxes = %q", boxes)
	}
	steps(t, ctx, "check build output, then uncheck logo.png and push the hostile name",
		chromedp.Click(chromedp.CSS(`#push-all`)),
		waitJS(`document.querySelector('#push-all').checked`),
		chromedp.Click(chromedp.CSS(`#changes-files tr:nth-child(2) input.file-pick`)),
		waitJS(`!document.querySelector('#push-all').checked && document.querySelector('#push-all').disabled`),
		waitJS(`document.querySelector('#push-pick').innerText === 'pushes 1 of 2 files' && !document.querySelector('#pr-note').hidden`),
		chromedp.Click(chromedp.CSS(`#push`)),
		waitJS(`!!document.querySelector('#changes-msg .notice-error')`),
		chromedp.Sleep(300*time.Millisecond), // an <img onerror> would have fired
	)
	if msg := eval[string](t, ctx, `document.querySelector('#changes-msg').innerText`); msg != "push failed: "+refusedPath {
		t.Errorf("the daemon's 400 shown as %q", msg)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('.changes img, .changes script').length`); n != 0 {
		t.Errorf("the refused path made %d elements", n)
	}
	if xss := eval[string](t, ctx, `String(window.__xss)`); xss != "undefined" {
		t.Errorf("the agent's markup ran: window.__xss = %s", xss)
	}
	steps(t, ctx, "checking it again re-enables build output",
		chromedp.Click(chromedp.CSS(`#changes-files tr:nth-child(2) input.file-pick`)),
		waitJS(`!document.querySelector('#push-all').disabled && document.querySelector('#push-pick').innerText === '' && document.querySelector('#pr-note').hidden`),
	)

	steps(t, ctx, "pick turn 1",
		chromedp.SetValue(chromedp.CSS(`#changes-turn`), "1"),
		waitJS(`document.querySelector('#changes-turn').dispatchEvent(new Event('change'))`),
		waitJS(`(document.querySelector('#changes-files code.file-path')||{}).textContent === 'calc.py'`),
	)
	if n := eval[int](t, ctx, `document.querySelectorAll('#changes-truncated').length`); n != 0 {
		t.Error("turn 1's complete diff is marked truncated")
	}

	steps(t, ctx, "push with build output shows progress, then the daemon's error",
		waitJS(`!document.querySelector('#push-all').checked && !document.querySelector('#push-all').disabled`),
		chromedp.Click(chromedp.CSS(`#push-all`)),
		chromedp.Click(chromedp.CSS(`#push`)),
		waitJS(`document.querySelector('#changes-msg').innerText === 'Pushing…' && document.querySelector('#push').disabled && document.querySelector('#open-pr').disabled`),
		waitJS(`document.querySelector('#changes-msg').dataset.busy === 'false'`),
	)
	if msg := eval[string](t, ctx, `document.querySelector('#changes-msg').innerText`); msg != "push failed: git push: ! [rejected] remote/abcdef99 (non-fast-forward)" {
		t.Errorf("push failure shown as %q", msg)
	}
	if eval[bool](t, ctx, `document.querySelector('#push').disabled || document.querySelector('#open-pr').disabled`) {
		t.Error("the buttons stay disabled after the push failed")
	}
	steps(t, ctx, "a pull request whose answer carries a javascript: URL",
		chromedp.SendKeys(chromedp.CSS(`#pr-title`), "Fix add"),
		chromedp.SendKeys(chromedp.CSS(`#pr-body`), "test_add passes."),
		chromedp.Click(chromedp.CSS(`#open-pr`)),
		waitJS(`!!document.querySelector('#changes-result .pull-request')`),
	)
	if n := eval[int](t, ctx, `document.querySelectorAll('#changes-result a, a[href^="javascript"]').length`); n != 0 {
		t.Errorf("a javascript: URL became %d links", n)
	}
	if txt := eval[string](t, ctx, `document.querySelector('#changes-result .pull-request').innerText`); txt != "Pull request #9 javascript:window.__xss=5 (not a web address: no link)" {
		t.Errorf("pull request result = %q", txt)
	}
	d.mu.Lock()
	bodies := strings.Join(d.changes.bodies, "\n")
	d.mu.Unlock()
	if want := "/v1/chats/" + chatID + "/push " + pathsJSON(hostileName) + "\n/v1/chats/" + chatID + `/push {"all":true}` + "\n/v1/chats/" + chatID + `/pull-request {"title":"Fix add","body":"test_add passes."}`; bodies != want {
		t.Errorf("requests:\n%s\nwant\n%s", bodies, want)
	}
	if xss := eval[string](t, ctx, `String(window.__xss)`); xss != "undefined" {
		t.Errorf("window.__xss = %s", xss)
	}
}

// refusedPath is the daemon's 400 for a pushed path that matches nothing:
// it names the agent's file name.
const refusedPath = `paths[0] "` + hostileName + `": matches no file in the chat's working tree (/workspace)`

// pathsJSON is a push body of paths as the page's JSON.stringify writes it.
func pathsJSON(paths ...string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string][]string{"paths": paths})
	return strings.TrimSuffix(b.String(), "\n")
}

// TestPageChangesOnlyWithRepo: a project chat whose project has no
// repository, and a loose chat, offer no Changes link.
func TestPageChangesOnlyWithRepo(t *testing.T) {
	d, hs, ctx := pageServer(t)
	d.upsertChat(api.Chat{ID: "abcdef777777", Title: "no repo", Provider: "claude", Project: "plain", CreatedAt: time.Now()}, false)
	for _, id := range []string{"abcdef777777", scriptChatID} {
		steps(t, ctx, "open "+id,
			chromedp.Navigate(chatURL(hs.URL, id)),
			waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
			chromedp.Sleep(300*time.Millisecond),
		)
		if eval[bool](t, ctx, `!document.querySelector('#changes-link').hidden`) {
			t.Errorf("chat %s offers Changes", id)
		}
	}
	d.mu.Lock()
	seen := d.changes.projectsSeen
	d.mu.Unlock()
	if strings.Join(seen, ",") != "plain" {
		t.Errorf("projects asked: %q, want only plain", seen)
	}
}
