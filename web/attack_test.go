package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"remote/api"
)

// TestAttackTextPlainBody: a form (or a cross-site fetch without
// preflight) can only send text/plain, urlencoded or multipart bodies.
// remote-web refuses every such body on an API call with 415 before the
// daemon sees it, even a same-origin one carrying the session cookie.
func TestAttackTextPlainBody(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}
	body := `{"provider":"claude","title":"pwn="}` + "\r\n" // what <form enctype="text/plain"> sends
	for _, tt := range []struct{ method, ct, body string }{
		{http.MethodPost, "text/plain", body},
		{http.MethodPost, "text/plain;charset=UTF-8", body},
		{http.MethodPost, "application/x-www-form-urlencoded", "a=b"},
		{http.MethodPost, "application/x-www-form-urlencoded", ""}, // a form with no fields, e.g. at .../start
		{http.MethodPost, "multipart/form-data; boundary=x", "--x--\r\n"},
		{http.MethodPut, "text/plain", body},
		{http.MethodDelete, "text/plain", body},
		{http.MethodPost, "application/json; charset=latin1", body},
		{http.MethodPost, "", body},
	} {
		t.Run(tt.method+" "+tt.ct, func(t *testing.T) {
			before := h.daemon.count()
			hdr := map[string]string{}
			for k, v := range sameOrigin {
				hdr[k] = v
			}
			if tt.ct != "" {
				hdr["Content-Type"] = tt.ct
			}
			resp, b := do(t, c, tt.method, h.srv.URL+"/v1/echo", tt.body, hdr)
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Fatalf("status %d, want 415: %s", resp.StatusCode, b)
			}
			if e := decodeError(t, b); e.Code != "unsupported_media_type" || !strings.Contains(e.Message, "application/json") {
				t.Errorf("error %+v, want unsupported_media_type naming application/json", e)
			}
			if h.daemon.count() != before {
				t.Error("the refused body reached the daemon")
			}
		})
	}
	for _, tt := range []struct{ ct, body string }{
		{"application/json", `{"a":1}`},
		{"application/json; charset=utf-8", `{"a":1}`},
		{"", ""}, // no body: POST .../start, .../cancel
	} {
		hdr := map[string]string{"Sec-Fetch-Site": "same-origin"}
		if tt.ct != "" {
			hdr["Content-Type"] = tt.ct
		}
		if resp, b := do(t, c, http.MethodPost, h.srv.URL+"/v1/echo", tt.body, hdr); resp.StatusCode != http.StatusOK {
			t.Errorf("POST with Content-Type %q: %d %s, want 200", tt.ct, resp.StatusCode, b)
		}
	}
}

// loopbackClient returns a client whose connections come from the given
// loopback address (all of 127.0.0.0/8 is local on Linux), with its own
// cookie jar and no redirects followed.
func loopbackClient(from string) *http.Client {
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return &http.Client{
		Jar:           jar,
		Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func loginFrom(t *testing.T, h *harness, c *http.Client, user, pw string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/login", strings.NewReader(url.Values{"username": {user}, "password": {pw}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAttackLoginFlood: 10,050 login attempts with distinct user names
// from one address must not lock anyone else out. The address is limited
// first, a refused attempt never reaches the per-name table, and a good
// login from another loopback address succeeds.
func TestAttackLoginFlood(t *testing.T) {
	h := newHarness(t, false)
	flooder := loopbackClient("127.0.0.1")
	counts := map[int]int{}
	for i := range 10050 {
		counts[loginFrom(t, h, flooder, fmt.Sprintf("flood-%05d", i), "wrong")]++
	}
	if counts[http.StatusUnauthorized] != DefaultLoginLimit || counts[http.StatusTooManyRequests] != 10050-DefaultLoginLimit {
		t.Errorf("flood answers %v, want %d × 401 and the rest 429", counts, DefaultLoginLimit)
	}
	if n := h.web.byUser.size(); n > DefaultLoginLimit {
		t.Errorf("the per-name table holds %d names after the flood, want at most %d", n, DefaultLoginLimit)
	}
	if st := loginFrom(t, h, loopbackClient("127.0.0.2"), testUser, testPassword); st != http.StatusSeeOther {
		t.Fatalf("good login from 127.0.0.2 after the flood: %d, want 303", st)
	}
	if st := loginFrom(t, h, flooder, testUser, testPassword); st != http.StatusTooManyRequests {
		t.Errorf("the flooding address itself: %d, want 429 until its window ends", st)
	}
}

// TestLoginLimitCountsOnlyWrongPasswords: good logins never use up a
// name's or an address's budget, and attempts refused for their address
// do not count against the name.
func TestLoginLimitCountsOnlyWrongPasswords(t *testing.T) {
	h := newHarness(t, false)
	for i := range DefaultLoginLimit + 2 {
		if st := loginFrom(t, h, loopbackClient(fmt.Sprintf("127.0.1.%d", i+1)), "bob", "bobpw"); st != http.StatusSeeOther {
			t.Fatalf("good login %d for bob: %d, want 303", i+1, st)
		}
	}
	same := loopbackClient("127.0.1.100")
	for i := range DefaultLoginLimit + 2 {
		if st := loginFrom(t, h, same, testUser, testPassword); st != http.StatusSeeOther {
			t.Fatalf("good login %d from one address: %d, want 303", i+1, st)
		}
	}
	// One address burns its budget, then keeps trying bob: refused for
	// the address, which leaves bob's budget alone.
	noisy := loopbackClient("127.0.2.1")
	for i := range DefaultLoginLimit {
		if st := loginFrom(t, h, noisy, fmt.Sprintf("nobody-%d", i), "x"); st != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i+1, st)
		}
	}
	for range 3 * DefaultLoginLimit {
		if st := loginFrom(t, h, noisy, "bob", "wrong"); st != http.StatusTooManyRequests {
			t.Fatalf("over the address's limit: %d, want 429", st)
		}
	}
	if st := loginFrom(t, h, loopbackClient("127.0.2.2"), "bob", "bobpw"); st != http.StatusSeeOther {
		t.Fatalf("bob from another address: %d, want 303 (refused attempts counted against bob)", st)
	}
	// Wrong passwords do count against the name, from any address.
	for i := range DefaultLoginLimit {
		if st := loginFrom(t, h, loopbackClient(fmt.Sprintf("127.0.3.%d", i+1)), testUser, "wrong"); st != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i+1, st)
		}
	}
	if st := loginFrom(t, h, loopbackClient("127.0.3.200"), testUser, testPassword); st != http.StatusTooManyRequests {
		t.Fatalf("after %d wrong passwords for %s: %d, want 429", DefaultLoginLimit, testUser, st)
	}
}

// TestAttackDNSRebinding: a page on evil.example whose DNS name now points
// at remote-web sends requests with Host: evil.example. They are refused
// (403, naming the host) before login or anything else; localhost, IP
// addresses and the configured names are served.
func TestAttackDNSRebinding(t *testing.T) {
	d := startFakeDaemon(t)
	s, err := New(Options{
		Socket:       d.socket,
		Users:        []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}},
		AllowedHosts: []string{"remote.example.com"},
		LoginLimit:   100,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	form := url.Values{"username": {testUser}, "password": {testPassword}}.Encode()
	for _, tt := range []struct {
		host string
		want int
	}{
		{"evil.example", http.StatusForbidden},
		{"evil.example:" + port, http.StatusForbidden},
		{"127.0.0.1.evil.example:" + port, http.StatusForbidden},
		{"localhost.evil.example", http.StatusForbidden},
		{"remote.example.com.evil.example", http.StatusForbidden},
		{"localhost:" + port, http.StatusSeeOther},
		{"127.0.0.1:" + port, http.StatusSeeOther},
		{"[::1]:" + port, http.StatusSeeOther},
		{"remote.example.com", http.StatusSeeOther},
		{"Remote.Example.COM.:" + port, http.StatusSeeOther},
	} {
		for _, req := range []*http.Request{
			httptestRequest(http.MethodPost, hs.URL+"/login", form),
			httptestRequest(http.MethodGet, hs.URL+"/login", ""),
		} {
			req.Host = tt.host
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := tt.want
			if req.Method == http.MethodGet && want == http.StatusSeeOther {
				want = http.StatusOK
			}
			if resp.StatusCode != want {
				t.Errorf("%s /login with Host %q: %d, want %d: %.200s", req.Method, tt.host, resp.StatusCode, want, b)
				continue
			}
			if want == http.StatusForbidden {
				e := decodeError(t, b)
				if wantHost := strings.ToLower(strings.Split(tt.host, ":")[0]); e.Code != api.CodeForbidden || !strings.Contains(e.Message, fmt.Sprintf("host %q is not served here", wantHost)) || !strings.Contains(e.Message, "[web] allowed_hosts") {
					t.Errorf("Host %q refused with %+v, want forbidden naming the host and [web] allowed_hosts", tt.host, e)
				}
				if len(resp.Cookies()) != 0 {
					t.Errorf("Host %q: a refused login set cookies %v", tt.host, resp.Cookies())
				}
			}
		}
	}
	if d.count() != 0 {
		t.Errorf("the daemon saw %d requests", d.count())
	}
}

func httptestRequest(method, u, form string) *http.Request {
	req, _ := http.NewRequestWithContext(context.Background(), method, u, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return req
}

// TestLoginLimitBehindTrustedProxy: behind a trusted reverse proxy every
// connection comes from the proxy, so the login limit counts the client
// X-Forwarded-For names (the last hop that is not a trusted proxy: a
// client cannot hide behind hops it prepends). Another peer's
// X-Forwarded-For is ignored. X-Forwarded-Proto from the proxy gives the
// scheme the Origin check expects.
func TestLoginLimitBehindTrustedProxy(t *testing.T) {
	d := startFakeDaemon(t)
	s, err := New(Options{
		Socket:         d.socket,
		Users:          []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	login := func(from, xff, user, pw string, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/login", strings.NewReader(url.Values{"username": {user}, "password": {pw}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := loopbackClient(from).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range DefaultLoginLimit {
		if st := login("127.0.0.1", "203.0.113.5", fmt.Sprintf("x%d", i), "wrong", nil); st != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, st)
		}
	}
	if st := login("127.0.0.1", "198.51.100.1, 203.0.113.5", "y", "wrong", nil); st != http.StatusTooManyRequests {
		t.Errorf("the limited client behind a prepended hop: %d, want 429", st)
	}
	if st := login("127.0.0.1", "203.0.113.6", testUser, testPassword, nil); st != http.StatusSeeOther {
		t.Errorf("another client behind the same proxy: %d, want 303", st)
	}
	for i := range DefaultLoginLimit {
		if st := login("127.0.0.2", fmt.Sprintf("192.0.2.%d", i), "z", "wrong", nil); st != http.StatusUnauthorized {
			t.Fatalf("untrusted peer attempt %d: %d", i+1, st)
		}
	}
	if st := login("127.0.0.2", "192.0.2.200", testUser, testPassword, nil); st != http.StatusTooManyRequests {
		t.Errorf("an untrusted peer's X-Forwarded-For was believed: %d, want 429", st)
	}
	origin := map[string]string{"Origin": strings.Replace(hs.URL, "http:", "https:", 1), "X-Forwarded-Proto": "https"}
	if st := login("127.0.0.1", "203.0.113.7", testUser, testPassword, origin); st != http.StatusSeeOther {
		t.Errorf("https Origin through the TLS proxy: %d, want 303", st)
	}
	if st := login("127.0.0.3", "", testUser, testPassword, origin); st != http.StatusForbidden {
		t.Errorf("https Origin with X-Forwarded-Proto from an untrusted peer: %d, want 403", st)
	}
}

// TestLoginLimitIPv6Slash64: the login limit keys an IPv6 client by its
// /64 (one host usually holds the whole /64): an attacker rotating the
// low 64 bits of its address, one per guess, is limited like one
// address; a client in another /64 is not.
func TestLoginLimitIPv6Slash64(t *testing.T) {
	d := startFakeDaemon(t)
	s, err := New(Options{
		Socket:         d.socket,
		Users:          []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	login := func(xff, user, pw string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/login", strings.NewReader(url.Values{"username": {user}, "password": {pw}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := loopbackClient("127.0.0.1").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range DefaultLoginLimit {
		if st := login(fmt.Sprintf("2001:db8:1:2:%x::%x", i+1, i+7), fmt.Sprintf("x%d", i), "wrong"); st != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, st)
		}
	}
	if st := login("2001:db8:1:2:ffff:ffff:ffff:fffe", testUser, testPassword); st != http.StatusTooManyRequests {
		t.Errorf("a new address in the limited /64: %d, want 429", st)
	}
	if st := login("2001:db8:1:3::1", testUser, testPassword); st != http.StatusSeeOther {
		t.Errorf("a client in another /64: %d, want 303", st)
	}
}

// TestAttackFileUploadBody: the one non-JSON body remote-web passes is an
// application/octet-stream PUT to /v1/projects/{name}/files/raw from the
// page's own origin, streamed with its Content-Length. The same type on
// any other route or method, with parameters, or from another origin is
// refused before the daemon sees it.
func TestAttackFileUploadBody(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/octet-stream"}
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPost, "/v1/projects/p/files/raw", 415},
		{http.MethodPut, "/v1/projects/p/secrets/KEY", 415},
		{http.MethodPut, "/v1/projects/p/files/raw/x", 415},
		{http.MethodPut, "/v1/projects/p/q/files/raw", 415},
		{http.MethodPut, "/v1/projects//files/raw", 400},
		{http.MethodPut, "/v1/echo", 415},
	} {
		before := h.daemon.count()
		resp, b := do(t, c, tt.method, h.srv.URL+tt.path, "data", same)
		if resp.StatusCode != tt.status || h.daemon.count() != before {
			t.Errorf("%s %s: %d %s (daemon saw it: %v), want %d", tt.method, tt.path, resp.StatusCode, b, h.daemon.count() != before, tt.status)
		}
	}
	before := h.daemon.count()
	resp, b := do(t, c, http.MethodPut, h.srv.URL+"/v1/projects/p/files/raw?path=a", "data", map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/octet-stream; x=y"})
	if resp.StatusCode != 415 || h.daemon.count() != before {
		t.Errorf("octet-stream with a parameter: %d %s", resp.StatusCode, b)
	}
	resp, b = do(t, c, http.MethodPut, h.srv.URL+"/v1/projects/p/files/raw?path=a", "data", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example", "Content-Type": "application/octet-stream"})
	if resp.StatusCode != 403 || h.daemon.count() != before {
		t.Errorf("cross-site upload: %d %s", resp.StatusCode, b)
	}
	body := strings.Repeat("z", 3<<20)
	resp, b = do(t, c, http.MethodPut, h.srv.URL+"/v1/projects/p/files/raw?path=a", body, same)
	if resp.StatusCode != 200 || string(b) != `{"bytes":3145728,"contentLength":3145728}`+"\n" {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	if got := h.daemon.last(t); got.User != "alice" || got.Cookie != "" {
		t.Errorf("daemon saw %+v", got)
	}
}

// TestAttackAPISubresource: a chat's Markdown renders
// <img src="/v1/projects/p/files/raw?path=…"> (or a frame, a script...);
// the browser sends it with the session cookie and Sec-Fetch-Dest naming
// the sub-resource. remote-web refuses it before the daemon sees it (the
// daemon never gets fetch metadata), so rendering a chat cannot start
// downloads; a fetch, a followed link or download, a WebSocket, and a
// client without fetch metadata pass.
func TestAttackAPISubresource(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	u := h.srv.URL + "/v1/projects/p/files/raw?path=a"
	for _, dest := range []string{"image", "script", "style", "iframe", "frame", "embed", "object", "audio", "video", "track", "font", "worker", "sharedworker", "manifest", "unknown"} {
		before := h.daemon.count()
		resp, b := do(t, c, http.MethodGet, u, "", map[string]string{"Sec-Fetch-Dest": dest, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors"})
		if resp.StatusCode != 403 || h.daemon.count() != before || !strings.Contains(string(b), `Sec-Fetch-Dest \"`+dest+`\"`) {
			t.Errorf("Sec-Fetch-Dest %s: %d %s (daemon saw it: %v), want 403", dest, resp.StatusCode, b, h.daemon.count() != before)
		}
	}
	for _, dest := range []string{"", "empty", "document"} {
		hdr := map[string]string{"Sec-Fetch-Site": "same-origin"}
		if dest != "" {
			hdr["Sec-Fetch-Dest"] = dest
		}
		before := h.daemon.count()
		if resp, b := do(t, c, http.MethodGet, u, "", hdr); resp.StatusCode != 200 || h.daemon.count() != before+1 {
			t.Errorf("Sec-Fetch-Dest %q: %d %s", dest, resp.StatusCode, b)
		}
	}
}
