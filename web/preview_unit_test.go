package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestAttackPreviewRebinding: the preview origin answers only to
// localhost, IP addresses and preview_url's host (a DNS name rebound to
// it reaches nothing), and the page does not answer to the preview's
// host name.
func TestAttackPreviewRebinding(t *testing.T) {
	s, err := New(Options{Socket: "/nonexistent.sock", PreviewURL: "https://preview.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{
		"evil.example": http.StatusForbidden, "remote.example.com": http.StatusForbidden,
		"preview.example.com": http.StatusUnauthorized, "127.0.0.1:8081": http.StatusUnauthorized, "localhost:8081": http.StatusUnauthorized,
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "http://x/", nil)
		req.Host = host
		s.PreviewHandler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("preview origin, Host %s: %d, want %d", host, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://x/login", nil)
	req.Host = "preview.example.com"
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("page under the preview's host name: %d, want 403", rec.Code)
	}
	if _, err := New(Options{Socket: "/x.sock", PreviewURL: "preview.example.com"}); err == nil || err.Error() != `web: preview URL "preview.example.com": want an origin like http://127.0.0.1:8081` {
		t.Errorf("bad preview URL: %v", err)
	}
}

// TestStripCookies: Remote's cookies go, the app's stay.
func TestStripCookies(t *testing.T) {
	h := http.Header{"Cookie": {"remote_session=a; app=1", "remote_preview=b;other=2"}}
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
	s, err := New(Options{Socket: "/nonexistent.sock", PreviewURL: "http://127.0.0.1:8081",
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
	if _, ok := s.previewSessions.get(mine, false); ok {
		t.Error("the user's preview session outlived the logout")
	}
	if _, ok := s.previewSessions.get(theirs, false); !ok {
		t.Error("another user's preview session ended with this logout")
	}
}

// TestPreviewStaysOpenForTheSessionTTL: the one-use token lives a minute,
// but the preview it opens stays open for the session TTL (12 h by
// default, the cookie's Max-Age 43200), not for what was left of the
// token's minute; it closes after the TTL.
func TestPreviewStaysOpenForTheSessionTTL(t *testing.T) {
	start := time.Now()
	now := start
	s, err := New(Options{Socket: "/nonexistent.sock", PreviewURL: "http://127.0.0.1:8081", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	token, err := s.previewTokens.add(previewGrant{user: testUser, project: "p", port: 3000, expires: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://127.0.0.1:8081/.remote-preview/enter?token="+token, nil)
	s.PreviewHandler().ServeHTTP(rec, req)
	var cookie *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if c.Name == PreviewCookie {
			cookie = c
		}
	}
	if rec.Code != http.StatusSeeOther || cookie == nil || cookie.MaxAge != 43200 {
		t.Fatalf("enter: %d, cookie %+v; want 303 and a preview cookie with Max-Age 43200", rec.Code, cookie)
	}
	now = start.Add(2 * time.Minute)
	if _, ok := s.previewSessions.get(cookie.Value, false); !ok {
		t.Fatal("the preview closed when its token's minute ran out")
	}
	now = start.Add(11*time.Hour + 59*time.Minute)
	if _, ok := s.previewSessions.get(cookie.Value, false); !ok {
		t.Fatal("the preview closed before the session TTL (12 h)")
	}
	now = start.Add(12*time.Hour + time.Minute)
	if _, ok := s.previewSessions.get(cookie.Value, false); ok {
		t.Fatal("the preview stayed open past the session TTL")
	}
}
