package web

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"
)

// jarOverflowApp is the hostile app of a preview: its script fills the
// browser's cookie jar for every parent domain it may set cookies for
// (200 fillers, over Chromium's 180 per registrable domain, so the
// least recently used, the page's own host-only session cookie, is
// evicted), then sets bob's session cookie for each of them.
func jarOverflowApp(bobSession string, domains []string) string {
	return `<!doctype html><title>app</title><h1 id="app">overflowing</h1><script>
for (const d of ` + jsStrings(domains) + `) {
	for (let i = 0; i < 200; i++) document.cookie = 'filler' + i + '=x; domain=' + d + '; path=/';
	document.cookie = '` + SessionCookie + `=` + bobSession + `; domain=' + d + '; path=/';
}
window.__overflowed = true;
</script>`
}

func jsStrings(ss []string) string {
	return "['" + strings.Join(ss, "', '") + "']"
}

// parentDomains are name and each of its parents, as a cookie's Domain.
func parentDomains(name string) []string {
	var out []string
	for d := name; d != ""; {
		out = append(out, d)
		_, rest, ok := strings.Cut(d, ".")
		if !ok {
			break
		}
		d = rest
	}
	return out
}

// jarOverflow performs the jar-overflow variant of cookie tossing in real
// Chromium against srv (a page served at http://pageHost:<port>, plain
// http): bob logs in from a script; alice logs in in her browser, opens
// a preview at <port>-<id>.previewDomain whose app overflows the jar and
// tosses bob's session for every parent domain of the page and of the
// preview; then alice's page (its login page: no API calls of its own)
// asks /v1/echo who it is, with GET and with POST. It returns the two
// answers.
//
// The app is served by a plain server on the preview's host name: what
// it does needs only its origin, and an app behind remote-web's
// preview proxy serves any HTML and script it likes there.
func jarOverflow(t *testing.T, srv *Server, pageHost, previewDomain string) (get, post string) {
	t.Helper()
	page := httptest.NewServer(srv)
	t.Cleanup(page.Close)
	port := mustURL(t, page.URL).Port()
	base := "http://" + pageHost + ":" + port

	bob := noRedirectClient()
	resp, err := bob.PostForm(page.URL+"/login", map[string][]string{"username": {"bob"}, "password": {"bobpw"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var bobSession string
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			bobSession = c.Value
		}
	}
	if bobSession == "" {
		t.Fatalf("bob's login: %d, no session cookie", resp.StatusCode)
	}

	domains := append(parentDomains(pageHost), parentDomains(previewDomain)...)
	app := httpServe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(jarOverflowApp(bobSession, domains)))
	}))
	appOrigin := "http://8080-0123456789abcdef." + previewDomain + ":" + app

	ctx := newBrowser(t)
	loginInBrowser(t, ctx, base, testUser, testPassword)
	steps(t, ctx, "alice opens the preview; its app overflows the jar and tosses bob's session",
		chromedp.Navigate(appOrigin+"/"),
		waitJS(`location.origin === '`+appOrigin+`' && window.__overflowed === true`),
	)
	steps(t, ctx, "alice's page asks who it is",
		chromedp.Navigate(base+"/login"),
		waitJS(`(() => { if (!window.__asked) { window.__asked = true;
			fetch('/v1/echo').then(async (r) => { window.__get = r.status + ' ' + await r.text();
				const p = await fetch('/v1/echo', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'});
				window.__post = p.status + ' ' + await p.text(); }); } return true; })()`),
		waitJS(`!!window.__get && !!window.__post`),
	)
	return eval[string](t, ctx, `window.__get`), eval[string](t, ctx, `window.__post`)
}

// TestAttackCookieJarOverflow performs the jar-overflow variant of cookie
// tossing (security review, finding 3) in real Chromium. On plain http,
// with previews on the page's registrable domain, a preview's app can
// fill the jar for the shared parent domain (evicting the page's own
// session cookie) and set bob's session cookie for that parent: only
// bob's then reaches the page, which acts as bob. remote-web refuses that
// configuration at start, saying why; in the configurations it accepts
// (previews on a registrable domain of their own, or under localhost)
// the same app leaves alice's page alice's.
func TestAttackCookieJarOverflow(t *testing.T) {
	d := startFakeDaemon(t)
	users := []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}, {Name: "bob", PasswordHash: testHash(t, "bobpw")}}

	// The configuration of the finding: page remote.example.com, previews
	// under preview.example.com, plain http.
	srv, err := New(Options{Socket: d.socket, Users: users, AllowedHosts: []string{"remote.example.com"},
		PreviewURL: "http://*.preview.example.com:8081"})
	if err == nil {
		get, post := jarOverflow(t, srv, "remote.example.com", "preview.example.com")
		t.Errorf("previews on the page's registrable domain over plain http were accepted; after the jar overflow alice's page got GET %q, POST %q", get, post)
	} else if msg := err.Error(); !strings.Contains(msg, `parent domain "example.com"`) || !strings.Contains(msg, `"remote.example.com"`) ||
		!strings.Contains(msg, "cookie_secure") || !strings.Contains(msg, "registrable domain of their own") {
		t.Errorf("the refusal does not say why and what to do: %v", err)
	}
	// Over https (cookie_secure) the same domains are accepted: the
	// __Host- cookie cannot be set by another host (TestCookieFlags).
	if _, err := New(Options{Socket: d.socket, Users: users, AllowedHosts: []string{"remote.example.com"}, Secure: true,
		PreviewURL: "https://*.preview.example.com"}); err != nil {
		t.Errorf("https page with same-site previews refused: %v", err)
	}

	for _, tc := range []struct{ page, previews string }{
		{"remote.example.com", "preview.example.net"},
		{"localhost", "localhost"},
	} {
		t.Run(tc.page+"+"+tc.previews, func(t *testing.T) {
			srv, err := New(Options{Socket: d.socket, Users: users, AllowedHosts: []string{tc.page},
				PreviewURL: "http://*." + tc.previews + ":8081"})
			if err != nil {
				t.Fatal(err)
			}
			get, post := jarOverflow(t, srv, tc.page, tc.previews)
			for _, got := range []string{get, post} {
				if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"user":"alice"`) {
					t.Errorf("after the jar overflow alice's page got %q, want alice's answer", got)
				}
			}
		})
	}
}

// TestAttackTwoSessionCookiesLogged: a request carrying two session
// cookies (tossing that got past the configuration check) is refused,
// both sessions end, and the log names both users, never a session.
func TestAttackTwoSessionCookiesLogged(t *testing.T) {
	d := startFakeDaemon(t)
	var logs bytes.Buffer
	srv, err := New(Options{Socket: d.socket, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs}),
		Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}, {Name: "bob", PasswordHash: testHash(t, "bobpw")}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	session := func(user, pw string) string {
		resp, err := noRedirectClient().PostForm(hs.URL+"/login", map[string][]string{"username": {user}, "password": {pw}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == SessionCookie {
				return c.Value
			}
		}
		t.Fatalf("login as %s: %d, no cookie", user, resp.StatusCode)
		return ""
	}
	alice, bob := session(testUser, testPassword), session("bob", "bobpw")
	get := func(cookie string) int {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/echo", nil)
		req.Header.Set("Cookie", cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(SessionCookie + "=" + bob + "; " + SessionCookie + "=" + alice); got != http.StatusUnauthorized {
		t.Fatalf("two session cookies: %d, want 401", got)
	}
	for who, tok := range map[string]string{"alice": alice, "bob": bob} {
		if got := get(SessionCookie + "=" + tok); got != http.StatusUnauthorized {
			t.Errorf("%s's session still works after the refusal: %d", who, got)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "cookie tossing") || !strings.Contains(out, `users="bob,alice"`) {
		t.Errorf("the refusal is not logged with both users: %s", out)
	}
	if strings.Contains(out, alice) || strings.Contains(out, bob) {
		t.Errorf("a session token was logged: %s", out)
	}
}

// TestSameSitePreviewsRefused: the start check's edges. Refused over
// plain http: a page host and previews sharing their last two labels
// (the registrable domain's stand-in, the safe side for multi-label
// suffixes like co.uk). Accepted: https, IP addresses, one-label names,
// previews on another domain.
func TestSameSitePreviewsRefused(t *testing.T) {
	for _, tc := range []struct {
		hosts   []string
		preview string
		secure  bool
		refused bool
	}{
		{[]string{"remote.example.com"}, "http://*.preview.example.com", false, true},
		{[]string{"Remote.Example.COM."}, "http://*.preview.example.com", false, true},
		{[]string{"example.com"}, "http://*.example.com", false, true},
		{[]string{"other.net", "remote.lan"}, "http://*.preview.remote.lan:8081", false, true},
		{[]string{"remote.example.co.uk"}, "https://*.preview.other.co.uk", false, true},
		{[]string{"remote.example.com"}, "https://*.preview.example.com", true, false},
		{[]string{"remote.example.com"}, "http://*.preview.example.net", false, false},
		{[]string{"localhost", "remote.localhost"}, "http://*.localhost:8081", false, false},
		{[]string{"127.0.0.1", "::1"}, "http://*.preview.example.com", false, false},
		{nil, "http://*.preview.example.com", false, false},
	} {
		_, err := New(Options{Socket: "/x.sock", AllowedHosts: tc.hosts, Secure: tc.secure, PreviewURL: tc.preview})
		if refused := err != nil; refused != tc.refused {
			t.Errorf("hosts %q, previews %s, secure %v: error %v, want refused %v", tc.hosts, tc.preview, tc.secure, err, tc.refused)
		}
	}
}
