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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
)

// PreviewCookie is the preview origin's cookie: it names one preview
// session (a user, a project and a port). The page's session cookie is
// never accepted there, nor this one on the page.
const PreviewCookie = "remote_preview"

// Preview defaults.
const (
	// DefaultPreviewTokenTTL is how long a token minted by the page may
	// be exchanged on the preview origin (once).
	DefaultPreviewTokenTTL = time.Minute
	// previewEnterPath is the preview origin's one path of its own: it
	// exchanges a token for the preview cookie.
	previewEnterPath = "/.remote-preview/enter"
	maxPreviewGrants = 10000
)

// previewGrant is a token's or a preview session's content.
type previewGrant struct {
	user, project string
	port          int
	expires       time.Time
}

// grants is a bounded table of previewGrants keyed by the SHA-256 of
// their random token (the token itself is never kept).
type grants struct {
	mu  sync.Mutex
	m   map[[32]byte]previewGrant
	now func() time.Time
}

func newGrants(now func() time.Time) *grants {
	return &grants{m: map[[32]byte]previewGrant{}, now: now}
}

func (g *grants) add(v previewGrant) (string, error) {
	token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.m) >= maxPreviewGrants {
		now := g.now()
		for k, old := range g.m {
			if !now.Before(old.expires) {
				delete(g.m, k)
			}
		}
		if len(g.m) >= maxPreviewGrants {
			return "", fmt.Errorf("%w (limit %d)", ErrTooManySessions, maxPreviewGrants)
		}
	}
	g.m[sha256.Sum256([]byte(token))] = v
	return token, nil
}

// get returns the live grant of token; take also removes it (a token is
// used once).
func (g *grants) get(token string, take bool) (previewGrant, bool) {
	if token == "" {
		return previewGrant{}, false
	}
	k := sha256.Sum256([]byte(token))
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.m[k]
	if ok && (take || !g.now().Before(v.expires)) {
		delete(g.m, k)
	}
	return v, ok && g.now().Before(v.expires)
}

// dropUser removes every grant of user.
func (g *grants) dropUser(user string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range g.m {
		if v.user == user {
			delete(g.m, k)
		}
	}
}

var (
	previewPathRE  = regexp.MustCompile(`^/preview/([a-z0-9](?:[a-z0-9-]{0,54}[a-z0-9])?)/([1-9][0-9]{0,4})/?$`)
	daemonPortsRE  = regexp.MustCompile(`^/v1/projects/[^/]+/ports(/|$)`)
	previewCookies = []string{SessionCookie, PreviewCookie}
)

// previewsOn reports whether a preview origin is configured.
func (s *Server) previewsOn() bool { return s.previewOrigin != "" }

// servePreviewStart serves GET /preview/{project}/{port} on the page's
// origin: for a logged-in user who owns the project and a port of it, it
// mints a one-use token valid for PreviewTokenTTL and sends the browser
// to the preview origin with it. Only a navigation from the page itself
// may mint (fetch metadata): a preview cannot send the browser here to
// switch it to another project.
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
	user, err := s.user(r)
	if err != nil {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	if !s.sameOrigin(r) {
		s.log.Warn("preview token refused: not asked by the page", "user", user, "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		writeError(w, http.StatusForbidden, api.CodeForbidden, "open previews from the Remote page")
		return
	}
	project, port := m[1], m[2]
	n, _ := strconv.Atoi(port)
	if status, msg := s.ownsPort(r.Context(), user, project, n); status != http.StatusOK {
		writeError(w, status, api.CodeNotFound, msg)
		return
	}
	token, err := s.previewTokens.add(previewGrant{user: user, project: project, port: n, expires: s.opts.Now().Add(s.opts.PreviewTokenTTL)})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "too many previews open; try again later")
		return
	}
	s.log.Info("preview token minted", "user", user, "project", project, "port", n)
	http.Redirect(w, r, s.previewOrigin+previewEnterPath+"?token="+url.QueryEscape(token), http.StatusSeeOther)
}

// ownsPort asks the daemon, as user, for project and checks that port is
// one of its ports.
func (s *Server) ownsPort(ctx context.Context, user, project string, port int) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://remoted/v1/projects/"+project, nil)
	req.Header.Set(HeaderUser, user)
	req.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
	resp, err := s.daemon.Do(req)
	if err != nil {
		s.log.Error("preview: daemon unreachable", "error", err)
		return http.StatusBadGateway, "the daemon is not reachable"
	}
	defer resp.Body.Close()
	var p api.Project
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&p) != nil {
		return http.StatusNotFound, fmt.Sprintf("no project %q of yours", project)
	}
	if !slices.Contains(p.Ports, port) {
		return http.StatusNotFound, fmt.Sprintf("port %d is not a port of project %q", port, project)
	}
	return http.StatusOK, ""
}

// PreviewHandler serves the preview origin ([web] preview_listen): the
// one-use token from the page becomes a preview cookie for this origin,
// and every other request, with that cookie, is the user's project's port
// through the daemon (which checks ownership on each request). Nothing of
// the page is served here and the page's cookie is never accepted.
func (s *Server) PreviewHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.previewHostAllowed(r.Host) {
			writeError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("host %q is not served here", r.Host))
			return
		}
		p := r.URL.Path
		if c := path.Clean(p); c != p && c+"/" != p {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "path is not in clean form: "+p)
			return
		}
		s.preview.ServeHTTP(w, r)
	})
}

// servePreviewApp serves every preview-origin request but the token
// exchange: with a live preview cookie, the user's project's port.
func (s *Server) servePreviewApp(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(PreviewCookie)
	var g previewGrant
	ok := false
	if err == nil {
		g, ok = s.previewSessions.get(c.Value, false)
	}
	if !ok {
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "no preview session: open the preview from the Remote page")
		return
	}
	if isWebSocket(r) && r.Header.Get("Origin") != s.previewOrigin {
		s.log.Warn("cross-origin preview websocket refused", "origin", r.Header.Get("Origin"), "user", g.user)
		writeError(w, http.StatusForbidden, api.CodeForbidden, "cross-origin websocket refused")
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), previewKey{}, g))
	s.previewProxy.ServeHTTP(w, r)
}

type previewKey struct{}

// previewEnter exchanges a token (once, before it expires) for the
// preview cookie and sends the browser to the app's root.
func (s *Server) previewEnter(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	g, ok := s.previewTokens.get(r.URL.Query().Get("token"), true)
	if !ok {
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "preview token unknown, used or expired: open the preview from the Remote page again")
		return
	}
	g.expires = s.opts.Now().Add(s.opts.SessionTTL)
	token, err := s.previewSessions.add(g)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "too many previews open; try again later")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: PreviewCookie, Value: token, Path: "/", MaxAge: int(s.opts.SessionTTL / time.Second),
		HttpOnly: true, Secure: s.opts.Secure, SameSite: http.SameSiteLaxMode,
	})
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
			// One origin serves every preview: a response cached for one
			// preview session must not be shown in another.
			resp.Header.Add("Vary", "Cookie")
			kept := resp.Header.Values("Set-Cookie")[:0:0]
			for _, c := range resp.Header.Values("Set-Cookie") {
				name, _, _ := strings.Cut(c, "=")
				if !slices.Contains(previewCookies, strings.TrimSpace(name)) {
					kept = append(kept, c)
				}
			}
			resp.Header.Del("Set-Cookie")
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

// setupPreviews checks PreviewURL and makes the preview tables.
func (s *Server) setupPreviews() error {
	if s.opts.PreviewTokenTTL <= 0 {
		s.opts.PreviewTokenTTL = DefaultPreviewTokenTTL
	}
	s.previewTokens, s.previewSessions = newGrants(s.opts.Now), newGrants(s.opts.Now)
	if s.opts.PreviewURL == "" {
		return nil
	}
	u, err := url.Parse(s.opts.PreviewURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("web: preview URL %q: want an origin like http://127.0.0.1:8081", s.opts.PreviewURL)
	}
	s.previewOrigin = u.Scheme + "://" + u.Host
	s.previewHost = normalHost(u.Hostname())
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	s.daemon = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", s.opts.Socket)
		},
	}}
	s.previewProxy = newPreviewProxy(s.opts.Socket, s.log.Named("preview"))
	return nil
}

// previewHostAllowed reports whether the preview origin answers to
// hostport's host: localhost, an IP address, or preview_url's host (the
// page's allowed_hosts are not the preview's, nor is this the page's).
func (s *Server) previewHostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normalHost(host)
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host != "" && (host == "localhost" || host == s.previewHost)
}
