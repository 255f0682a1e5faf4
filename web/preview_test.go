package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
)

// daemonDo sends a request straight to the stack's daemon socket as user.
func daemonDo(t *testing.T, s *stack, method, path, user string, body any) (int, []byte) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.sock)
	}}}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://remoted"+path, rd)
	req.Header.Set(api.HeaderUser, user)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// previewProject creates and starts a project of user's with ports whose
// container serves busybox httpd on 8080 and a WebSocket echo on 8090.
func previewProject(t *testing.T, s *stack, user, prefix string) api.Project {
	t.Helper()
	return previewProjectWith(t, s, user, prefix, "", nil)
}

// previewProjectWith is previewProject whose httpd serves index (when not
// empty) and files (path under /www: content).
func previewProjectWith(t *testing.T, s *stack, user, prefix, index string, files map[string]string) api.Project {
	t.Helper()
	cl := testkit.LXD(t)
	name := strings.TrimPrefix(testkit.ContainerName(prefix), "t-")
	testkit.CleanupProjectContainers(t, cl, name)
	status, body := daemonDo(t, s, "POST", "/v1/projects", user, api.CreateProjectRequest{Name: name, Ports: []int{8080, 8090}})
	var p api.Project
	if status != http.StatusCreated || json.Unmarshal(body, &p) != nil {
		t.Fatalf("create project: %d %s", status, body)
	}
	if status, body := daemonDo(t, s, "POST", "/v1/projects/"+name+"/start", user, nil); status != http.StatusOK {
		t.Fatalf("start project: %d %s", status, body)
	}
	if index == "" {
		index = `<!doctype html><title>app</title><h1 id="app">hello from ` + name + `</h1>`
	}
	for path, content := range files {
		testkit.PushFile(t, cl, p.Container, "/www/"+path, content)
	}
	testkit.ServeHTTPD(t, cl, p.Container, 8080, index)
	testkit.ServeWSEcho(t, cl, p.Container, 8090)
	return p
}

// TestPreviewInBrowser: after login in headless Chromium, the page shows a
// Preview link per port; following it lands on the preview origin (not
// the page's) with busybox httpd's page from the project's container; a
// WebSocket from that page reaches the echo server in the container; the
// preview cookie is invisible to the app's script.
func TestPreviewInBrowser(t *testing.T) {
	s := startStack(t, fakeanthropic.New(t), false)
	p := previewProject(t, s, testUser, "pvweb")
	ctx := loginStack(t, s)
	card := `.project[data-project="` + p.Name + `"]`
	steps(t, ctx, "find the preview links",
		chromedp.Navigate(s.base+"/#/projects"),
		chromedp.WaitVisible(chromedp.CSS(card+` .preview-link[data-port="8080"]`)),
	)
	if href := eval[string](t, ctx, `document.querySelector('`+card+` .preview-link[data-port="8080"]').getAttribute('href')`); href != "/preview/"+p.Name+"/8080" {
		t.Fatalf("preview link %q", href)
	}
	screenshot(t, ctx, "preview-links")
	// The link opens a new tab; this tab follows it instead.
	steps(t, ctx, "open the preview of port 8080",
		chromedp.Navigate(s.base+"/preview/"+p.Name+"/8080"),
		waitJS(`location.origin === '`+s.previewOrigin(p, 8080)+`' && (document.querySelector('#app')||{}).textContent === 'hello from `+p.Name+`'`),
	)
	if c := eval[string](t, ctx, `document.cookie`); strings.Contains(c, "remote_") {
		t.Fatalf("Remote's cookies readable by the app's script: %q", c)
	}
	screenshot(t, ctx, "preview-8080")
	steps(t, ctx, "websocket through the preview of port 8090",
		chromedp.Navigate(s.base+"/preview/"+p.Name+"/8090"),
		waitJS(`location.origin === '`+s.previewOrigin(p, 8090)+`' && document.body.innerText === 'wsecho'`),
		waitJS(`(() => { if (!window.__ws) { window.__ws = new WebSocket('ws://' + location.host + '/ws');
			window.__ws.onopen = () => window.__ws.send('hi from chromium');
			window.__ws.onmessage = (m) => { window.__got = m.data; }; } return true; })()`),
		waitJS(`window.__got === 'echo: hi from chromium'`),
	)
	// The page's origin never serves the app, even to a logged-in page.
	steps(t, ctx, "back on the page's origin",
		chromedp.Navigate(s.base+"/#/projects"),
		chromedp.WaitVisible(chromedp.CSS(card)),
		waitJS(`(() => { fetch('/v1/projects/`+p.Name+`/ports/8080/').then(async (r) => { window.__page = r.status + ' ' + await r.text(); }); return true; })()`),
		waitJS(`!!window.__page`),
	)
	if got := eval[string](t, ctx, `window.__page`); !strings.HasPrefix(got, "404 ") || strings.Contains(got, "hello from") {
		t.Fatalf("the page's origin answered the preview route: %q", got)
	}
}

// previewLogin logs c in on the page and returns it.
func previewLogin(t *testing.T, s *stack) *http.Client {
	t.Helper()
	c := noRedirectClient()
	resp, err := c.PostForm(s.base+"/login", url.Values{"username": {testUser}, "password": {testPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	return c
}

// pget sends GET u with c and extra headers; it returns status, headers and body.
func pget(t *testing.T, c *http.Client, u string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// mint asks the page for a preview token of p's port, as the page's own
// navigation would, and returns the preview origin's enter URL it
// redirects to.
func mint(t *testing.T, s *stack, c *http.Client, p api.Project, port string) string {
	t.Helper()
	n, _ := strconv.Atoi(port)
	status, h, body := pget(t, c, s.base+"/preview/"+p.Name+"/"+port, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), s.previewOrigin(p, n)+"/.remote-preview/enter?token=") {
		t.Fatalf("mint %s:%s: %d %q %s", p.Name, port, status, h.Get("Location"), body)
	}
	return h.Get("Location")
}

// TestAttackPreviewOrigin: the preview origin serves nothing without a
// token exchanged for its own cookie (the page's session cookie is not
// one), a token works once, another user's project gets no token, the
// page's origin never serves a project's app, a hostile app can neither
// read Remote's cookies nor set them (nor HSTS or Clear-Site-Data), a
// preview cannot send the browser to mint a token for another project,
// and a cross-origin WebSocket is refused. Ownership is checked on every
// request: a deleted project's preview cookie reaches nothing.
func TestAttackPreviewOrigin(t *testing.T) {
	s := startStack(t, fakeanthropic.New(t), false)
	p := previewProject(t, s, testUser, "pvatk")
	c := previewLogin(t, s)
	base, _ := url.Parse(s.base)
	var session string
	for _, ck := range c.Jar.Cookies(base) {
		if ck.Name == SessionCookie {
			session = ck.Value
		}
	}
	if session == "" {
		t.Fatal("no session cookie after login")
	}

	origin := s.previewOrigin(p, 8080)
	// No token, or the page's cookie: nothing.
	for _, hdr := range []map[string]string{nil, {"Cookie": SessionCookie + "=" + session}} {
		for _, path := range []string{"/", "/index.html", "/static/app.js", "/login"} {
			status, _, body := pget(t, noRedirectClient(), origin+path, hdr)
			if status != http.StatusUnauthorized || strings.Contains(body, "hello from") || strings.Contains(body, "<script") {
				t.Fatalf("preview %s with %v: %d %.200s", path, hdr, status, body)
			}
		}
	}
	// The page's origin never serves the app.
	for _, path := range []string{"/v1/projects/" + p.Name + "/ports/8080/", "/v1/projects/" + p.Name + "/ports/8080/index.html"} {
		if status, _, body := pget(t, c, s.base+path, nil); status != http.StatusNotFound || strings.Contains(body, "hello from") {
			t.Fatalf("page origin %s: %d %s", path, status, body)
		}
	}

	// The entry: the preview origin sets an entry cookie and sends the
	// browser to the page, which checks the minting session and sends it
	// back; the entry cookie then buys the preview cookie. A token works
	// once.
	enter := mint(t, s, c, p, "8080")
	status, h, body := pget(t, c, enter, nil)
	confirm := h.Get("Location")
	if status != http.StatusSeeOther || !strings.HasPrefix(confirm, s.base+"/preview/confirm?token=") {
		t.Fatalf("enter: %d %v %s", status, h, body)
	}
	for _, want := range []string{"remote_preview_entry=", "Path=/", "Max-Age=60", "HttpOnly", "SameSite=Lax"} {
		if ck := h.Get("Set-Cookie"); !strings.Contains(ck, want) || strings.Contains(strings.ToLower(ck), "domain=") {
			t.Fatalf("entry cookie %q lacks %q or names a domain", ck, want)
		}
	}
	status, h, body = pget(t, c, confirm, nil)
	next := h.Get("Location")
	if status != http.StatusSeeOther || !strings.HasPrefix(next, origin+"/.remote-preview/session?token=") {
		t.Fatalf("confirm: %d %v %s", status, h, body)
	}
	status, h, body = pget(t, c, next, nil)
	if status != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("session: %d %v %s", status, h, body)
	}
	var ck string
	for _, v := range h.Values("Set-Cookie") {
		if strings.HasPrefix(v, PreviewCookie+"=") {
			ck = v
		}
	}
	for _, want := range []string{PreviewCookie + "=", "Path=/", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(ck, want) {
			t.Fatalf("preview cookie %q lacks %q", ck, want)
		}
	}
	if strings.Contains(strings.ToLower(ck), "domain=") {
		t.Fatalf("preview cookie %q is not host-only", ck)
	}
	if status, _, body := pget(t, c, origin+"/", nil); status != http.StatusOK || !strings.Contains(body, "hello from "+p.Name) {
		t.Fatalf("preview with its cookie: %d %s", status, body)
	}
	for _, u := range []string{enter, confirm, next} {
		if status, _, body := pget(t, c, u, nil); status == http.StatusSeeOther || (!strings.Contains(body, "preview token unknown") && !strings.Contains(body, "was not opened by this browser")) {
			t.Fatalf("token used twice at %s: %d %s", u, status, body)
		}
	}
	// Another port of the project is another origin: the cookie of 8080
	// does not open 8090.
	if status, _, body := pget(t, c, s.previewOrigin(p, 8090)+"/", nil); status != http.StatusUnauthorized {
		t.Fatalf("port 8090 with 8080's preview cookie: %d %s", status, body)
	}
	pc := c

	// A hostile app: Remote's cookies never reach it, and it cannot set
	// them, nor headers acting on the whole host.
	previewURL, _ := url.Parse(origin)
	var pcookie string
	for _, k := range pc.Jar.Cookies(previewURL) {
		if k.Name == PreviewCookie {
			pcookie = k.Value
		}
	}
	status, h, body = pget(t, noRedirectClient(), origin+"/cgi-bin/hostile", map[string]string{
		"Cookie": SessionCookie + "=" + session + "; " + PreviewCookie + "=" + pcookie + "; app=1",
	})
	if status != http.StatusOK {
		t.Fatalf("hostile cgi: %d %s", status, body)
	}
	if want := "user=[] frontend=[] host=[localhost:8080] cookie=[app=1]\n"; body != want {
		redact := strings.NewReplacer(session, "<session>", pcookie, "<preview cookie>")
		t.Fatalf("the app saw %q, want %q", redact.Replace(body), want)
	}
	if got := h.Values("Set-Cookie"); len(got) != 1 || got[0] != "app=fine; Path=/" {
		t.Fatalf("Set-Cookie from the app: %q, want only app=fine", got)
	}
	if !slices.Contains(h.Values("Vary"), "Cookie") {
		t.Fatalf("Vary %q: a response cached for one preview could be shown in another", h.Values("Vary"))
	}
	for _, hh := range []string{"Strict-Transport-Security", "Clear-Site-Data", "X-Remote-User"} {
		if v := h.Get(hh); v != "" {
			t.Fatalf("the app's %s %q reached the browser", hh, v)
		}
	}

	// A preview cannot send the browser to mint a token for another
	// project (it would then read that project through its own origin).
	if status, _, body := pget(t, c, s.base+"/preview/"+p.Name+"/8090", map[string]string{"Sec-Fetch-Site": "same-site"}); status != http.StatusForbidden {
		t.Fatalf("mint from the preview origin: %d %s", status, body)
	}
	// A cross-origin WebSocket to the preview is refused.
	status, _, body = pget(t, pc, origin+"/ws", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Origin": s.base,
		"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
	if status != http.StatusForbidden {
		t.Fatalf("cross-origin websocket: %d %s", status, body)
	}

	// Another user's project: no token for it.
	other := previewProject(t, s, "mallory", "pvmal")
	if status, _, body := pget(t, c, s.base+"/preview/"+other.Name+"/8080", nil); status != http.StatusNotFound || !strings.Contains(body, "no project") {
		t.Fatalf("mint for mallory's project: %d %s", status, body)
	}
	// A port the project does not have: no token.
	if status, _, _ := pget(t, c, s.base+"/preview/"+p.Name+"/9999", nil); status != http.StatusNotFound {
		t.Fatalf("mint for port 9999: %d", status)
	}

	// An expired token: remote-web in this process on the same daemon,
	// its clock moved past the token's minute.
	now := time.Now()
	srv, err := New(Options{Socket: s.sock, Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}},
		PreviewURL: "http://*.localhost:1", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	login := httptest.NewRequest("POST", "http://127.0.0.1/login", strings.NewReader(url.Values{"username": {testUser}, "password": {testPassword}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	srv.ServeHTTP(rec, login)
	rec2 := httptest.NewRecorder()
	mintReq := httptest.NewRequest("GET", "http://127.0.0.1/preview/"+p.Name+"/8080", nil)
	for _, ck := range rec.Result().Cookies() {
		mintReq.AddCookie(ck)
	}
	srv.ServeHTTP(rec2, mintReq)
	loc := rec2.Result().Header.Get("Location")
	if rec2.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "http://8080-"+p.ID+".localhost:1/.remote-preview/enter?token=") {
		t.Fatalf("in-process mint: %d %q %s", rec2.Code, loc, rec2.Body)
	}
	now = now.Add(61 * time.Second)
	rec3 := httptest.NewRecorder()
	srv.PreviewHandler().ServeHTTP(rec3, httptest.NewRequest("GET", loc, nil))
	if rec3.Code != http.StatusUnauthorized || !strings.Contains(rec3.Body.String(), "preview token unknown, used or expired") || rec3.Result().Header.Get("Set-Cookie") != "" {
		t.Fatalf("expired token: %d %s", rec3.Code, rec3.Body)
	}

	// Ownership on every request: the project gone, the cookie reaches
	// nothing.
	if status, body := daemonDo(t, s, "DELETE", "/v1/projects/"+p.Name+"?purge=true", testUser, nil); status != http.StatusNoContent {
		t.Fatalf("delete project: %d %s", status, body)
	}
	if status, _, body := pget(t, pc, origin+"/", nil); status != http.StatusNotFound || strings.Contains(body, "hello from") {
		t.Fatalf("preview after the project was deleted: %d %s", status, body)
	}
}
