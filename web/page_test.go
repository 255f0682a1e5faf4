package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"remote/api"
)

// routes adds the scripted daemon's history, rename, usage and workspace
// socket (docs/api.md shapes) to mux.
func (d *scriptDaemon) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/chats/{id}/history", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.histories = append(d.histories, r.URL.RawQuery)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 {
			limit = 200
		}
		last := int64(len(d.events))
		before := last + 1
		if b, err := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64); err == nil && b > 0 && b <= last {
			before = b
		}
		end := int(before - 1) // events[0:end] have seq < before
		start := max(0, end-limit)
		page := api.HistoryPage{Events: []json.RawMessage{}, LastSeq: last, HasMore: start > 0}
		for _, ev := range d.events[start:end] {
			b, _ := json.Marshal(ev)
			page.Events = append(page.Events, b)
		}
		if page.HasMore {
			page.NextBefore = d.events[start].Seq
		}
		writeJSON(w, 200, page)
	})
	mux.HandleFunc("PATCH /v1/chats/{id}", func(w http.ResponseWriter, r *http.Request) {
		var req api.UpdateChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Title == nil {
			writeError(w, 400, api.CodeBadRequest, "title: want a string")
			return
		}
		c := d.updateChat(r.PathValue("id"), func(c *api.Chat) { c.Title = *req.Title })
		writeJSON(w, 200, c)
	})
	mux.HandleFunc("GET /v1/usage", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.usageBy = append(d.usageBy, r.URL.RawQuery)
		rows := d.usageRows
		if by := r.URL.Query().Get("by"); by != "chat" && len(rows) > 0 {
			rows = []api.UsageRow{{Key: by + "-total", Runs: 3, InputTokens: 1500, OutputTokens: 90, CacheReadTokens: 40, CacheCreationTokens: 8, CostUSD: 0.25}}
		}
		writeJSON(w, 200, api.UsageResponse{Rows: append([]api.UsageRow{}, rows...)})
	})
	up := websocket.Upgrader{}
	mux.HandleFunc("GET /ws/workspace", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		d.mu.Lock()
		_ = c.WriteJSON(map[string]any{"type": "workspace.snapshot", "chats": d.chats, "projects": []api.Project{}})
		d.wsConns[c] = true
		d.mu.Unlock()
		go func() {
			defer func() {
				d.mu.Lock()
				delete(d.wsConns, c)
				d.mu.Unlock()
				c.Close()
			}()
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
	})
}

func (d *scriptDaemon) chatList() []api.Chat {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]api.Chat(nil), d.chats...)
}

func (d *scriptDaemon) chat(id string) api.Chat {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.chats {
		if c.ID == id {
			return c
		}
	}
	return d.chats[0]
}

// upsertChat adds or replaces a chat and sends chat.upsert to every
// workspace socket.
func (d *scriptDaemon) upsertChat(c api.Chat, attention bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	found := false
	for i := range d.chats {
		if d.chats[i].ID == c.ID {
			d.chats[i] = c
			found = true
		}
	}
	if !found {
		d.chats = append(d.chats, c)
	}
	for ws := range d.wsConns {
		wc := c
		if attention {
			wc.Attention = "approval"
		}
		_ = ws.WriteJSON(map[string]any{"type": "chat.upsert", "chat": wc})
	}
}

func (d *scriptDaemon) updateChat(id string, fn func(*api.Chat)) api.Chat {
	c := d.chat(id)
	fn(&c)
	d.upsertChat(c, false)
	return c
}

// pageServer is remote-web in front of a scripted daemon, with a browser
// logged in.
func pageServer(t *testing.T) (*scriptDaemon, *httptest.Server, context.Context) {
	t.Helper()
	ctx := newBrowser(t)
	d := startScriptDaemon(t)
	s, err := New(Options{Socket: d.socket, Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	loginInBrowser(t, ctx, hs.URL, testUser, testPassword)
	return d, hs, ctx
}

func chatURL(base, id string) string { return base + "/#/chat/" + id }

// visibleText is the chat log's rendered text (closed <details> bodies
// and the hidden system notices are not in it).
const visibleText = `document.querySelector('#chat-log').innerText`

// codexApproval is the interaction_request remoted stores for Codex's
// item/commandExecution/requestApproval (its params as input).
func codexApproval(interactionID, command, cwd string, decisions string) api.Event {
	in := `{"threadId":"thr-1","turnId":"turn-1","itemId":"call-1","reason":"needs to write outside the sandbox","command":` +
		strconv.Quote(command) + `,"cwd":` + strconv.Quote(cwd) + `,"availableDecisions":` + decisions + `}`
	return api.Event{Type: api.EventInteractionRequest, ID: interactionID, InteractionID: interactionID,
		Name: "item/commandExecution/requestApproval", Input: json.RawMessage(in)}
}

// TestPageApprovalCardReadable: a Codex command approval in the recorded
// shape reads "Run `echo approved-e2e` in /tmp/work?" with the reason,
// offers Accept for this session because availableDecisions lists it,
// hides the method name and JSON, and answers acceptForSession.
func TestPageApprovalCardReadable(t *testing.T) {
	d, hs, ctx := pageServer(t)
	steps(t, ctx, "open the chat", chromedp.Navigate(chatURL(hs.URL, scriptChatID)),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`))
	d.appendEvents(
		api.Event{Type: api.EventUser, Text: "run it"},
		api.Event{Type: api.EventSystem, Subtype: "init", Data: json.RawMessage(`{"model":"gpt-test"}`)},
		api.Event{Type: api.EventTurnStatus, Status: "inProgress"},
		api.Event{Type: api.EventToolUseStart, ID: "call-1", Name: "Bash", Input: json.RawMessage(`{"command":"echo approved-e2e","cwd":"/tmp/work"}`)},
		codexApproval(`0`, "echo approved-e2e", "/tmp/work", `["accept","acceptForSession",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["echo"]}},"cancel"]`),
	)
	d.broadcast(api.Event{Type: api.EventSync, Running: true})
	steps(t, ctx, "approval card", chromedp.WaitVisible(chromedp.CSS(`.interaction.pending .approval-question`)),
		waitJS(`document.querySelector('#chat-status').textContent === 'waiting for you'`))
	screenshot(t, ctx, "page-approval")
	q := eval[string](t, ctx, `document.querySelector('.interaction .approval-question').innerText`)
	if q != "Run echo approved-e2e in /tmp/work?" {
		t.Errorf("approval question = %q, want %q", q, "Run echo approved-e2e in /tmp/work?")
	}
	if cmd := eval[string](t, ctx, `document.querySelector('.interaction code.approval-command').textContent`); cmd != "echo approved-e2e" {
		t.Errorf("command in code = %q", cmd)
	}
	if r := eval[string](t, ctx, `document.querySelector('.interaction .approval-reason').innerText`); r != "Reason: needs to write outside the sandbox" {
		t.Errorf("reason = %q", r)
	}
	buttons := eval[[]string](t, ctx, `[...document.querySelectorAll('.interaction .interaction-buttons button')].map(b => b.textContent)`)
	if strings.Join(buttons, "|") != "Accept|Accept for this session|Decline" {
		t.Errorf("buttons = %q", buttons)
	}
	text := eval[string](t, ctx, visibleText)
	for _, raw := range []string{"requestApproval", "availableDecisions", "{", "system: init", "inProgress"} {
		if strings.Contains(text, raw) {
			t.Errorf("the chat shows raw %q:\n%s", raw, text)
		}
	}
	if tool := eval[string](t, ctx, `document.querySelector('.tool summary').innerText`); tool != "Bash $ echo approved-e2e running" {
		t.Errorf("tool card summary = %q", tool)
	}
	if n := eval[string](t, ctx, `document.querySelector('#toggle-system').textContent`); n != "System events (2)" {
		t.Errorf("system toggle = %q, want 2 events behind it", n)
	}
	steps(t, ctx, "system events behind the toggle",
		chromedp.Click(chromedp.CSS(`#toggle-system`)),
		waitJS(`document.querySelector('#chat-log').innerText.includes('system: init')`),
		chromedp.Click(chromedp.CSS(`#toggle-system`)),
		chromedp.Click(chromedp.CSS(`.interaction.pending button.accept-session`)),
		waitJS(`!!document.querySelector('.interaction.resolved')`),
		chromedp.WaitVisible(chromedp.CSS(`.notice-complete`)),
	)
	d.mu.Lock()
	frames := append([]api.ClientMessage(nil), d.frames...)
	d.mu.Unlock()
	if len(frames) != 1 || frames[0].Type != "interaction_response" || frames[0].InteractionID != "0" ||
		string(frames[0].Result) != `{"decision":"acceptForSession"}` {
		t.Errorf("answer frames = %+v, want one acceptForSession for interaction 0", frames)
	}
	if st := eval[string](t, ctx, `document.querySelector('.interaction .interaction-state').textContent`); st != "accepted" {
		t.Errorf("card state after the answer = %q", st)
	}

	// A request that offers no session answer gets no such button.
	d.appendEvents(codexApproval(`1`, "rm -rf build", "/tmp/work", `["accept","cancel"]`))
	steps(t, ctx, "second card", chromedp.WaitVisible(chromedp.CSS(`.interaction.pending`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('.interaction.pending button.accept-session').length`); n != 0 {
		t.Errorf("Accept for this session offered where availableDecisions lacks it")
	}
}

// TestPageDiffCards: a Codex file change (Patch with a unified diff) and
// its fileChange approval, and a Claude Edit, are shown as diffs with
// added and removed lines marked; thinking pieces of one message are one
// block.
func TestPageDiffCards(t *testing.T) {
	d, hs, ctx := pageServer(t)
	steps(t, ctx, "open the chat", chromedp.Navigate(chatURL(hs.URL, scriptChatID)),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`))
	changes := `{"changes":[{"path":"/tmp/work/hello.txt","kind":{"type":"update","move_path":null},"diff":"@@ -1,2 +1,2 @@\n-hello world\n+hello diff\n unchanged"}]}`
	d.appendEvents(
		api.Event{Type: api.EventUser, Text: "edit the files"},
		api.Event{Type: api.EventThinking, MessageID: "r1", Text: "First I read "},
		api.Event{Type: api.EventThinking, MessageID: "r2", Text: "then I edit."},
		api.Event{Type: api.EventToolUseStart, ID: "fc-1", Name: "Patch", Input: json.RawMessage(changes)},
		api.Event{Type: api.EventInteractionRequest, ID: "5", InteractionID: "5", Name: "item/fileChange/requestApproval",
			Input: json.RawMessage(`{"threadId":"thr-1","turnId":"turn-1","itemId":"fc-1","reason":"apply the greeting"}`)},
		api.Event{Type: api.EventToolUseStart, ID: "toolu_1", Name: "Edit",
			Input: json.RawMessage(`{"file_path":"/w/main.go","old_string":"fmt.Println(1)","new_string":"fmt.Println(2)"}`)},
		api.Event{Type: api.EventToolUseEnd, ID: "toolu_1", Output: "The file /w/main.go has been updated."},
	)
	steps(t, ctx, "diffs", chromedp.WaitVisible(chromedp.CSS(`.interaction.pending .diff .dl.add`)),
		chromedp.WaitVisible(chromedp.CSS(`.tool[data-tool-id="toolu_1"].done .diff .dl.del`)))
	screenshot(t, ctx, "page-diff")
	if q := eval[string](t, ctx, `document.querySelector('.interaction .approval-question').innerText`); q != "Apply file changes?" {
		t.Errorf("file-change question = %q", q)
	}
	card := eval[[]string](t, ctx, `[...document.querySelectorAll('.interaction .diff .dl')].map(l => l.className + ':' + l.textContent.trim())`)
	want := []string{"dl hunk:@@ -1,2 +1,2 @@", "dl del:-hello world", "dl add:+hello diff", "dl ctx:unchanged"}
	if strings.Join(card, "|") != strings.Join(want, "|") {
		t.Errorf("approval diff lines = %q, want %q", card, want)
	}
	edit := eval[[]string](t, ctx, `[...document.querySelectorAll('.tool[data-tool-id="toolu_1"] .diff .dl')].map(l => l.className + ':' + l.textContent.trim())`)
	if strings.Join(edit, "|") != "dl hunk:@@|dl del:-fmt.Println(1)|dl add:+fmt.Println(2)" {
		t.Errorf("Edit diff lines = %q", edit)
	}
	if s := eval[string](t, ctx, `document.querySelector('.tool[data-tool-id="toolu_1"] summary').innerText`); s != "Edit /w/main.go done" {
		t.Errorf("Edit summary = %q", s)
	}
	if s := eval[string](t, ctx, `document.querySelector('.tool[data-tool-id="fc-1"] summary .tool-summary').innerText`); s != "/tmp/work/hello.txt" {
		t.Errorf("Patch summary = %q", s)
	}
	thinking := eval[[]string](t, ctx, `[...document.querySelectorAll('.thinking .thinking-body')].map(b => b.textContent)`)
	if len(thinking) != 1 || thinking[0] != "First I read then I edit." {
		t.Errorf("thinking blocks = %q, want one", thinking)
	}
}

// TestPageSidebarLiveAcrossTabs: two tabs of one user follow the
// workspace socket: a rename in one shows in the other, a new chat
// appears, running and "waiting for you" badges come and go, and a chat
// with news is marked unread in the tab that does not have it open.
func TestPageSidebarLiveAcrossTabs(t *testing.T) {
	d, hs, ctxA := pageServer(t)
	ctxB, cancelB := chromedp.NewContext(ctxA)
	defer cancelB()
	// The first action on a context opens its tab, which lives as long as
	// the context it ran under: run it on ctxB itself.
	if err := chromedp.Do(ctxB); err != nil {
		t.Fatalf("open a second tab: %v", err)
	}
	other := api.Chat{ID: "0123456789ab", Title: "second chat", Provider: "codex", CreatedAt: time.Now().Add(-time.Hour)}
	d.upsertChat(other, false)
	steps(t, ctxA, "tab A on the chat list", chromedp.Navigate(hs.URL+"/#/chats"),
		waitJS(`document.querySelectorAll('#side-chats li[data-chat-id]').length === 2`))
	steps(t, ctxB, "tab B in the chat", chromedp.Navigate(chatURL(hs.URL, scriptChatID)),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
		waitJS(`document.querySelectorAll('#side-chats li[data-chat-id]').length === 2`))

	steps(t, ctxB, "rename in tab B",
		waitJS(`(document.querySelector('#rename').click(), true)`),
		waitJS(`!!document.querySelector('#rename-input')`),
		waitJS(`(document.querySelector('#rename-input').value = 'renamed live', true)`),
		waitJS(`(document.querySelector('#rename-save').click(), true)`),
		waitJS(`(document.querySelector('.chat-name') || {}).textContent === 'renamed live'`))
	side := `document.querySelector('#side-chats li[data-chat-id="` + scriptChatID + `"]')`
	steps(t, ctxA, "tab A sees the rename", waitJS(side+`.innerText.includes('renamed live')`))

	steps(t, ctxB, "create a chat elsewhere", chromedp.Func(func(context.Context, *chromedp.Target) error {
		d.upsertChat(api.Chat{ID: "fedcba987654", Title: "made in another tab", Provider: "claude", CreatedAt: time.Now()}, false)
		return nil
	}))
	for _, ctx := range []context.Context{ctxA, ctxB} {
		steps(t, ctx, "new chat listed", waitJS(`document.querySelector('#side-chats').innerText.includes('made in another tab')`))
	}

	running := other
	running.Running = true
	running.LastMessageAt = time.Now()
	d.upsertChat(running, true)
	otherSide := `document.querySelector('#side-chats li[data-chat-id="0123456789ab"]')`
	steps(t, ctxA, "badges in tab A",
		waitJS(`!!(`+otherSide+`.querySelector('.badge.running') && `+otherSide+`.querySelector('.badge.waiting'))`),
		waitJS(`!!`+otherSide+`.querySelector('.unread')`))
	screenshot(t, ctxA, "page-sidebar-live")
	steps(t, ctxB, "badges in tab B", waitJS(`!!`+otherSide+`.querySelector('.badge.waiting') && `+otherSide+`.querySelector('.badge.waiting').textContent === 'waiting for you'`))
	if eval[bool](t, ctxB, `!!`+side+`.querySelector('.unread')`) {
		t.Error("the chat open in tab B is marked unread there")
	}
	running.Running = false
	d.upsertChat(running, false)
	steps(t, ctxA, "badges gone", waitJS(`!`+otherSide+`.querySelector('.badge')`))
	steps(t, ctxA, "opening clears unread",
		chromedp.Click(chromedp.CSS(`#side-chats li[data-chat-id="0123456789ab"] a`)),
		waitJS(`!`+otherSide+`.querySelector('.unread')`))
}

// hookNotifications replaces window.Notification with a recorder that
// keeps the real permission, and makes the tab report itself hidden.
const hookNotifications = `(() => {
  const Real = window.Notification;
  window.__notes = [];
  const Hook = function (title, opts) { window.__notes.push({ title, body: (opts || {}).body || '', tag: (opts || {}).tag || '' }); return {}; };
  Object.defineProperty(Hook, 'permission', { get: () => Real.permission });
  Hook.requestPermission = (...a) => Real.requestPermission(...a);
  window.Notification = Hook;
  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => window.__visibility || 'visible' });
  Object.defineProperty(document, 'hidden', { configurable: true, get: () => (window.__visibility || 'visible') === 'hidden' });
  return true;
})()`

// TestPageNotificationsWhenHidden: permission is asked on the button's
// click (granted through CDP), nothing is shown while the tab is visible,
// and a hidden tab gets "Approval waiting" with the command, "Run
// finished" and "Run failed", each once.
func TestPageNotificationsWhenHidden(t *testing.T) {
	d, hs, ctx := pageServer(t)
	grant := chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		b := chromedp.FromContext(ctx).Browser
		return b.Call(ctx, "Browser.grantPermissions", map[string]any{"permissions": []string{"notifications"}, "origin": hs.URL}, nil)
	})
	steps(t, ctx, "grant and enable",
		grant,
		chromedp.Navigate(chatURL(hs.URL, scriptChatID)),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
		waitJS(hookNotifications),
		chromedp.Click(chromedp.CSS(`#notify-toggle`)),
		waitJS(`document.querySelector('#notify-toggle').dataset.state === 'granted'`))
	if txt := eval[string](t, ctx, `document.querySelector('#notify-toggle').textContent`); txt != "Notifications on" {
		t.Errorf("toggle reads %q", txt)
	}
	// Visible: no notification.
	d.appendEvents(api.Event{Type: api.EventUser, Text: "first"}, api.Event{Type: api.EventComplete})
	steps(t, ctx, "visible run", waitJS(`document.querySelectorAll('.notice-complete').length === 1`))
	steps(t, ctx, "hide", waitJS(`(window.__visibility = 'hidden', document.hidden)`))
	d.appendEvents(api.Event{Type: api.EventUser, Text: "second"},
		codexApproval(`7`, "make deploy", "/srv/app", `["accept","decline"]`))
	steps(t, ctx, "approval notification", waitJS(`window.__notes.length === 1`))
	d.appendEvents(api.Event{Type: api.EventInteractionResolved, InteractionID: "7", Status: "accepted"},
		api.Event{Type: api.EventComplete, Usage: json.RawMessage(`{"input_tokens":10,"output_tokens":2}`)})
	steps(t, ctx, "finished notification", waitJS(`window.__notes.length === 2`))
	d.appendEvents(api.Event{Type: api.EventUser, Text: "third"}, api.Event{Type: api.EventError, Message: "codex exit: status 1"})
	steps(t, ctx, "failed notification", waitJS(`window.__notes.length === 3`))
	notes := eval[[]map[string]string](t, ctx, `window.__notes`)
	want := []map[string]string{
		{"title": "Approval waiting", "body": "script: Run make deploy in /srv/app?"},
		{"title": "Run finished", "body": "script"},
		{"title": "Run failed", "body": "script: codex exit: status 1"},
	}
	for i, w := range want {
		if notes[i]["title"] != w["title"] || notes[i]["body"] != w["body"] {
			t.Errorf("notification %d = %v, want %v", i, notes[i], w)
		}
	}
	// Another chat waiting, seen through the workspace socket.
	other := api.Chat{ID: "0123456789ab", Title: "background job", Provider: "codex", CreatedAt: time.Now()}
	d.upsertChat(other, false)
	d.upsertChat(other, true)
	steps(t, ctx, "workspace notification", waitJS(`window.__notes.length === 4`))
	if n := eval[map[string]string](t, ctx, `window.__notes[3]`); n["title"] != "Approval waiting" || n["body"] != "background job" {
		t.Errorf("workspace notification = %v", n)
	}
	// A reload replays history: nothing is notified again.
	steps(t, ctx, "reload", chromedp.Reload(),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`), waitJS(hookNotifications),
		waitJS(`(window.__visibility = 'hidden', true)`))
	time.Sleep(300 * time.Millisecond) //nolint:forbidigo // an absence that must last: no notification after a reload
	if n := eval[int](t, ctx, `window.__notes.length`); n != 0 {
		t.Errorf("%d notifications after a reload, want none", n)
	}
}

// TestPageUsage: the usage view shows GET /v1/usage rows and their total,
// regrouped on a change of "Group by"; a chat shows its own total and
// each turn's tokens from complete.usage.
func TestPageUsage(t *testing.T) {
	d, hs, ctx := pageServer(t)
	d.mu.Lock()
	d.usageRows = []api.UsageRow{
		{Key: scriptChatID, Runs: 2, InputTokens: 1234, OutputTokens: 56, CacheReadTokens: 7000, CacheCreationTokens: 800, CostUSD: 0.0123},
		{Key: "0123456789ab", Runs: 1, InputTokens: 10, OutputTokens: 5},
	}
	d.mu.Unlock()
	d.appendEvents(api.Event{Type: api.EventUser, Text: "count tokens"},
		api.Event{Type: api.EventComplete, Provider: "claude", Usage: json.RawMessage(`{"input_tokens":1234,"output_tokens":56,"cache_read_input_tokens":7000,"cache_creation_input_tokens":800,"total_cost_usd":0.0123}`)})
	steps(t, ctx, "chat usage", chromedp.Navigate(chatURL(hs.URL, scriptChatID)),
		waitJS(`document.querySelector('#chat-usage').textContent !== ''`),
		chromedp.WaitVisible(chromedp.CSS(`.turn-usage`)))
	if u := eval[string](t, ctx, `document.querySelector('#chat-usage').textContent`); u != "2 runs · 1,234 in · 56 out · 7,000 cache read · 800 cache write · $0.0123" {
		t.Errorf("chat usage = %q", u)
	}
	if u := eval[string](t, ctx, `document.querySelector('.turn-usage').textContent`); u != " · 1,234 in · 56 out · 7,000 cache read · 800 cache write · $0.0123" {
		t.Errorf("turn usage = %q", u)
	}
	steps(t, ctx, "usage view", chromedp.Click(chromedp.CSS(`#nav-usage`)),
		chromedp.WaitVisible(chromedp.CSS(`#usage-table tbody tr`)))
	screenshot(t, ctx, "page-usage")
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#usage-table tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim())`)
	want := []string{
		"Chat Runs Input Output Cache read Cache write Cost",
		"script 2 1,234 56 7,000 800 $0.0123",
		"0123456789ab 1 10 5 0 0 —",
		"Total 3 1,244 61 7,000 800 $0.0123",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("usage table:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	steps(t, ctx, "by provider",
		chromedp.SetValue(chromedp.CSS(`#usage-by`), "provider"),
		waitJS(`document.querySelector('#usage-by').dispatchEvent(new Event('change'))`),
		waitJS(`(document.querySelector('#usage-table tbody') || {innerText: ''}).innerText.includes('provider-total')`))
	d.mu.Lock()
	queries := append([]string(nil), d.usageBy...)
	d.mu.Unlock()
	if queries[len(queries)-1] != "by=provider" {
		t.Errorf("usage queries %q, want the last by=provider", queries)
	}
}

// TestPagePhone375: at 375 px wide every page fits without sideways
// scrolling, the sidebar is a drawer (☰ opens it, Esc closes it and gives
// focus back), the approval buttons are reachable, Esc in the chat
// cancels a run; a screenshot of each page lands in build/screenshots/.
func TestPagePhone375(t *testing.T) {
	d, hs, ctx := pageServer(t)
	d.upsertChat(api.Chat{ID: "0123456789ab", Title: "a chat with a rather long title to wrap", Provider: "codex", Running: true, CreatedAt: time.Now()}, true)
	steps(t, ctx, "phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	fits := func(name string) {
		t.Helper()
		unlabeled := eval[[]string](t, ctx, `[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
			.filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
			.map(e => e.outerHTML.slice(0, 80))`)
		if len(unlabeled) > 0 {
			t.Errorf("%s has controls without a label: %q", name, unlabeled)
		}
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
			t.Errorf("%s is %d px wide at 375", name, w)
		}
		screenshot(t, ctx, "phone-"+name)
	}
	steps(t, ctx, "chats", chromedp.Navigate(hs.URL+"/#/chats"), chromedp.WaitVisible(chromedp.CSS(`#new-chat`)),
		waitJS(`document.querySelectorAll('#chat-list li[data-chat-id]').length === 2`))
	if eval[bool](t, ctx, `getComputedStyle(document.querySelector('#sidebar')).visibility === 'visible'`) {
		t.Error("the sidebar is shown on a phone without opening the drawer")
	}
	fits("chats")
	steps(t, ctx, "drawer", chromedp.Click(chromedp.CSS(`#menu`)),
		waitJS(`getComputedStyle(document.querySelector('#sidebar')).visibility === 'visible'`),
		waitJS(`document.activeElement.closest('#sidebar') !== null`))
	time.Sleep(250 * time.Millisecond) //nolint:forbidigo // the slide-in
	fits("drawer")
	steps(t, ctx, "Esc closes the drawer", chromedp.KeyEvent("\x1b"),
		waitJS(`document.querySelector('#menu').getAttribute('aria-expanded') === 'false' && document.activeElement.id === 'menu'`))
	d.appendEvents(api.Event{Type: api.EventUser, Text: "deploy the site"},
		api.Event{Type: api.EventAssistantText, MessageID: "m1", Text: "I will run the deploy script; it needs your approval."},
		codexApproval(`3`, "./scripts/deploy --prod --really-long-flag-name=value", "/srv/app/with/a/long/path", `["accept","acceptForSession","decline"]`))
	d.broadcast(api.Event{Type: api.EventSync, Running: true})
	steps(t, ctx, "chat with an approval", chromedp.Navigate(chatURL(hs.URL, scriptChatID)),
		chromedp.WaitVisible(chromedp.CSS(`.interaction.pending button.decline`)),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'true'`))
	if eval[bool](t, ctx, `(() => { const r = document.querySelector('.interaction.pending button.decline').getBoundingClientRect(); return r.right > 375 || r.width === 0; })()`) {
		t.Error("the Decline button is off screen at 375 px")
	}
	fits("approval")
	steps(t, ctx, "Esc cancels", chromedp.Focus(chromedp.CSS(`#prompt`)), chromedp.KeyEvent("\x1b"),
		waitJS(`(() => true)()`))
	time.Sleep(300 * time.Millisecond) //nolint:forbidigo // an absence that must last: Esc sends one cancel and nothing more
	d.mu.Lock()
	frames := append([]api.ClientMessage(nil), d.frames...)
	d.mu.Unlock()
	if len(frames) != 1 || frames[0].Type != "cancel" {
		t.Errorf("frames after Esc = %+v, want one cancel", frames)
	}
	steps(t, ctx, "projects", chromedp.Navigate(hs.URL+"/#/projects"), chromedp.WaitVisible(chromedp.CSS(`#new-project-form`)))
	fits("projects")
	steps(t, ctx, "usage", chromedp.Navigate(hs.URL+"/#/usage"), chromedp.WaitVisible(chromedp.CSS(`#usage-out p`)))
	fits("usage")
	steps(t, ctx, "login", chromedp.Navigate(hs.URL+"/login"), chromedp.WaitVisible(chromedp.CSS(`#username`)))
	fits("login")
}

// heapBytes is the page's JS heap in use after a garbage collection.
func heapBytes(ctx context.Context, tg *chromedp.Target) (float64, error) {
	var res runtime.GetHeapUsageResult
	if err := tg.Call(ctx, "HeapProfiler.collectGarbage", nil, nil); err != nil {
		return 0, err
	}
	if err := tg.Call(ctx, "Runtime.getHeapUsage", nil, &res); err != nil {
		return 0, err
	}
	return res.UsedSize, nil
}
