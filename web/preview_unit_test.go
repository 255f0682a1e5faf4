package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAttackPreviewHosts: previews answer only to <port>-<project id>
// under preview_url's domain (a DNS name rebound to remote-web, an IP
// address or the bare domain reaches nothing), and the page does not
// answer to a preview's host name. A preview_url without "*." is
// refused: every project and port needs an origin of its own.
func TestAttackPreviewHosts(t *testing.T) {
	s, err := New(Options{Socket: "/nonexistent.sock", PreviewURL: "https://*.preview.example.net:8443"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{
		"evil.example": http.StatusForbidden, "preview.example.net": http.StatusForbidden,
		"127.0.0.1:8081": http.StatusForbidden, "localhost:8081": http.StatusForbidden,
		"8080-0123456789abcdef.preview.example.net":       http.StatusUnauthorized,
		"8080-0123456789ABCDEF.preview.example.net.:8443": http.StatusUnauthorized,
		"65535-0123456789abcdef.preview.example.net":      http.StatusUnauthorized,
		"65536-0123456789abcdef.preview.example.net":      http.StatusForbidden,
		"0-0123456789abcdef.preview.example.net":          http.StatusForbidden,
		"8080-0123.preview.example.net":                   http.StatusForbidden,
		"x.8080-0123456789abcdef.preview.example.net":     http.StatusForbidden,
		"8080-0123456789abcdef.preview.example.net.evil":  http.StatusForbidden,
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "http://x/", nil)
		req.Host = host
		s.PreviewHandler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("preview origin, Host %s: %d, want %d", host, rec.Code, want)
		}
	}
	if got := s.previewOriginFor("0123456789abcdef", 8080); got != "https://8080-0123456789abcdef.preview.example.net:8443" {
		t.Errorf("preview origin %q", got)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://x/login", nil)
	req.Host = "8080-0123456789abcdef.preview.example.net"
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("page under a preview's host name: %d, want 403", rec.Code)
	}
	for _, bad := range []string{"preview.example.net", "https://preview.example.net", "https://*.preview.example.net/app", "ftp://*.preview.example.net"} {
		want := `web: preview URL "` + bad + `": want a wildcard origin like https://*.preview.example.net`
		if _, err := New(Options{Socket: "/x.sock", PreviewURL: bad}); err == nil || err.Error() != want {
			t.Errorf("preview URL %q: %v", bad, err)
		}
	}
}

// TestAttackPreviewServiceWorkerScript: a preview never serves a service
// worker script (it would outlive the preview session and see later
// navigations to the origin), with or without a preview session.
func TestAttackPreviewServiceWorkerScript(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	origin := enterHarnessPreview(t, h, c, "p-"+testUser)
	if resp, b := get(t, c, origin+"/sw.js", nil); resp.StatusCode != http.StatusOK || string(b) != "app p-alice:8080 /sw.js user=alice" {
		t.Fatalf("plain GET of the script: %d %s", resp.StatusCode, b)
	}
	for _, hdr := range []map[string]string{{"Service-Worker": "script"}, {"Sec-Fetch-Dest": "serviceworker"}} {
		resp, b := get(t, c, origin+"/sw.js", hdr)
		if resp.StatusCode != http.StatusForbidden || decodeError(t, b).Message != "service workers are not allowed on previews" {
			t.Errorf("%v: %d %s", hdr, resp.StatusCode, b)
		}
	}
}

// enterHarnessPreview opens port 8080 of project as c's user through the
// entry's three steps and returns the preview's origin.
func enterHarnessPreview(t *testing.T, h *harness, c *http.Client, project string) string {
	t.Helper()
	resp, b := get(t, c, h.srv.URL+"/preview/"+project+"/8080", map[string]string{"Sec-Fetch-Site": "same-origin"})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "/.remote-preview/enter?token=") {
		t.Fatalf("mint: %d %q %s", resp.StatusCode, loc, b)
	}
	u, _ := url.Parse(loc)
	origin := u.Scheme + "://" + u.Host
	for range 2 { // enter → confirm on the page, confirm → session
		resp, b = get(t, c, loc, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("GET %s: %d %s", loc, resp.StatusCode, b)
		}
		loc = resp.Header.Get("Location")
	}
	if resp, b = get(t, c, loc, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("GET %s: %d %q %s", loc, resp.StatusCode, resp.Header.Get("Location"), b)
	}
	return origin
}

// TestStripCookies: Remote's cookies go, the app's stay.
func TestStripCookies(t *testing.T) {
	h := http.Header{"Cookie": {"remote_session=a; app=1", "remote_preview=b;other=2",
		"__Host-remote_session=c; __Host-remote_preview=d; remote_preview_entry=e; __Host-remote_preview_entry=f"}}
	stripCookies(h)
	if got := h.Values("Cookie"); len(got) != 1 || got[0] != "app=1; other=2" {
		t.Fatalf("cookies after strip: %q", got)
	}
	h = http.Header{"Cookie": {"remote_session=a"}}
	if stripCookies(h); h.Get("Cookie") != "" {
		t.Fatalf("only Remote's cookie: %q left", h.Get("Cookie"))
	}
}

// TestPreviewLogout: logging out of the page ends the user's preview
// sessions, not other users'.
func TestPreviewLogout(t *testing.T) {
	s, err := New(Options{Socket: "/nonexistent.sock", PreviewURL: "http://*.localhost:8081",
		Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}}})
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := s.previewSessions.add(previewGrant{user: testUser, project: "p", port: 1, expires: time.Now().Add(time.Hour)})
	theirs, _ := s.previewSessions.add(previewGrant{user: "bob", project: "q", port: 1, expires: time.Now().Add(time.Hour)})
	token, _, _ := s.sessions.create(testUser)
	req := httptest.NewRequest("POST", "http://127.0.0.1/logout", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: token})
	s.ServeHTTP(httptest.NewRecorder(), req)
	if _, ok := s.previewSessions.get(mine); ok {
		t.Error("the user's preview session outlived the logout")
	}
	if _, ok := s.previewSessions.get(theirs); !ok {
		t.Error("another user's preview session ended with this logout")
	}
}

// TestAttackFairShares: one user logs in, mints preview links and opens
// previews up to their caps (32 sessions, 10 successful logins a minute,
// 16 unused preview links, 64 preview sessions): the next one is 429
// with a clear message, and another user logs in and opens a preview as
// before.
func TestAttackFairShares(t *testing.T) {
	h := newHarness(t, false)
	loginJSON := func(user, pw string) (*http.Response, []byte) {
		return do(t, h.client(t), http.MethodPost, h.srv.URL+"/login", url.Values{"username": {user}, "password": {pw}}.Encode(),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
	}
	// Successful logins: 10 a minute per user.
	for i := range 10 {
		if resp, b := loginJSON("bob", "bobpw"); resp.StatusCode != http.StatusOK {
			t.Fatalf("bob's login %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	resp, b := loginJSON("bob", "bobpw")
	if e := decodeError(t, b); resp.StatusCode != http.StatusTooManyRequests || e.Code != "rate_limited" ||
		e.Message != "too many logins for this user (limit 10 a minute): try again later" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("bob's 11th login in a minute: %d %v %q", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	if resp, b := loginJSON(testUser, testPassword); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's login while bob is limited: %d %s", resp.StatusCode, b)
	}
	// Live sessions: 32 per user.
	for i := 10; i < 32; i++ {
		if i%10 == 0 {
			h.clock.add(DefaultLoginWindow)
		}
		if resp, b := loginJSON("bob", "bobpw"); resp.StatusCode != http.StatusOK {
			t.Fatalf("bob's login %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	h.clock.add(DefaultLoginWindow)
	resp, b = loginJSON("bob", "bobpw")
	if e := decodeError(t, b); resp.StatusCode != http.StatusTooManyRequests ||
		e.Message != "too many login sessions for this user (limit 32): log out in another browser, or wait until a session ends" {
		t.Fatalf("bob's 33rd session: %d %v", resp.StatusCode, e)
	}
	if resp, b := loginJSON(testUser, testPassword); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's login while bob holds 32 sessions: %d %s", resp.StatusCode, b)
	}

	// Preview links: 16 unused per user.
	bob := h.client(t)
	if resp := h.login(t, bob, "bob", "bobpw"); resp.StatusCode == http.StatusSeeOther {
		t.Fatal("bob logged in past his session limit")
	}
	h.clock.add(time.Hour) // bob's sessions expire
	if resp := h.login(t, bob, "bob", "bobpw"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's login after his sessions expired: %d", resp.StatusCode)
	}
	alice := h.loggedIn(t)
	mint := func(c *http.Client, project string) (*http.Response, []byte) {
		return get(t, c, h.srv.URL+"/preview/"+project+"/8080", map[string]string{"Sec-Fetch-Site": "same-origin"})
	}
	for i := range 16 {
		if resp, b := mint(bob, "p-bob"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("bob's preview link %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	resp, b = mint(bob, "p-bob")
	if e := decodeError(t, b); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" ||
		e.Message != "too many unused preview links for this user (limit 16): open them, or wait a minute until they expire" {
		t.Fatalf("bob's 17th preview link: %d %v %q", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	if origin := enterHarnessPreview(t, h, alice, "p-"+testUser); origin == "" {
		t.Fatal("alice's preview while bob is at his link limit")
	}
	// Preview sessions: 64 per user (the same browser reopening a
	// preview replaces its session; each of these is another browser).
	h.clock.add(time.Minute)
	for range 64 {
		c := h.client(t)
		c.Jar.SetCookies(mustURL(t, h.srv.URL), bob.Jar.Cookies(mustURL(t, h.srv.URL)))
		enterHarnessPreview(t, h, c, "p-bob")
	}
	resp, b = mint(bob, "p-bob")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's 65th preview link: %d %s", resp.StatusCode, b)
	}
	for range 3 { // enter, confirm, session
		resp, b = get(t, bob, resp.Header.Get("Location"), nil)
	}
	if e := decodeError(t, b); resp.StatusCode != http.StatusTooManyRequests ||
		e.Message != "too many open previews for this user (limit 64): log out of Remote to close them, or wait until one ends" {
		t.Fatalf("bob's 65th preview session: %d %v", resp.StatusCode, e)
	}
	if origin := enterHarnessPreview(t, h, alice, "p-"+testUser); origin == "" {
		t.Fatal("alice's preview while bob is at his preview limit")
	}
	// The same browser reopening its preview does not use up the limit.
	for range 3 {
		enterHarnessPreview(t, h, alice, "p-"+testUser)
	}
	if n := h.web.previewSessions.perUser[testUser]; n != 1 {
		t.Errorf("alice holds %d preview sessions after reopening in one browser, want 1", n)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPreviewSessionOutlivesItsLink: the preview session a one-minute
// link opens lives as long as the login session that opened it (the
// page's session lifetime, here one hour from login), not the link's
// minute: its cookie's Max-Age says so and the preview still answers
// minutes later; it ends when the login session does.
func TestPreviewSessionOutlivesItsLink(t *testing.T) {
	h := newHarness(t, false) // SessionTTL one hour, the link's one minute
	c := h.loggedIn(t)
	h.clock.add(10 * time.Minute) // the login session has 50 minutes left
	resp, b := get(t, c, h.srv.URL+"/preview/p-"+testUser+"/8080", map[string]string{"Sec-Fetch-Site": "same-origin"})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("mint: %d %s", resp.StatusCode, b)
	}
	u := mustURL(t, loc)
	origin := u.Scheme + "://" + u.Host
	for range 3 { // enter, confirm, session
		if resp, b = get(t, c, loc, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("GET %s: %d %s", loc, resp.StatusCode, b)
		}
		loc = resp.Header.Get("Location")
	}
	var ck string
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, PreviewCookie+"=") {
			ck = v
		}
	}
	if !strings.Contains(ck, "; Max-Age=3000;") && !strings.HasSuffix(ck, "; Max-Age=3000") {
		t.Fatalf("preview cookie %q: want Max-Age=3000 (the login session's 50 minutes left, not the link's minute)", ck)
	}
	const want = "app p-alice:8080 / user=alice"
	opened := h.clock.now()
	for _, step := range []time.Duration{2 * time.Minute, 47*time.Minute + 59*time.Second} {
		h.clock.add(step)
		if resp, b := get(t, c, origin+"/", nil); resp.StatusCode != http.StatusOK || string(b) != want {
			t.Fatalf("preview %v after it opened: %d %s; want 200 until the login session ends", h.clock.now().Sub(opened), resp.StatusCode, b)
		}
	}
	h.clock.add(time.Second) // the login session ends: so does the preview
	if resp, b := get(t, c, origin+"/", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("preview after the login session ended: %d %s", resp.StatusCode, b)
	}
}
