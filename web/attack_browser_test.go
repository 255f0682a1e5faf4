package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"remote/api"
	"remote/internal/testkit/fakeanthropic"
)

// TestAttackMarkdownForm: hostile model output puts a form in the agent's
// Markdown that would post JSON (as text/plain) to the API with the
// user's session cookie. In real Chromium against a real remoted and
// remote-web, the page renders no form, input or button, no style or
// event attributes, and a real click where the button would be reaches
// nothing: the daemon's chat list is unchanged.
func TestAttackMarkdownForm(t *testing.T) {
	model := fakeanthropic.New(t)
	s := startStack(t, model, false)
	payload := fmt.Sprintf(`{"provider":"claude","cwd":%q,"title":"pwn`, s.work)
	reply := "Your prize is ready.\n\n" +
		`<form method="post" action="/v1/chats" enctype="text/plain"><input type="hidden" name='` + payload + `' value='ed-by-form"}'>` +
		`<button type="submit" class="claim" style="font-size:40px" onmouseover="this.click()">Claim prize</button></form>` + "\n\n" +
		`<p><input type="submit" formaction="/v1/chats" formmethod="post" value="Also claim"></p>` + "\n\n" +
		`<style>#chat-log{outline:3px solid red}</style><iframe src="/v1/chats"></iframe><object data="/v1/chats"></object><embed src="/v1/chats">` + "\n\n" +
		`<textarea>t</textarea><select><option>o</option></select>` + "\n\n" +
		`<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" width="400" height="100" usemap="#prize"><map name="prize">` +
		`<area shape="rect" coords="0,0,400,100" href="/v1/chats" target="_self" alt="Claim"></map>` + "\n\n" +
		`See <a href="https://example.com/" target="_self" onclick="alert(1)">the docs</a> and [more](https://example.org/).` + "\n"
	model.Push(fakeanthropic.Reply{
		Blocks: []fakeanthropic.Block{fakeanthropic.TextBlock(reply)},
		When:   func(r *fakeanthropic.Request) bool { return strings.Contains(r.UserText(), "attack-form") },
	})
	ctx := loginStack(t, s)
	createChat(t, ctx, s.base, "claude", s.work)
	chatsBefore := chatTitles(t, s)
	steps(t, ctx, "prompt and render the hostile reply",
		chromedp.SendKeys(chromedp.CSS("#prompt"), "attack-form: show me\n"),
		waitJS(`document.querySelector('#chat-log').innerText.includes('more')`),
		waitJS(`document.querySelector('#chat-status').dataset.running === 'false'`),
	)
	screenshot(t, ctx, "attack-markdown-form")
	const msg = `#chat-log .msg-assistant`
	if html := eval[string](t, ctx, `[...document.querySelectorAll('`+msg+`')].map(e => e.innerHTML).join('\n')`); !strings.Contains(html, "Claim prize") {
		t.Fatalf("the reply is not shown:\n%s", html)
	}
	for _, sel := range []string{"form", "input", "button", "select", "textarea", "style", "iframe", "object", "embed", "map", "area",
		"[style]", "[onclick]", "[onmouseover]", "[action]", "[formaction]", "[formmethod]", "[enctype]"} {
		if n := eval[int](t, ctx, `document.querySelectorAll('`+msg+` `+sel+`').length`); n != 0 {
			t.Errorf("agent Markdown rendered %d %s", n, sel)
		}
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('`+msg+` a[href]').length`); n != 2 {
		t.Errorf("%d links rendered, want 2", n)
	}
	if bad := eval[int](t, ctx, `[...document.querySelectorAll('`+msg+` a[href]')].filter(a => a.getAttribute('rel') !== 'noopener noreferrer' || a.getAttribute('target') !== '_blank').length`); bad != 0 {
		t.Errorf("%d links without rel=\"noopener noreferrer\" target=_blank", bad)
	}
	// No other element keeps a link that could navigate this tab (an image
	// map's <area> is a link too, which the rule above does not touch).
	if bad := eval[string](t, ctx, `[...document.querySelectorAll('`+msg+` [href]')].filter(e => e.tagName !== 'A' || e.getAttribute('target') !== '_blank').map(e => e.outerHTML).join(' ')`); bad != "" {
		t.Errorf("agent Markdown kept a link that navigates the Remote tab: %s", bad)
	}
	if eval[bool](t, ctx, `getComputedStyle(document.querySelector('#chat-log')).outlineStyle === 'solid'`) {
		t.Error("the agent's <style> restyled the page")
	}

	// Click where the user would: the button, or whatever now holds its text.
	steps(t, ctx, "click the claim button",
		waitJS(`(() => {
			const hits = [...document.querySelectorAll('`+msg+` *')].filter(e => e.textContent.includes('Claim prize'));
			const target = hits.find(e => e.tagName === 'BUTTON') || hits[hits.length - 1];
			target.setAttribute('data-attack-target', '');
			return true;
		})()`),
		chromedp.Click(chromedp.CSS(`[data-attack-target]`)),
	)
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		if after := chatTitles(t, s); len(after) != len(chatsBefore) || strings.Contains(strings.Join(after, "\n"), "pwn") {
			t.Fatalf("clicking the agent's button reached the daemon: chats before %q, after %q", chatsBefore, after)
		}
		time.Sleep(200 * time.Millisecond) //nolint:forbidigo // an absence that must last: the click never reaches the daemon
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	if !strings.HasPrefix(loc, s.base+"/#/chat/") {
		t.Errorf("the click navigated the page to %s", loc)
	}
}

// chatTitles lists the titles of testUser's chats through remote-web.
func chatTitles(t *testing.T, s *stack) []string {
	t.Helper()
	var chats []api.Chat
	if err := json.Unmarshal([]byte(getJSON(t, s, "/v1/chats")), &chats); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(chats))
	for i, c := range chats {
		out[i] = c.Title
	}
	return out
}
