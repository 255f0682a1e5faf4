package web

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/bcrypt"

	"remote/api"
)

const (
	testUser     = "alice"
	testPassword = "correct horse battery staple"
)

// seen is what the fake daemon recorded of one request.
type seen struct {
	User, Origin, Cookie, Auth, Frontend string
	Path                                 string
}

// fakeDaemon is an HTTP server on a Unix socket standing in for remoted.
type fakeDaemon struct {
	socket  string
	mu      sync.Mutex
	reqs    []seen
	release chan struct{} // unblocks the second NDJSON line
}

func (d *fakeDaemon) record(r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reqs = append(d.reqs, seen{
		User: r.Header.Get(HeaderUser), Origin: r.Header.Get("Origin"),
		Cookie: r.Header.Get("Cookie"), Auth: r.Header.Get("Authorization"), Frontend: r.Header.Get(api.HeaderFrontend), Path: r.URL.Path,
	})
}

func (d *fakeDaemon) last(t *testing.T) seen {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.reqs) == 0 {
		t.Fatal("daemon saw no request")
	}
	return d.reqs[len(d.reqs)-1]
}

func (d *fakeDaemon) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

func startFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "rw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &fakeDaemon{socket: filepath.Join(dir, "d.sock"), release: make(chan struct{})}
	ln, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	up := websocket.Upgrader{} // default CheckOrigin: refuses a foreign Origin, accepts none
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/echo", func(w http.ResponseWriter, r *http.Request) {
		d.record(r)
		w.Header().Set("Set-Cookie", "daemon=1")
		writeJSON(w, http.StatusOK, map[string]string{"user": r.Header.Get(HeaderUser)})
	})
	mux.HandleFunc("POST /v1/projects/{name}/forge-events", func(w http.ResponseWriter, r *http.Request) {
		d.record(r)
		b, _ := io.ReadAll(r.Body)
		writeJSON(w, http.StatusAccepted, map[string]any{"query": r.URL.RawQuery, "header": r.Header, "body": string(b)})
	})
	mux.HandleFunc("/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		d.record(r)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"n":1}`+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-d.release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `{"n":2}`+"\n")
	})
	mux.HandleFunc("/ws/chat/{id}", func(w http.ResponseWriter, r *http.Request) {
		d.record(r)
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.WriteJSON(api.Event{Type: api.EventSync, Running: false})
		for {
			mt, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	})
	// A project "p-<user>" is <user>'s, with port 8080; its app answers
	// with its name, path and caller.
	mux.HandleFunc("/v1/projects/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if name != "p-"+r.Header.Get(HeaderUser) {
			writeError(w, http.StatusNotFound, api.CodeNotFound, "no such project")
			return
		}
		writeJSON(w, http.StatusOK, api.Project{ID: fakeProjectID(name), Name: name, Ports: []int{8080}})
	})
	mux.HandleFunc("/v1/projects/{name}/ports/{port}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "app %s:%s /%s user=%s", r.PathValue("name"), r.PathValue("port"), r.PathValue("path"), r.Header.Get(HeaderUser))
	})
	mux.HandleFunc("/v1/projects/{name}/files/raw", func(w http.ResponseWriter, r *http.Request) {
		d.record(r)
		n, _ := io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, map[string]int64{"bytes": n, "contentLength": r.ContentLength})
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		d.record(r)
		_, _ = io.WriteString(w, "remoted_up 1\n")
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		close(d.release)
		_ = srv.Close()
	})
	return d
}

// clock is a settable time source for session expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type harness struct {
	daemon *fakeDaemon
	srv    *httptest.Server
	clock  *clock
	web    *Server
	// preview serves web's PreviewHandler on http://*.localhost:<port>.
	preview *httptest.Server
}

func testHash(t testing.TB, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func newHarness(t *testing.T, tls bool) *harness {
	t.Helper()
	d := startFakeDaemon(t)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, pport, _ := net.SplitHostPort(pln.Addr().String())
	s, err := New(Options{
		Socket:     d.socket,
		Users:      []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}, {Name: "bob", PasswordHash: testHash(t, "bobpw")}},
		SessionTTL: time.Hour,
		Secure:     tls,
		Now:        clk.now,
		PreviewURL: "http://*.localhost:" + pport,
	})
	if err != nil {
		t.Fatal(err)
	}
	ps := httptest.NewUnstartedServer(s.PreviewHandler())
	ps.Listener.Close()
	ps.Listener = pln
	ps.Start()
	t.Cleanup(ps.Close)
	var hs *httptest.Server
	if tls {
		hs = httptest.NewTLSServer(s)
	} else {
		hs = httptest.NewServer(s)
	}
	t.Cleanup(hs.Close)
	return &harness{daemon: d, srv: hs, clock: clk, web: s, preview: ps}
}

// fakeProjectID is the fake daemon's id of project name.
func fakeProjectID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:8])
}

// client returns an HTTP client with a cookie jar that does not follow redirects.
func (h *harness) client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := h.srv.Client()
	c2 := *c
	c2.Jar = jar
	tr := c.Transport.(*http.Transport).Clone()
	var preview string
	if h.preview != nil {
		preview = h.preview.Listener.Addr().String()
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); preview != "" && strings.HasSuffix(host, ".localhost") {
			addr = preview // the preview origins' wildcard name
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	c2.Transport = tr
	c2.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c2
}

func (h *harness) login(t *testing.T, c *http.Client, user, pw string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/login", strings.NewReader(url.Values{"username": {user}, "password": {pw}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.srv.URL)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (h *harness) loggedIn(t *testing.T) *http.Client {
	t.Helper()
	c := h.client(t)
	if resp := h.login(t, c, testUser, testPassword); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d, want 303", resp.StatusCode)
	}
	return c
}

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	return do(t, c, http.MethodGet, u, "", hdr)
}

func do(t *testing.T, c *http.Client, method, u, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func decodeError(t *testing.T, b []byte) api.ErrorBody {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("body is not an error envelope: %v: %s", err, b)
	}
	return e.Error
}

func TestLogin(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		name, user, pw string
		want           int
	}{
		{"right password", testUser, testPassword, http.StatusSeeOther},
		{"wrong password", testUser, "nope", http.StatusUnauthorized},
		{"unknown user", "mallory", testPassword, http.StatusUnauthorized},
		{"empty fields", "", "", http.StatusUnauthorized},
		{"over-long password", testUser, strings.Repeat("x", 100), http.StatusUnauthorized},
	}
	var bodies []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.client(t)
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/login", strings.NewReader(url.Values{"username": {tt.user}, "password": {tt.pw}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusUnauthorized {
				bodies = append(bodies, string(b))
				if !strings.Contains(string(b), "invalid username or password") {
					t.Errorf("401 page does not say %q", "invalid username or password")
				}
				if len(resp.Cookies()) != 0 {
					t.Errorf("failed login set cookies %v", resp.Cookies())
				}
			} else if loc := resp.Header.Get("Location"); loc != "/" {
				t.Errorf("redirect to %q, want /", loc)
			}
		})
	}
	t.Run("failures are indistinguishable", func(t *testing.T) {
		for _, b := range bodies[1:] {
			if b != bodies[0] {
				t.Fatalf("401 bodies differ between wrong user and wrong password:\n%s\n---\n%s", bodies[0], b)
			}
		}
	})
	t.Run("json client", func(t *testing.T) {
		h := newHarness(t, false) // a fresh per-address rate limit
		resp, b := do(t, h.client(t), http.MethodPost, h.srv.URL+"/login", "username=bob&password=x",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
		if resp.StatusCode != http.StatusUnauthorized || decodeError(t, b).Code != api.CodeUnauthorized {
			t.Fatalf("status %d body %s", resp.StatusCode, b)
		}
	})
}

// TestCookieFlags: the session cookie is remote_session on http and
// __Host-remote_session (Secure, Path=/, no Domain: no other host, a
// preview included, can set it) on https.
func TestCookieFlags(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) {
			h := newHarness(t, tls)
			resp := h.login(t, h.client(t), testUser, testPassword)
			name := map[bool]string{false: "remote_session", true: "__Host-remote_session"}[tls]
			var c *http.Cookie
			for _, k := range resp.Cookies() {
				if k.Name == name {
					c = k
				}
			}
			if c == nil || len(resp.Cookies()) != 1 || c.Domain != "" {
				t.Fatalf("no host-only %s cookie alone in %v", name, resp.Header["Set-Cookie"])
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure != tls {
				t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Secure=%v", c, tls)
			}
			if n := len(c.Value); n < 43 { // 32 bytes, base64url
				t.Errorf("session token has %d characters, want >= 43", n)
			}
		})
	}
}

func TestLogout(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	if resp, _ := get(t, c, h.srv.URL+"/v1/echo", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("before logout: %d", resp.StatusCode)
	}
	// Keep the token to prove the server forgets it, not only the browser.
	u, _ := url.Parse(h.srv.URL)
	token := c.Jar.Cookies(u)[0].Value
	resp, _ := do(t, c, http.MethodPost, h.srv.URL+"/logout", "", map[string]string{"Origin": h.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	replay := h.client(t)
	replay.Jar.SetCookies(u, []*http.Cookie{{Name: SessionCookie, Value: token}})
	resp, b := get(t, replay, h.srv.URL+"/v1/echo", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("old token after logout: %d %s", resp.StatusCode, b)
	}
	if resp, _ := get(t, h.client(t), h.srv.URL+"/logout", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /logout: %d, want 405", resp.StatusCode)
	}
}

func TestExpiredSession(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	h.clock.add(59 * time.Minute)
	if resp, _ := get(t, c, h.srv.URL+"/v1/echo", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("before expiry: %d", resp.StatusCode)
	}
	h.clock.add(time.Minute)
	resp, b := get(t, c, h.srv.URL+"/v1/echo", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after expiry: %d %s", resp.StatusCode, b)
	}
	if resp, _ := get(t, c, h.srv.URL+"/", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("page after expiry: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestHeaderStripping(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	resp, b := get(t, c, h.srv.URL+"/v1/echo", map[string]string{
		HeaderUser:         "root",
		"Authorization":    "Bearer stolen",
		"Origin":           h.srv.URL,
		api.HeaderFrontend: "forged",
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	got := h.daemon.last(t)
	want := seen{User: testUser, Frontend: api.FrontendRemoteWeb, Path: "/v1/echo"}
	if got != want {
		t.Errorf("daemon saw %+v, want %+v", got, want)
	}
	if sc := resp.Header.Get("Set-Cookie"); sc != "" {
		t.Errorf("daemon's Set-Cookie reached the browser: %q", sc)
	}
}

func TestAPIUnauthorized(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{"/v1/echo", "/v1/chats", "/ws/chat/abcdef012345"} {
		t.Run(path, func(t *testing.T) {
			resp, b := get(t, h.client(t), h.srv.URL+path, map[string]string{HeaderUser: testUser})
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if e := decodeError(t, b); e.Code != api.CodeUnauthorized || e.Message == "" {
				t.Errorf("error %+v", e)
			}
		})
	}
	if n := h.daemon.count(); n != 0 {
		t.Errorf("daemon saw %d unauthenticated requests", n)
	}
	t.Run("html page", func(t *testing.T) {
		resp, _ := get(t, h.client(t), h.srv.URL+"/", nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Fatalf("GET / unauthenticated: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		resp, b := get(t, h.client(t), h.srv.URL+"/login", nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `name="password"`) {
			t.Fatalf("GET /login: %d", resp.StatusCode)
		}
	})
}

func TestCrossOrigin(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	tests := []struct {
		name, method, path string
		hdr                map[string]string
		want               int
	}{
		{"foreign origin POST", http.MethodPost, "/v1/echo", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"null origin POST", http.MethodPost, "/v1/echo", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"cross-site fetch metadata DELETE", http.MethodDelete, "/v1/echo", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same-site sibling PUT", http.MethodPut, "/v1/echo", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"scheme mismatch POST", http.MethodPost, "/v1/echo", map[string]string{"Origin": strings.Replace(h.srv.URL, "http:", "https:", 1)}, http.StatusForbidden},
		{"same origin POST", http.MethodPost, "/v1/echo", map[string]string{"Origin": h.srv.URL}, http.StatusOK},
		{"form POST under no-referrer", http.MethodPost, "/v1/echo", map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"fetch metadata outranks a same-looking Origin", http.MethodPost, "/v1/echo", map[string]string{"Origin": h.srv.URL, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"non-browser POST", http.MethodPost, "/v1/echo", nil, http.StatusOK},
		{"foreign origin GET is read-only", http.MethodGet, "/v1/echo", map[string]string{"Origin": "https://evil.example"}, http.StatusOK},
		{"foreign origin logout", http.MethodPost, "/logout", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"foreign origin login", http.MethodPost, "/login", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.daemon.count()
			resp, b := do(t, c, tt.method, h.srv.URL+tt.path, "", tt.hdr)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if tt.want == http.StatusForbidden {
				if e := decodeError(t, b); e.Code != api.CodeForbidden {
					t.Errorf("error %+v", e)
				}
				if h.daemon.count() != before {
					t.Error("a refused request reached the daemon")
				}
			}
		})
	}
}

func wsDial(t *testing.T, h *harness, c *http.Client, origin string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	u, _ := url.Parse(h.srv.URL)
	hdr := http.Header{}
	if origin != "" {
		hdr.Set("Origin", origin)
	}
	d := websocket.Dialer{Jar: c.Jar}
	return d.Dial("ws://"+u.Host+"/ws/chat/abcdef012345?since=0", hdr)
}

func TestWebSocketCrossOriginRefused(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	for _, origin := range []string{"http://evil.example", "null", "http://127.0.0.1.evil.example"} {
		t.Run(origin, func(t *testing.T) {
			conn, resp, err := wsDial(t, h, c, origin)
			if err == nil {
				conn.Close()
				t.Fatal("cross-origin WebSocket was accepted")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("want 403, got %v %v", resp, err)
			}
		})
	}
	if n := h.daemon.count(); n != 0 {
		t.Errorf("daemon saw %d refused WebSocket requests", n)
	}
}

func TestWebSocketPassthrough(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	conn, _, err := wsDial(t, h, c, h.srv.URL)
	if err != nil {
		t.Fatalf("dial through remote-web: %v", err)
	}
	defer conn.Close()
	var ev api.Event
	if err := conn.ReadJSON(&ev); err != nil || ev.Type != api.EventSync {
		t.Fatalf("first frame %+v %v, want sync", ev, err)
	}
	for _, tt := range []struct {
		name string
		mt   int
		data string
	}{
		{"text", websocket.TextMessage, `{"type":"prompt","text":"hi"}`},
		{"binary", websocket.BinaryMessage, "\x00\x01\xffbytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := conn.WriteMessage(tt.mt, []byte(tt.data)); err != nil {
				t.Fatal(err)
			}
			mt, b, err := conn.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if mt != tt.mt || string(b) != "echo:"+tt.data {
				t.Fatalf("got %d %q", mt, b)
			}
		})
	}
	if got := h.daemon.last(t); got.User != testUser || got.Origin != "" || got.Cookie != "" {
		t.Errorf("daemon saw %+v on the upgrade", got)
	}
}

func TestNDJSONStreaming(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/stream", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	// The daemon holds the second line until the first has arrived here: a
	// buffering proxy would deadlock this test instead of passing it.
	line, err := r.ReadString('\n')
	if err != nil || line != `{"n":1}`+"\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	h.daemon.release <- struct{}{}
	line, err = r.ReadString('\n')
	if err != nil || line != `{"n":2}`+"\n" {
		t.Fatalf("second line %q %v", line, err)
	}
}

func TestDaemonDown(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.sock")
	s, err := New(Options{Socket: missing, Users: []User{{Name: testUser, PasswordHash: testHash(t, testPassword)}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	h := &harness{srv: hs}
	c := h.loggedIn(t)
	for _, path := range []string{"/v1/info", "/ws/chat/abcdef012345"} {
		t.Run(path, func(t *testing.T) {
			resp, b := get(t, c, hs.URL+path, nil)
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502: %s", resp.StatusCode, b)
			}
			e := decodeError(t, b)
			want := "remote-web: daemon not reachable at " + missing + ": "
			if e.Code != api.CodeUnavailable || !strings.HasPrefix(e.Message, want) {
				t.Errorf("error %+v, want code %s and message starting %q", e, api.CodeUnavailable, want)
			}
		})
	}
}

func TestOnlyAPIIsProxied(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	for _, tt := range []struct {
		path string
		want int
	}{
		{"/metrics", http.StatusNotFound},
		{"/v1", http.StatusNotFound},
		{"/ws", http.StatusNotFound},
		{"/debug/pprof/", http.StatusNotFound},
		{"/v2/x", http.StatusNotFound},
		{"/v1/../metrics", http.StatusBadRequest},
		{"/v1/%2e%2e/metrics", http.StatusBadRequest},
		{"/ws/chat/..%2f..%2fmetrics", http.StatusBadRequest},
		{"/v1//metrics", http.StatusBadRequest},
	} {
		t.Run(tt.path, func(t *testing.T) {
			resp, _ := get(t, c, h.srv.URL+tt.path, nil)
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	if n := h.daemon.count(); n != 0 {
		t.Errorf("daemon saw %d requests outside /v1 and /ws", n)
	}
}

func TestLoginRateLimit(t *testing.T) {
	h := newHarness(t, false)
	c := h.client(t)
	for i := range DefaultLoginLimit {
		if resp := h.login(t, c, testUser, "wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	t.Run("per user and address", func(t *testing.T) {
		resp := h.login(t, c, testUser, testPassword)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("6th attempt: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	})
	t.Run("window resets", func(t *testing.T) {
		h.clock.add(DefaultLoginWindow)
		if resp := h.login(t, c, testUser, testPassword); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("after the window: %d", resp.StatusCode)
		}
	})
	t.Run("per user across addresses", func(t *testing.T) {
		l := newLimiter(2, time.Minute, 10, h.clock.now)
		for i, want := range []bool{true, true, false} {
			if ok, _ := l.allow("bob"); ok != want {
				t.Fatalf("attempt %d: allowed=%v", i+1, ok)
			}
		}
		if ok, _ := l.allow("carol"); !ok {
			t.Fatal("another key was limited")
		}
	})
	t.Run("table full evicts the least recently used", func(t *testing.T) {
		l := newLimiter(1, time.Minute, 2, h.clock.now)
		l.allow("a")
		l.allow("b")
		l.allow("a") // a is now the most recently used, and over its limit
		if ok, _ := l.allow("c"); !ok {
			t.Fatal("a full table refused a new key")
		}
		if ok, _ := l.allow("a"); ok {
			t.Fatal("the recently used key was evicted")
		}
		if ok, _ := l.allow("b"); !ok || l.size() != 2 {
			t.Fatalf("b was not evicted (allowed %v), or the table holds %d keys", ok, l.size())
		}
	})
}

func TestSecurityHeaders(t *testing.T) {
	h := newHarness(t, false)
	c := h.loggedIn(t)
	for _, path := range []string{"/login", "/", "/static/app.js", "/v1/echo", "/nope"} {
		t.Run(path, func(t *testing.T) {
			resp, _ := get(t, c, h.srv.URL+path, nil)
			want := map[string]string{
				"Content-Security-Policy": ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "same-origin",
				"X-Frame-Options":         "DENY",
			}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe-inline'; script") || !strings.Contains(ContentSecurityPolicy, "script-src 'self';") ||
		!strings.Contains(ContentSecurityPolicy, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", ContentSecurityPolicy)
	}
}

var inlineHandler = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)

func TestPageHasNoInlineScript(t *testing.T) {
	for _, name := range []string{"static/index.html", "static/login.html"} {
		b, err := staticFS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for i := strings.Index(s, "<script"); i >= 0; i = strings.Index(s, "<script") {
			end := strings.Index(s[i:], ">")
			if !strings.Contains(s[i:i+end], "src=") {
				t.Errorf("%s has an inline <script>", name)
			}
			s = s[i+end:]
		}
		if inlineHandler.Match(b) {
			t.Errorf("%s has an inline event handler", name)
		}
	}
}

func TestNewRejectsBadUsers(t *testing.T) {
	good := testHash(t, "pw")
	tests := []struct {
		name  string
		users []User
	}{
		{"not bcrypt", []User{{Name: "a", PasswordHash: "plaintext"}}},
		{"empty name", []User{{Name: "", PasswordHash: good}}},
		{"name the daemon refuses", []User{{Name: "Jane Doe", PasswordHash: good}}},
		{"duplicate", []User{{Name: "a", PasswordHash: good}, {Name: "a", PasswordHash: good}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{Socket: "/x", Users: tt.users})
			if !errors.Is(err, ErrBadUser) {
				t.Fatalf("err %v, want ErrBadUser", err)
			}
			if strings.Contains(err.Error(), good) {
				t.Error("error shows the password hash")
			}
		})
	}
	if _, err := New(Options{Users: nil}); err == nil {
		t.Error("empty socket accepted")
	}
}

func TestHashPassword(t *testing.T) {
	h, err := HashPassword([]byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword([]byte(h), []byte("s3cret")) != nil {
		t.Fatal("hash does not verify")
	}
	for _, bad := range []string{"", strings.Repeat("p", 73)} {
		if _, err := HashPassword([]byte(bad)); err == nil {
			t.Errorf("HashPassword(%d bytes) accepted", len(bad))
		}
	}
}

// TestSessionTableBounded: each user holds at most max live sessions; a
// user at the limit does not stop another user's login, and an expired
// session frees its place.
func TestSessionTableBounded(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	s := newSessions(time.Minute, 2, clk.now)
	for range 2 {
		if _, _, err := s.create("a"); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.create("a")
	if !errors.Is(err, ErrUserLimit) || err.Error() != "too many login sessions for this user (limit 2): log out in another browser, or wait until a session ends" {
		t.Fatalf("third session: %v", err)
	}
	if _, _, err := s.create("b"); err != nil {
		t.Fatalf("another user at a's limit: %v", err)
	}
	clk.add(time.Minute)
	if _, _, err := s.create("a"); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}
