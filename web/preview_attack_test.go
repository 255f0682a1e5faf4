package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"remote/api"
	"remote/internal/testkit/fakeanthropic"
)

// swApp is a hostile preview app: its page registers a service worker
// that would answer every later request to its origin (preview entries
// included) and report what it saw.
const swApp = `<!doctype html><title>app</title><h1 id="app">bob's app</h1>
<script>
navigator.serviceWorker.register('/sw.js').then(
	() => navigator.serviceWorker.ready.then(() => { window.__sw = 'registered'; }),
	(e) => { window.__sw = 'refused: ' + e.message; });
</script>`

const swScript = `self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (e) => e.respondWith(new Response('captured ' + e.request.url)));`

// webLogin logs a Go client in as user on the stack's page.
func webLogin(t *testing.T, s *stack, user, pw string) *http.Client {
	t.Helper()
	c := noRedirectClient()
	resp, err := c.PostForm(s.base+"/login", url.Values{"username": {user}, "password": {pw}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login as %s: %d", user, resp.StatusCode)
	}
	return c
}

// TestAttackPreviewTheft performs the first attack of docs/threat-model.md's
// preview origin section in real Chromium against real remoted, remote-web and
// LXD: bob's app tries to register a service worker on its preview origin
// (refused: the script request is 403); bob's entry link, followed by alice's
// logged-in browser, does not log her into bob's preview (the page sees another
// session); alice's token, redeemed in bob's browser before or after alice's
// page confirmed it, opens nothing; and alice's own preview lives on an origin
// that is not bob's.
func TestAttackPreviewTheft(t *testing.T) {
	s := startStack(t, fakeanthropic.New(t), false)
	bobP := previewProjectWith(t, s, "bob", "pvbob", swApp, map[string]string{"sw.js": swScript})
	aliceP := previewProject(t, s, testUser, "pvali")
	bobOrigin, aliceOrigin := s.previewOrigin(bobP, 8080), s.previewOrigin(aliceP, 8080)
	if bobOrigin == aliceOrigin {
		t.Fatalf("bob's and alice's previews share the origin %s", bobOrigin)
	}

	// 1. Bob's app registers a service worker on its origin.
	bctx := newBrowser(t)
	loginInBrowser(t, bctx, s.base, "bob", bobPassword)
	steps(t, bctx, "bob opens his preview; his app registers a service worker",
		chromedp.Navigate(s.base+"/preview/"+bobP.Name+"/8080"),
		waitJS(`location.origin === '`+bobOrigin+`' && (document.querySelector('#app')||{}).textContent === "bob's app"`),
		waitJS(`!!window.__sw`),
	)
	if got := eval[string](t, bctx, `window.__sw`); !strings.HasPrefix(got, "refused: ") {
		t.Fatalf("bob's app registered a service worker on its preview origin: %q", got)
	}
	steps(t, bctx, "no worker answers bob's origin",
		chromedp.Navigate(bobOrigin+"/"),
		waitJS(`(document.querySelector('#app')||{}).textContent === "bob's app"`),
	)

	// 2. Bob's entry link in alice's browser.
	bob := webLogin(t, s, "bob", bobPassword)
	bobEnter := mint(t, s, bob, bobP, "8080")
	actx := newBrowser(t)
	loginInBrowser(t, actx, s.base, testUser, testPassword)
	steps(t, actx, "alice follows bob's preview link",
		chromedp.Navigate(bobEnter),
		waitJS(`document.body && document.body.innerText.includes('not opened by this browser')`),
		chromedp.Navigate(bobOrigin+"/"),
		waitJS(`document.body && document.body.innerText.includes('no preview session')`),
	)
	if body := eval[string](t, actx, `document.body.innerText`); strings.Contains(body, "bob's app") {
		t.Fatalf("alice's browser entered bob's preview: %s", body)
	}

	// 3. Alice's token in bob's browser: unused, and after alice's page
	// confirmed it (stolen at the entry's last step).
	alice := webLogin(t, s, testUser, testPassword)
	aliceEnter := mint(t, s, alice, aliceP, "8080")
	steps(t, bctx, "bob redeems alice's fresh token",
		chromedp.Navigate(aliceEnter),
		waitJS(`document.body && document.body.innerText.includes('not opened by this browser')`),
	)
	aliceEnter = mint(t, s, alice, aliceP, "8080")
	status, h, body := pget(t, alice, aliceEnter, nil)
	if status != http.StatusSeeOther {
		t.Fatalf("alice's enter: %d %s", status, body)
	}
	status, h, body = pget(t, alice, h.Get("Location"), nil)
	if status != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "/.remote-preview/session?token=") {
		t.Fatalf("alice's confirm: %d %s", status, body)
	}
	steps(t, bctx, "bob redeems alice's confirmed token",
		chromedp.Navigate(h.Get("Location")),
		waitJS(`document.body && document.body.innerText.includes('started in another browser')`),
		chromedp.Navigate(aliceOrigin+"/"),
		waitJS(`document.body && document.body.innerText.includes('no preview session')`),
	)

	// 4. Alice's own preview, on its own origin.
	steps(t, actx, "alice opens her preview",
		chromedp.Navigate(s.base+"/preview/"+aliceP.Name+"/8080"),
		waitJS(`location.origin === '`+aliceOrigin+`' && (document.querySelector('#app')||{}).textContent === 'hello from `+aliceP.Name+`'`),
	)
}

// tossApp is a hostile preview app (alice's own project, say, whose
// agent read bob's prompt injection): it sets bob's session cookie on the
// API's chat path for the page's registrable domain and for its own
// parent domain.
func tossApp(bobSession string) string {
	return `<!doctype html><title>app</title><h1 id="app">tossing</h1><script>
for (const d of ['example.com', 'preview.example.net', 'example.net'])
	document.cookie = 'remote_session=` + bobSession + `; domain=' + d + '; path=/v1/chats';
window.__tossed = document.cookie === '' ? 'set' : 'visible';
</script>`
}

// TestAttackCookieTossing performs the second attack of docs/threat-model.md's
// preview origin section in real Chromium: alice's preview app sets
// remote_session=<bob's>; domain=example.com; path=/v1/chats, the page being at
// http://remote.example.com. Previews under the page's registrable domain over
// plain http (*.preview.example.com, the finding's setup) are refused at start
// since the jar-overflow variant (TestAttackCookieJarOverflow), so the previews
// are under preview.example.net, and the browser sets the cookie for no host of
// the page's: alice's page lists her chats, not bob's, the chat she creates is
// hers, and bob's session is untouched.
func TestAttackCookieTossing(t *testing.T) {
	s := startStackWith(t, fakeanthropic.New(t), stackOpts{pageHost: "remote.example.com", previewDomain: "preview.example.net"})
	bob := webLogin(t, s, "bob", bobPassword)
	var bobSession string
	for _, ck := range bob.Jar.Cookies(mustURL(t, s.base)) {
		if ck.Name == SessionCookie {
			bobSession = ck.Value
		}
	}
	if status, body := daemonDo(t, s, "POST", "/v1/chats", "bob", api.CreateChatRequest{Provider: "claude", Cwd: s.work, Title: "bob-secret"}); status != http.StatusCreated {
		t.Fatalf("bob's chat: %d %s", status, body)
	}
	p := previewProjectWith(t, s, testUser, "pvtoss", tossApp(bobSession), nil)
	ctx := newBrowser(t)
	loginInBrowser(t, ctx, s.base, testUser, testPassword)
	steps(t, ctx, "alice opens her preview; its app tosses bob's cookie",
		chromedp.Navigate(s.base+"/preview/"+p.Name+"/8080"),
		waitJS(`location.origin === '`+s.previewOrigin(p, 8080)+`' && !!window.__tossed`),
	)
	// From the page's origin (its login page, whose script calls no API).
	steps(t, ctx, "alice's page lists chats and creates one",
		chromedp.Navigate(s.base+"/login"),
		waitJS(`(() => { if (!window.__res) { window.__res = 'pending';
			fetch('/v1/chats').then(async (r) => { window.__list = r.status + ' ' + await r.text();
				const c = await fetch('/v1/chats', {method: 'POST', headers: {'Content-Type': 'application/json'},
					body: JSON.stringify({provider: 'claude', cwd: '`+s.work+`', title: 'alice-new'})});
				window.__create = c.status + ' ' + await c.text(); }); } return true; })()`),
		waitJS(`!!window.__list && !!window.__create`),
	)
	list, create := eval[string](t, ctx, `window.__list`), eval[string](t, ctx, `window.__create`)
	if strings.Contains(list, "bob-secret") || !strings.HasPrefix(list, "200 ") {
		t.Errorf("alice's page listed chats as %q", list)
	}
	if !strings.HasPrefix(create, "201 ") {
		t.Errorf("alice's page could not create her chat: %q", create)
	}
	status, body := daemonDo(t, s, "GET", "/v1/chats", "bob", nil)
	var chats []api.Chat
	if status != http.StatusOK || json.Unmarshal(body, &chats) != nil {
		t.Fatalf("bob's chats: %d %s", status, body)
	}
	for _, c := range chats {
		if c.Title == "alice-new" {
			t.Errorf("alice's new chat was created as bob's: %+v", c)
		}
	}
	if status, _, _ := pget(t, bob, s.base+"/v1/chats", nil); status != http.StatusOK {
		t.Errorf("bob's own session stopped working: %d", status)
	}
}

// TestLoginPlainHTTPLANName: over plain http to a LAN host name (no fetch
// metadata: not https, not localhost) real Chromium logs in with the
// form, and a cross-site page's auto-submitted login form (login CSRF:
// logging the victim in as the attacker) is refused.
func TestLoginPlainHTTPLANName(t *testing.T) {
	d := startFakeDaemon(t)
	srv, err := New(Options{Socket: d.socket, AllowedHosts: []string{"remote.lan"},
		Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}, {Name: "bob", PasswordHash: testHash(t, "bobpw")}}})
	if err != nil {
		t.Fatal(err)
	}
	page := httpServe(t, srv)
	base := "http://remote.lan:" + page
	evil := httpServe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><form id="f" method="post" action="` + base + `/login">
<input name="username" value="bob"><input name="password" value="bobpw"></form><script>document.getElementById('f').submit();</script>`))
	}))
	ctx := newBrowser(t)
	steps(t, ctx, "log in over plain http on remote.lan",
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), testUser),
		chromedp.SendKeys(chromedp.CSS("#password"), testPassword),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#new-chat")),
		waitJS(`(() => { fetch('/v1/echo').then(async (r) => { window.__echo = r.status + ' ' + await r.text(); }); return true; })()`),
		waitJS(`!!window.__echo`),
	)
	if got := eval[string](t, ctx, `window.__echo`); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"user":"alice"`) {
		t.Fatalf("after the form login /v1/echo answered %q", got)
	}

	other := newBrowser(t)
	steps(t, other, "a cross-site page posts the login form",
		chromedp.Navigate("http://evil.lan:"+evil+"/"),
		chromedp.WaitReady(chromedp.CSS("body")),
		waitJS(`location.host === 'remote.lan:`+page+`' && document.body.innerText.includes('request')`),
	)
	if body := eval[string](t, other, `document.body.innerText`); !strings.Contains(body, "cross-origin request refused") {
		t.Fatalf("cross-site login post answered %q", body)
	}
	steps(t, other, "no session from the cross-site post",
		waitJS(`(() => { fetch('/v1/echo').then((r) => { window.__echo = r.status; }); return true; })()`),
		waitJS(`!!window.__echo`),
	)
	if got := eval[int](t, other, `window.__echo`); got != http.StatusUnauthorized {
		t.Fatalf("after the cross-site post /v1/echo answered %d, want 401", got)
	}
}

// httpServe serves h on 127.0.0.1 and returns the port.
func httpServe(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return mustURL(t, srv.URL).Port()
}
