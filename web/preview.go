package web

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/lazyre"
)

// PreviewCookie is a preview origin's cookie ("__Host-remote_preview"
// when previews are served over https): it names one preview session (a
// user, a project and a port) on that project's and port's origin only.
// The page's session cookie is never accepted there, nor this one on the
// page.
const PreviewCookie = "remote_preview"

// previewEntryCookie binds an entry to the browser that started it: set
// on the preview origin at the entry's first step, required at its last.
const previewEntryCookie = "remote_preview_entry"

// Preview defaults.
const (
	// DefaultPreviewTokenTTL is how long a token minted by the page may
	// be used to enter a preview (once).
	DefaultPreviewTokenTTL = time.Minute
	// DefaultMaxPreviewTokens is how many unused preview tokens one user
	// may hold; DefaultMaxPreviewSessions how many preview sessions.
	DefaultMaxPreviewTokens   = 16
	DefaultMaxPreviewSessions = 64
	// The entry's steps: enter (preview origin) → confirm (the page's
	// origin, with the page's session) → session (preview origin, with
	// the entry cookie).
	previewEnterPath   = "/.remote-preview/enter"
	previewSessionPath = "/.remote-preview/session"
	previewConfirmPath = "/preview/confirm"
)

// previewGrant is a token's or a preview session's content.
type previewGrant struct {
	user, project string
	id            string // the project's id, part of its preview host name
	port          int
	expires       time.Time
	// until is when the page session that minted the token ends; a
	// preview session never outlives it.
	until time.Time
	// session is the SHA-256 of the page session that minted the token,
	// page the page's origin as that browser used it.
	session [32]byte
	page    string
	// entry is the SHA-256 of the entry cookie (zero until the entry's
	// first step); confirmed is set when the page saw the same session.
	entry     [32]byte
	confirmed bool
}

// grants is a table of previewGrants keyed by the SHA-256 of their random
// token (the token itself is never kept), at most max live ones per user.
type grants struct {
	mu         sync.Mutex
	what, hint string
	max        int
	m          map[[32]byte]*previewGrant
	perUser    map[string]int
	now        func() time.Time
}

func newGrants(what, hint string, maxPerUser int, now func() time.Time) *grants {
	return &grants{what: what, hint: hint, max: maxPerUser, m: map[[32]byte]*previewGrant{}, perUser: map[string]int{}, now: now}
}

// add stores v under a new token. A user at the limit gets a
// *LimitError (after their expired grants are dropped).
func (g *grants) add(v previewGrant) (string, error) {
	token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perUser[v.user] >= g.max {
		now := g.now()
		oldest := time.Time{}
		for k, old := range g.m {
			if old.user != v.user {
				continue
			}
			if !now.Before(old.expires) {
				g.deleteLocked(k)
			} else if oldest.IsZero() || old.expires.Before(oldest) {
				oldest = old.expires
			}
		}
		if g.perUser[v.user] >= g.max {
			return "", &LimitError{What: g.what, Hint: g.hint, Limit: g.max, Wait: oldest.Sub(now)}
		}
	}
	g.m[sha256.Sum256([]byte(token))] = &v
	g.perUser[v.user]++
	return token, nil
}

func (g *grants) deleteLocked(k [32]byte) {
	if v, ok := g.m[k]; ok {
		delete(g.m, k)
		if g.perUser[v.user]--; g.perUser[v.user] <= 0 {
			delete(g.perUser, v.user)
		}
	}
}

// use calls fn with token's live grant under the table's lock; the grant
// is removed when fn says so. It reports whether token was live.
func (g *grants) use(token string, fn func(*previewGrant) (remove bool)) bool {
	if token == "" {
		return false
	}
	k := sha256.Sum256([]byte(token))
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.m[k]
	if !ok {
		return false
	}
	if !g.now().Before(v.expires) {
		g.deleteLocked(k)
		return false
	}
	if fn(v) {
		g.deleteLocked(k)
	}
	return true
}

// get returns a copy of token's live grant.
func (g *grants) get(token string) (previewGrant, bool) {
	var out previewGrant
	ok := g.use(token, func(v *previewGrant) bool { out = *v; return false })
	return out, ok
}

// dropUser removes every grant of user.
func (g *grants) dropUser(user string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range g.m {
		if v.user == user {
			g.deleteLocked(k)
		}
	}
}

var (
	previewPathRE  = lazyre.New(`^/preview/([a-z0-9](?:[a-z0-9-]{0,54}[a-z0-9])?)/([1-9][0-9]{0,4})/?$`)
	previewLabelRE = lazyre.New(`^([1-9][0-9]{0,4})-([0-9a-f]{16})$`)
	daemonPortsRE  = lazyre.New(`^/v1/projects/[^/]+/ports(/|$)`)
	// previewCookies are Remote's cookie names: never sent to an app, nor
	// set by one.
	previewCookies = []string{
		SessionCookie, SecureSessionCookie, PreviewCookie, hostPrefix + PreviewCookie,
		previewEntryCookie, hostPrefix + previewEntryCookie,
	}
)

// hostPrefix makes a cookie that only its own https origin can set.
const hostPrefix = "__Host-"

// previewsOn reports whether previews are configured.
func (s *Server) previewsOn() bool { return s.previewDomain != "" }

// previewOriginFor is the origin of project id's port: one per project
// and port, so no app shares cookies, storage or service workers with
// another project's.
func (s *Server) previewOriginFor(id string, port int) string {
	return s.previewScheme + "://" + strconv.Itoa(port) + "-" + id + "." + s.previewDomain + s.previewPort
}

// previewTarget parses a preview request's Host, <port>-<id>.<domain>.
func (s *Server) previewTarget(hostport string) (id string, port int, ok bool) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	label, domain, _ := strings.Cut(normalHost(host), ".")
	m := previewLabelRE.FindStringSubmatch(label)
	if m == nil || domain != s.previewDomain {
		return "", 0, false
	}
	port, _ = strconv.Atoi(m[1])
	return m[2], port, port <= 65535
}

// previewCookieName is name with the __Host- prefix on https previews.
func (s *Server) previewCookieName(name string) string {
	if s.previewScheme == "https" {
		return hostPrefix + name
	}
	return name
}

// setPreviewCookie sets (maxAge > 0) or deletes a cookie of the preview
// origin: host-only, HttpOnly, Path=/.
func (s *Server) setPreviewCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: s.previewCookieName(name), Value: value, Path: "/", MaxAge: int(maxAge / time.Second),
		HttpOnly: true, Secure: s.previewScheme == "https", SameSite: http.SameSiteLaxMode}
	if maxAge <= 0 {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// servePreviewStart serves GET /preview/{project}/{port} on the page's
// origin: for a logged-in user who owns the project and a port of it, it
// mints a one-use token valid for PreviewTokenTTL, bound to this login
// session, and sends the browser to the entry of that project's and
// port's preview origin. Only a navigation from the page itself may mint
// (fetch metadata or Origin): a preview cannot send the browser here.
func (s *Server) servePreviewStart(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !s.previewsOn() {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "previews are off: remote-web has no preview origin ([web] preview_listen)")
		return
	}
	m := previewPathRE.FindStringSubmatch(r.URL.Path)
	if m == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such preview: want /preview/{project}/{port}")
		return
	}
	sess, token, err := s.session(w, r)
	if err != nil {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	user := sess.user
	if !s.sameOrigin(r) {
		s.log.Warn("preview token refused: not asked by the page", "user", user, "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		writeError(w, http.StatusForbidden, api.CodeForbidden, "open previews from the Remote page")
		return
	}
	project, port := m[1], m[2]
	n, _ := strconv.Atoi(port)
	id, status, msg := s.ownsPort(r.Context(), user, project, n)
	if status != http.StatusOK {
		writeError(w, status, api.CodeNotFound, msg)
		return
	}
	now := s.opts.Now()
	ptoken, err := s.previewTokens.add(previewGrant{user: user, project: project, id: id, port: n,
		expires: now.Add(s.opts.PreviewTokenTTL), until: sess.expires,
		session: sha256.Sum256([]byte(token)), page: s.requestScheme(r) + "://" + r.Host})
	if err != nil {
		s.tooMany(w, err, user)
		return
	}
	s.log.Info("preview token minted", "user", user, "project", project, "port", n)
	http.Redirect(w, r, s.previewOriginFor(id, n)+previewEnterPath+"?token="+url.QueryEscape(ptoken), http.StatusSeeOther)
}

// tooMany answers a *LimitError with 429 and Retry-After.
func (s *Server) tooMany(w http.ResponseWriter, err error, user string) {
	var le *LimitError
	if !errors.As(err, &le) {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "try again later")
		return
	}
	s.log.Warn("per-user limit reached", "user", user, "what", le.What, "limit", le.Limit)
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((le.Wait+time.Second-1)/time.Second))))
	writeError(w, http.StatusTooManyRequests, codeRateLimited, le.Error())
}

// servePreviewConfirm serves GET /preview/confirm?token= on the page's
// origin, the entry's middle step: the browser carries the page session
// that minted the token, or the token is spent. A browser that did not
// send the session cookie (a SameSite=Strict cookie on a navigation that
// came through another site) is bounced once through a navigation of the
// page's own.
func (s *Server) servePreviewConfirm(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	token := r.URL.Query().Get("token")
	sess, stok, err := s.session(w, r)
	if err != nil {
		if r.URL.Query().Get("bounced") == "" {
			next := previewConfirmPath + "?token=" + url.QueryEscape(token) + "&bounced=1"
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = fmt.Fprintf(w, "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url=%s\"><title>Opening the preview</title>\n", htmlEscape(next))
			return
		}
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	hash := sha256.Sum256([]byte(stok))
	var next string
	s.previewTokens.use(token, func(g *previewGrant) bool {
		if g.entry == ([32]byte{}) || g.confirmed || g.session != hash || g.user != sess.user {
			return true // another browser's token, or a replay: spent
		}
		g.confirmed = true
		next = s.previewOriginFor(g.id, g.port) + previewSessionPath + "?token=" + url.QueryEscape(token)
		return false
	})
	if next == "" {
		s.log.Warn("preview entry refused: token of another session, used or expired", "user", sess.user)
		writeError(w, http.StatusForbidden, api.CodeForbidden, "this preview link was not opened by this browser's login session, or it was used or expired: open the preview from your Remote page")
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// ownsPort asks the daemon, as user, for project and checks that port is
// one of its ports; it returns the project's id.
func (s *Server) ownsPort(ctx context.Context, user, project string, port int) (string, int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://remoted/v1/projects/"+project, nil)
	req.Header.Set(HeaderUser, user)
	req.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
	resp, err := s.daemon.Do(req)
	if err != nil {
		s.log.Error("preview: daemon unreachable", "error", err)
		return "", http.StatusBadGateway, "the daemon is not reachable"
	}
	defer resp.Body.Close()
	var p api.Project
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&p) != nil || !previewLabelRE.MatchString("1-"+p.ID) {
		return "", http.StatusNotFound, fmt.Sprintf("no project %q of yours", project)
	}
	if !slices.Contains(p.Ports, port) {
		return "", http.StatusNotFound, fmt.Sprintf("port %d is not a port of project %q", port, project)
	}
	return p.ID, http.StatusOK, ""
}

// PreviewHandler serves the preview origins ([web] preview_listen; one
// host name per project and port under preview_url's domain): the entry
// that turns a token into a preview cookie for that origin, and every
// other request, with that cookie, is the user's project's port through
// the daemon (which checks ownership on each request). Nothing of the page
// is served here, the page's cookie is never accepted, and no service
// worker script is ever served.
func (s *Server) PreviewHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, port, ok := s.previewTarget(r.Host)
		if !s.previewsOn() || !ok {
			writeError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("host %q is not served here: previews are at <port>-<project id>.%s", r.Host, s.previewDomain))
			return
		}
		if _, tok := routineToken(r); tok {
			writeError(w, http.StatusForbidden, api.CodeForbidden, "a routine token only fires its routine, on the page's origin")
			return
		}
		if r.Header.Get("Service-Worker") != "" || r.Header.Get("Sec-Fetch-Dest") == "serviceworker" {
			// A worker would outlive the preview session and see every
			// later navigation to this origin, entries included.
			s.log.Warn("service worker script refused on a preview", "host", r.Host, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, api.CodeForbidden, "service workers are not allowed on previews")
			return
		}
		p := r.URL.Path
		if c := path.Clean(p); c != p && c+"/" != p {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "path is not in clean form: "+p)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), previewTargetKey{}, previewTarget{id, port}))
		s.preview.ServeHTTP(w, r)
	})
}

// servePreviewApp serves every preview-origin request but the entry:
// with a live preview cookie of this origin, the user's project's port.
func (s *Server) servePreviewApp(w http.ResponseWriter, r *http.Request) {
	t := r.Context().Value(previewTargetKey{}).(previewTarget)
	g, _, ok := s.previewSessionOf(r, t.id, t.port)
	if !ok {
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "no preview session: open the preview from the Remote page")
		return
	}
	if isWebSocket(r) && r.Header.Get("Origin") != s.previewOriginFor(t.id, t.port) {
		s.log.Warn("cross-origin preview websocket refused", "origin", r.Header.Get("Origin"), "user", g.user)
		writeError(w, http.StatusForbidden, api.CodeForbidden, "cross-origin websocket refused")
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), previewKey{}, g))
	s.previewProxy.ServeHTTP(w, r)
}

// previewTarget is the project id and port a preview request's Host
// names; PreviewHandler puts it in the request's context.
type previewTarget struct {
	id   string
	port int
}

type previewTargetKey struct{}

type previewKey struct{}

// previewSessionOf returns the live preview session, of this origin's
// project and port, that one of r's preview cookies names. Cookies of
// other origins (set for a parent domain) are passed over.
func (s *Server) previewSessionOf(r *http.Request, id string, port int) (previewGrant, string, bool) {
	name := s.previewCookieName(PreviewCookie)
	for _, c := range r.Cookies() {
		if c.Name != name {
			continue
		}
		if g, ok := s.previewSessions.get(c.Value); ok && g.id == id && g.port == port {
			return g, c.Value, true
		}
	}
	return previewGrant{}, "", false
}

// previewEnter is the entry's first step, on the preview origin: it ties
// the token (once, for this origin only) to a new entry cookie of this
// browser and sends the browser to the page's origin to confirm.
func (s *Server) previewEnter(w http.ResponseWriter, r *http.Request) {
	t := r.Context().Value(previewTargetKey{}).(previewTarget)
	id, port := t.id, t.port
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	token := r.URL.Query().Get("token")
	entry := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	var page string
	s.previewTokens.use(token, func(g *previewGrant) bool {
		if g.id != id || g.port != port || g.entry != ([32]byte{}) {
			return true // another origin's token, or a second entry: spent
		}
		g.entry, page = sha256.Sum256([]byte(entry)), g.page
		return false
	})
	if page == "" {
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "preview token unknown, used or expired: open the preview from the Remote page again")
		return
	}
	s.setPreviewCookie(w, previewEntryCookie, entry, s.opts.PreviewTokenTTL)
	http.Redirect(w, r, page+previewConfirmPath+"?token="+url.QueryEscape(token), http.StatusSeeOther)
}

// previewSession is the entry's last step, on the preview origin: a token
// the page confirmed, with this browser's entry cookie, becomes a preview
// session cookie (replacing this browser's older one for the origin). Any
// other use spends the token.
func (s *Server) previewSession(w http.ResponseWriter, r *http.Request) {
	t := r.Context().Value(previewTargetKey{}).(previewTarget)
	id, port := t.id, t.port
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	var entries [][32]byte
	for _, c := range r.Cookies() {
		if c.Name == s.previewCookieName(previewEntryCookie) {
			entries = append(entries, sha256.Sum256([]byte(c.Value)))
		}
	}
	var g previewGrant
	ok := false
	s.previewTokens.use(r.URL.Query().Get("token"), func(t *previewGrant) bool {
		ok = t.confirmed && t.id == id && t.port == port && slices.Contains(entries, t.entry)
		g = *t
		return true
	})
	if !ok {
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "preview token unknown, used, expired or started in another browser: open the preview from the Remote page again")
		return
	}
	if old, oldToken, ok := s.previewSessionOf(r, id, port); ok && old.user == g.user {
		s.previewSessions.use(oldToken, func(*previewGrant) bool { return true })
	}
	now := s.opts.Now()
	g.expires, g.entry, g.confirmed = now.Add(s.opts.SessionTTL), [32]byte{}, false
	if g.until.Before(g.expires) {
		g.expires = g.until
	}
	token, err := s.previewSessions.add(g)
	if err != nil {
		s.tooMany(w, err, g.user)
		return
	}
	s.setPreviewCookie(w, previewEntryCookie, "", 0)
	s.setPreviewCookie(w, PreviewCookie, token, g.expires.Sub(now))
	s.log.Info("preview opened", "user", g.user, "project", g.project, "port", g.port)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// newPreviewProxy proxies a preview request to the daemon's port route of
// its grant's project, as its user. Remote's cookies never reach the app,
// and the app cannot set them.
func newPreviewProxy(socket string, log hclog.Logger) http.Handler {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			g := pr.In.Context().Value(previewKey{}).(previewGrant)
			prefix := "/v1/projects/" + g.project + "/ports/" + strconv.Itoa(g.port)
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "remoted", "remoted"
			pr.Out.URL.Path = prefix + pr.In.URL.Path
			pr.Out.URL.RawPath = prefix + pr.In.URL.EscapedPath()
			for _, h := range []string{HeaderUser, api.HeaderFrontend, "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				pr.Out.Header.Del(h)
			}
			stripCookies(pr.Out.Header)
			pr.Out.Header.Set(HeaderUser, g.user)
			pr.Out.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
		},
		Transport:     tr,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			// A response cached for one preview session must not be shown
			// in another.
			resp.Header.Add("Vary", "Cookie")
			kept := resp.Header.Values("Set-Cookie")[:0:0]
			for _, c := range resp.Header.Values("Set-Cookie") {
				name, _, _ := strings.Cut(c, "=")
				if !slices.Contains(previewCookies, strings.TrimSpace(name)) {
					kept = append(kept, c)
				}
			}
			resp.Header.Del("Set-Cookie")
			resp.Header.Del("Service-Worker-Allowed")
			for _, c := range kept {
				resp.Header.Add("Set-Cookie", c)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			log.Error("preview proxy to daemon failed", "path", r.URL.Path, "error", err)
			writeError(w, http.StatusBadGateway, api.CodeUnavailable, "remote-web: "+ErrDaemonUnreachable.Error())
		},
	}
}

// stripCookies removes Remote's own cookies from a request's Cookie
// header; the app's cookies go on.
func stripCookies(h http.Header) {
	var kept []string
	for _, line := range h.Values("Cookie") {
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if strings.TrimSpace(part) != "" && !slices.Contains(previewCookies, name) {
				kept = append(kept, strings.TrimSpace(part))
			}
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// isDaemonPortsPath reports whether p is the daemon's preview route,
// which the page's origin never serves.
func isDaemonPortsPath(p string) bool { return daemonPortsRE.MatchString(p) }

// setupPreviews checks PreviewURL (a wildcard origin) and makes the
// preview tables.
func (s *Server) setupPreviews() error {
	if s.opts.PreviewTokenTTL <= 0 {
		s.opts.PreviewTokenTTL = DefaultPreviewTokenTTL
	}
	if s.opts.MaxPreviewTokens <= 0 {
		s.opts.MaxPreviewTokens = DefaultMaxPreviewTokens
	}
	if s.opts.MaxPreviewSessions <= 0 {
		s.opts.MaxPreviewSessions = DefaultMaxPreviewSessions
	}
	s.previewTokens = newGrants("unused preview links", "open them, or wait a minute until they expire", s.opts.MaxPreviewTokens, s.opts.Now)
	s.previewSessions = newGrants("open previews", "log out of Remote to close them, or wait until one ends", s.opts.MaxPreviewSessions, s.opts.Now)
	if s.opts.PreviewURL == "" {
		return nil
	}
	u, err := url.Parse(s.opts.PreviewURL)
	var domain string
	wild := false
	if err == nil {
		domain, wild = strings.CutPrefix(normalHost(u.Hostname()), "*.")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !wild || domain == "" || strings.ContainsAny(domain, "*:/") ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("web: preview URL %q: want a wildcard origin like https://*.preview.example.net", s.opts.PreviewURL)
	}
	if !s.opts.Secure {
		if host, parent := sameSiteHost(s.opts.AllowedHosts, domain); host != "" {
			return fmt.Errorf("web: preview URL %q shares the parent domain %q with the page's host %q while the session cookie is a plain-http one ([web] cookie_secure off): "+
				"an app in a preview could set cookies for %q (and evict the page's own by filling the browser's jar), handing the page another user's session; "+
				"serve previews on a registrable domain of their own (the page at %s, previews at e.g. http://*.%s), or serve the page over https with cookie_secure, whose __Host- cookie no other host can set",
				s.opts.PreviewURL, parent, host, parent, host, strings.Replace(parent, ".", "-preview.", 1))
		}
	}
	s.previewScheme, s.previewDomain = u.Scheme, domain
	if p := u.Port(); p != "" {
		s.previewPort = ":" + p
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	s.daemon = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", s.opts.Socket)
		},
	}}
	s.previewProxy = newPreviewProxy(s.opts.Socket, s.log.Named("preview"))
	return nil
}

// sameSiteHost returns the first of the page's host names that a preview
// host under previewDomain could set cookies for, and the parent domain
// they share; "" when none. A browser lets a host set a cookie for any of
// its parent domains that is not a public suffix, which every host under
// it then receives. remote-web carries no Public Suffix List, so it
// stands in the last two labels for the registrable domain: two names
// sharing a registrable domain always share those (previews under
// example.co.uk and a page under another name of co.uk are refused too,
// the safe side). IP addresses and one-label names (localhost) never get
// another host's cookies.
func sameSiteHost(hosts []string, previewDomain string) (host, parent string) {
	preview := lastTwoLabels("x." + previewDomain)
	for _, h := range hosts {
		h = normalHost(h)
		if _, err := netip.ParseAddr(h); err == nil {
			continue
		}
		if p := lastTwoLabels(h); p != "" && p == preview {
			return h, p
		}
	}
	return "", ""
}

// lastTwoLabels is name's last two labels ("example.com" of
// "remote.example.com"), or "" for a one-label name.
func lastTwoLabels(name string) string {
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return ""
	}
	return strings.Join(labels[len(labels)-2:], ".")
}
