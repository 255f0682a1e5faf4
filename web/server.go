package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
)

//go:embed static
var staticFS embed.FS

// SessionCookie is the name of the session cookie on plain http;
// SecureSessionCookie its name when Options.Secure (https): the __Host-
// prefix makes browsers refuse it from any other host, so no other site
// (a preview included) can set it for the page.
const (
	SessionCookie       = "remote_session"
	SecureSessionCookie = "__Host-remote_session"
)

// Defaults used when Options leaves a field zero.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultLoginLimit  = 5
	DefaultLoginWindow = time.Minute
	// DefaultLoginsPerUser successful logins per LoginWindow are allowed
	// per user; DefaultMaxSessionsPerUser live sessions per user.
	DefaultLoginsPerUser      = 10
	DefaultMaxSessionsPerUser = 32
	defaultMaxKeys            = 10000
	maxLoginBody              = 8 << 10
	codeRateLimited           = "rate_limited"
)

// ContentSecurityPolicy is sent on every response: no inline or foreign
// script, no framing, connections only to this origin.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; " +
	"style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'"

// User is one browser user: a name and a bcrypt hash of the password.
type User struct {
	Name         string
	PasswordHash string
}

// Options configures a Server. Socket and Users are required.
type Options struct {
	// Socket is the daemon's Unix socket ([daemon] socket).
	Socket string
	// Users may log in ([[web.users]]).
	Users []User
	// SessionTTL is how long a session lives after login ([web] session_ttl).
	SessionTTL time.Duration
	// Secure marks cookies Secure: set it when serving TLS, or behind a
	// reverse proxy that does ([web] cookie_secure).
	Secure bool
	// AllowedHosts are the DNS names a request's Host may carry ([web]
	// allowed_hosts); localhost and IP addresses are always accepted. Any
	// other Host is refused (403), so a page whose DNS name was rebound to
	// this server's address reaches nothing.
	AllowedHosts []string
	// TrustedProxies are the addresses of reverse proxies in front of
	// remote-web ([web] trusted_proxies). From them only, X-Forwarded-For
	// names the client (whose address the login limit counts) and
	// X-Forwarded-Proto the scheme the browser used (for the Origin
	// check). Empty: both headers are ignored.
	TrustedProxies []netip.Prefix
	// LoginLimit failed attempts per LoginWindow are allowed per client
	// address (an IPv6 /64 counts as one), then per user name; more answer
	// 429 with Retry-After. An attempt refused for its address does not
	// count against the name; a successful login counts against neither.
	LoginLimit  int
	LoginWindow time.Duration
	// LoginsPerUser successful logins per LoginWindow are allowed per
	// user, and each user holds at most MaxSessionsPerUser live
	// sessions; more answer 429 for that user only. Zero: the defaults.
	LoginsPerUser      int
	MaxSessionsPerUser int
	// Logger receives request and login logs; nil discards.
	Logger hclog.Logger
	// Now is the clock; nil means time.Now. Tests move it to expire sessions.
	Now func() time.Time
	// PreviewURL is the wildcard origin of the previews as browsers reach
	// them ([web] preview_url, e.g. "https://*.preview.example.net"): the
	// "*" becomes <port>-<project id>, one origin per project and port,
	// all served by PreviewHandler on its own listener; "" turns previews
	// off.
	PreviewURL string
	// PreviewTokenTTL bounds a preview token's life; zero means
	// DefaultPreviewTokenTTL.
	PreviewTokenTTL time.Duration
	// MaxPreviewTokens and MaxPreviewSessions bound the unused preview
	// tokens and the preview sessions of one user; zero means
	// DefaultMaxPreviewTokens and DefaultMaxPreviewSessions.
	MaxPreviewTokens, MaxPreviewSessions int
}

// Server is remote-web's HTTP handler: login, logout, the page, and the
// authenticated proxy to the daemon. It is safe for concurrent use.
type Server struct {
	opts     Options
	log      hclog.Logger
	users    *users
	sessions *sessions
	byUser   *limiter
	byAddr   *limiter
	okByUser *limiter // successful logins
	hosts    map[string]bool
	proxy    http.Handler
	static   http.Handler
	pages    fs.FS

	// PreviewURL's parts: a preview origin is
	// previewScheme://<port>-<id>.previewDomain previewPort.
	previewScheme, previewDomain, previewPort string
	previewTokens                             *grants
	previewSessions                           *grants
	previewProxy                              http.Handler
	daemon                                    *http.Client
	routines                                  *http.Client // the routine hook's client of the daemon

	page, preview *http.ServeMux // the two origins' route tables (routes.go)
}

// New checks opts and returns a Server. Users with a hash that is not
// bcrypt are an error naming the user.
func New(opts Options) (*Server, error) {
	if opts.Socket == "" {
		return nil, errors.New("web: daemon socket path is empty")
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.LoginLimit <= 0 {
		opts.LoginLimit = DefaultLoginLimit
	}
	if opts.LoginWindow <= 0 {
		opts.LoginWindow = DefaultLoginWindow
	}
	if opts.LoginsPerUser <= 0 {
		opts.LoginsPerUser = DefaultLoginsPerUser
	}
	if opts.MaxSessionsPerUser <= 0 {
		opts.MaxSessionsPerUser = DefaultMaxSessionsPerUser
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	u, err := newUsers(opts.Users)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("web: embedded page: %w", err)
	}
	s := &Server{
		opts:     opts,
		log:      log,
		users:    u,
		sessions: newSessions(opts.SessionTTL, opts.MaxSessionsPerUser, opts.Now),
		byUser:   newLimiter(opts.LoginLimit, opts.LoginWindow, defaultMaxKeys, opts.Now),
		byAddr:   newLimiter(opts.LoginLimit, opts.LoginWindow, defaultMaxKeys, opts.Now),
		okByUser: newLimiter(opts.LoginsPerUser, opts.LoginWindow, len(opts.Users)+1, opts.Now),
		static:   http.StripPrefix("/static/", http.FileServerFS(sub)),
		pages:    sub,
		hosts:    map[string]bool{"localhost": true},
	}
	for _, h := range opts.AllowedHosts {
		s.hosts[normalHost(h)] = true
	}
	s.proxy = newProxy(opts.Socket, log.Named("proxy"))
	s.routines = newDaemonClient(opts.Socket)
	if err := s.setupPreviews(); err != nil {
		return nil, err
	}
	s.page, s.preview = newRouter(s.pageRoutes()), newRouter(s.previewRoutes())
	return s, nil
}

// ServeHTTP routes a request. Only /v1/* and /ws/* reach the daemon, and
// only with a live session and, where it matters, a same-origin request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if host, ok := s.hostAllowed(r.Host); !ok {
		s.log.Debug("request for another host refused", "host", r.Host, "remote", r.RemoteAddr)
		msg := fmt.Sprintf("host %q is not served here: remote-web answers to localhost, IP addresses and the names in [web] allowed_hosts", host)
		if host == "" {
			msg = "the request names no host: remote-web answers to localhost, IP addresses and the names in [web] allowed_hosts"
		}
		writeError(w, http.StatusForbidden, api.CodeForbidden, msg)
		return
	}
	p := r.URL.Path
	if c := path.Clean(p); c != p && c+"/" != p {
		// "/v1/../metrics" and its encoded forms must not reach the daemon.
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "path is not in clean form: "+p)
		return
	}
	if refuseRoutineToken(w, r) {
		return
	}
	if isDaemonPortsPath(p) { // a project's app never runs on the page's origin
		writeError(w, http.StatusNotFound, api.CodeNotFound, "previews are served on the preview origin only: open them with /preview/{project}/{port}")
		return
	}
	s.page.ServeHTTP(w, r)
}

// serveIndex serves the page to a logged-in user, else sends to /login.
func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.session(w, r); err != nil {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	s.servePage(w, "index.html", http.StatusOK)
}

// serveStatic serves the page's scripts, styles and vendored libraries.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	s.static.ServeHTTP(w, r)
}

// serveAPI authenticates, checks the origin and forwards to the daemon.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	sess, _, err := s.session(w, r)
	if errors.Is(err, ErrTossedCookie) {
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "two session cookies arrived, one set by another site (cookie tossing): both are cleared, log in again")
		return
	}
	if err != nil {
		s.log.Debug("api request without session", "path", r.URL.Path, "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "log in first: no valid session cookie")
		return
	}
	user := sess.user
	if d := r.Header.Get("Sec-Fetch-Dest"); !apiFetchDest(d) {
		// A page's sub-resource (Markdown's image, a frame...) never
		// reaches the API: rendering a chat cannot start downloads or
		// listings (files/raw runs a process in the container).
		s.log.Warn("API request as a page's sub-resource refused", "path", r.URL.Path, "sec_fetch_dest", d, "user", user)
		writeError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("the API is not a page's sub-resource: Sec-Fetch-Dest %q is refused (follow the link or use fetch)", d))
		return
	}
	if (isWebSocket(r) || !safeMethod(r.Method)) && !s.sameOrigin(r) {
		s.log.Warn("cross-origin request refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "user", user)
		writeError(w, http.StatusForbidden, api.CodeForbidden, "cross-origin request refused")
		return
	}
	if !safeMethod(r.Method) && !isFileUpload(r) {
		if msg := jsonBodyProblem(r); msg != "" {
			s.log.Warn("request body refused", "path", r.URL.Path, "content_type", r.Header.Get("Content-Type"), "user", user)
			writeError(w, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType, msg)
			return
		}
	}
	r = r.WithContext(withUser(r.Context(), user))
	s.proxy.ServeHTTP(w, r)
}

// sessionCookie is the session cookie's name: __Host- prefixed on https.
func (s *Server) sessionCookie() string {
	if s.opts.Secure {
		return SecureSessionCookie
	}
	return SessionCookie
}

// session returns r's live session and its token, or ErrNoSession. A
// request carrying the session cookie twice is refused with
// ErrTossedCookie, and w expires every cookie of that name the browser
// could have sent with it: one came from another site of the same
// registrable domain (on plain http nothing else stops that), and which
// one is ours cannot be told.
func (s *Server) session(w http.ResponseWriter, r *http.Request) (session, string, error) {
	var values []string
	for _, c := range r.Cookies() {
		if c.Name == s.sessionCookie() {
			values = append(values, c.Value)
		}
	}
	switch len(values) {
	case 0:
		return session{}, "", ErrNoSession
	case 1:
		v, err := s.sessions.lookup(values[0])
		return v, values[0], err
	}
	users := make([]string, 0, len(values))
	for _, v := range values {
		user := "(no live session)"
		if sess, err := s.sessions.lookup(v); err == nil {
			user = sess.user
		}
		users = append(users, user)
		s.sessions.remove(v)
	}
	s.log.Warn("request with two session cookies refused: cookie tossing", "users", strings.Join(users, ","), "path", r.URL.Path, "remote", r.RemoteAddr)
	s.expireSessionCookies(w, r)
	return session{}, "", ErrTossedCookie
}

// expireSessionCookies deletes the session cookie at every path and
// domain it could have been sent with for r: each prefix of r's path,
// host-only and for each parent domain of r's host.
func (s *Server) expireSessionCookies(w http.ResponseWriter, r *http.Request) {
	host, _ := s.hostAllowed(r.Host)
	domains := []string{""}
	if _, err := netip.ParseAddr(host); err != nil {
		for d := host; strings.Contains(d, "."); d = d[strings.IndexByte(d, '.')+1:] {
			domains = append(domains, d)
		}
	}
	paths := []string{"/"}
	p := r.URL.Path
	for i := 1; i < len(p) && len(paths) < 16; i++ {
		if p[i] == '/' {
			paths = append(paths, p[:i], p[:i+1])
		}
	}
	if p != "/" && !strings.HasSuffix(p, "/") {
		paths = append(paths, p)
	}
	for _, d := range domains {
		for _, path := range paths {
			http.SetCookie(w, &http.Cookie{Name: s.sessionCookie(), Value: "", Path: path, Domain: d, MaxAge: -1,
				HttpOnly: true, Secure: s.opts.Secure})
		}
	}
}

func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.servePage(w, "login.html", http.StatusOK)
		return
	}
	if !s.sameOrigin(r) {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "cross-origin request refused")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		s.loginFailed(w, r, http.StatusBadRequest, "the login form could not be read")
		return
	}
	name, password := r.PostForm.Get("username"), r.PostForm.Get("password")
	addr := s.clientAddr(r)
	// The address first: an address over its limit is refused before its
	// attempt touches the per-name table, so one client cannot fill that
	// table (or lock names) at more than its own rate.
	if ok, wait := s.byAddr.allow(addr); !ok {
		s.rateLimited(w, r, wait, "address", name, addr)
		return
	}
	userKey := name
	if len(userKey) > 256 {
		userKey = "\x00long" // never a user (users.check refuses it); bounds the table's memory
	}
	if ok, wait := s.byUser.allow(userKey); !ok {
		s.rateLimited(w, r, wait, "user", name, addr)
		return
	}
	if err := s.users.check(name, password); err != nil {
		s.log.Info("login failed", "user", name, "remote", addr)
		s.loginFailed(w, r, http.StatusUnauthorized, "invalid username or password")
		return
	}
	// Only failed attempts use up a budget: counted before the check (so
	// parallel guesses cannot slip past the limit), given back on success.
	s.byUser.refund(userKey)
	s.byAddr.refund(addr)
	// Successful logins have a budget of their own per user, and so do
	// the sessions they make: one user's script cannot crowd out others.
	if ok, wait := s.okByUser.allow(name); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
		s.log.Warn("login rate limited", "by", "successful logins", "user", name, "remote", addr)
		s.loginFailed(w, r, http.StatusTooManyRequests, fmt.Sprintf("too many logins for this user (limit %d a minute): try again later", s.opts.LoginsPerUser))
		return
	}
	token, expires, err := s.sessions.create(name)
	var le *LimitError
	if errors.As(err, &le) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((le.Wait+time.Second-1)/time.Second))))
		s.log.Warn("login refused: per-user session limit", "user", name, "limit", le.Limit)
		s.loginFailed(w, r, http.StatusTooManyRequests, le.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     s.sessionCookie(),
		Value:    token,
		Path:     "/",
		Expires:  expires,
		MaxAge:   int(s.opts.SessionTTL / time.Second),
		HttpOnly: true,
		Secure:   s.opts.Secure,
		SameSite: http.SameSiteStrictMode,
	})
	s.log.Info("login", "user", name, "remote", addr)
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]string{"user": name})
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// rateLimited answers 429 with Retry-After.
func (s *Server) rateLimited(w http.ResponseWriter, r *http.Request, wait time.Duration, by, name, addr string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
	s.log.Warn("login rate limited", "by", by, "user", name, "remote", addr)
	s.loginFailed(w, r, http.StatusTooManyRequests, "too many login attempts; try again later")
}

// loginFailed answers a failed login: JSON for scripts, the form for browsers.
func (s *Server) loginFailed(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if wantsJSON(r) {
		code := api.CodeUnauthorized
		switch status {
		case http.StatusBadRequest:
			code = api.CodeBadRequest
		case http.StatusTooManyRequests:
			code = codeRateLimited
		case http.StatusServiceUnavailable:
			code = api.CodeUnavailable
		}
		writeError(w, status, code, msg)
		return
	}
	b, err := fs.ReadFile(s.pages, "login.html")
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "login page missing")
		return
	}
	page := strings.Replace(string(b), `<p id="login-error" hidden></p>`,
		`<p id="login-error" role="alert">`+htmlEscape(msg)+`</p>`, 1)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(page))
}

func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "cross-origin request refused")
		return
	}
	if sess, token, err := s.session(w, r); err == nil {
		s.previewSessions.dropUser(sess.user) // logging out ends the user's previews too
		s.previewTokens.dropUser(sess.user)
		s.sessions.remove(token)
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.sessionCookie(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.opts.Secure, SameSite: http.SameSiteStrictMode,
	})
	if wantsJSON(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) servePage(w http.ResponseWriter, name string, status int) {
	b, err := fs.ReadFile(s.pages, name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "page "+name+" missing")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a form's POST
	// carries "Origin: null", and on plain http to a host name that is
	// not localhost (no fetch metadata there) the login form could not
	// prove it came from this origin. Other origins still get nothing.
	h.Set("Referrer-Policy", "same-origin")
}

// sameOrigin reports whether a browser request comes from this origin.
// Fetch metadata decides when present: browsers set Sec-Fetch-Site and a
// page cannot forge it. Browsers send it to https and localhost only; on
// plain http to any other name the Origin header must name this scheme
// and host (the page's Referrer-Policy, same-origin, keeps it set on the
// page's own form posts; a cross-origin post carries its origin, or
// "null"). Requests with
// neither come from non-browser clients, which cannot ride on a victim's
// cookie, and are let through.
func (s *Server) sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false // a serialized origin is scheme://host[:port]; "null" is opaque
	}
	if want := s.requestScheme(r); u.Scheme != want {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// requestScheme is the scheme the browser used: https under TLS, or what
// a trusted proxy says in X-Forwarded-Proto.
func (s *Server) requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if p, ok := s.peer(r); ok && s.trusted(p) {
		if v := r.Header.Values("X-Forwarded-Proto"); len(v) > 0 {
			last := strings.TrimSpace(v[len(v)-1])
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = strings.TrimSpace(last[i+1:])
			}
			if last == "https" || last == "http" {
				return last
			}
		}
	}
	return "http"
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// clientAddr is the login limiter's key for the client: its IPv4 address,
// or its IPv6 /64 (one host usually holds the whole /64). Behind trusted
// proxies the client is the last X-Forwarded-For hop that is not one of
// them; a proxy is trusted to append, never to be believed about hops it
// did not add.
func (s *Server) clientAddr(r *http.Request) string {
	a, ok := s.peer(r)
	if !ok {
		return r.RemoteAddr
	}
	if s.trusted(a) {
		var hops []string
		for _, v := range r.Header.Values("X-Forwarded-For") {
			hops = append(hops, strings.Split(v, ",")...)
		}
		for i := len(hops) - 1; i >= 0; i-- {
			h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			a = h.Unmap().WithZone("")
			if !s.trusted(a) {
				break
			}
		}
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// peer is the address of the connection's other end.
func (s *Server) peer(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), true
}

// trusted reports whether a is one of Options.TrustedProxies.
func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// hostAllowed reports whether a request's Host may be served, and the host
// name it carries: localhost, an IP address (never what a rebinding DNS
// name looks like) or one of Options.AllowedHosts.
func (s *Server) hostAllowed(hostport string) (string, bool) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normalHost(host)
	if host == "" {
		return "", false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return host, true
	}
	return host, s.hosts[host]
}

// normalHost lower-cases a host name and drops IPv6 brackets and one
// trailing dot.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// jsonBodyProblem explains why r's body may not go to the daemon, or is
// "". A body must be declared application/json (a charset parameter may
// only say utf-8): HTML forms, and cross-site requests without a CORS
// preflight, can only send text/plain, urlencoded or multipart bodies, so
// none of them reaches the API. A request without a body and without a
// Content-Type passes (POST .../start); an HTML form always sends one.
// isFileUpload reports whether r is a file upload, the one body that is
// not JSON: PUT /v1/projects/{name}/files/raw as application/octet-stream
// (a type no cross-site form can send, and same-origin was checked
// first). The daemon bounds its size ([projects] max_upload_bytes); the
// proxy streams it.
// apiFetchDest reports whether a request with this Sec-Fetch-Dest may
// reach /v1/: a fetch or download (api.DownloadDestAllowed: "empty",
// "document", none) or a WebSocket; never an image, script, style,
// frame, media, font, worker or other sub-resource of a page.
func apiFetchDest(dest string) bool {
	return dest == "websocket" || api.DownloadDestAllowed(dest)
}

func isFileUpload(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/projects/")
	name, tail, _ := strings.Cut(rest, "/")
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return ok && r.Method == http.MethodPut && name != "" && tail == "files/raw" &&
		err == nil && mt == "application/octet-stream" && len(params) == 0
}

func jsonBodyProblem(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return ""
	}
	if ct == "" {
		return "request body has no Content-Type; send it as Content-Type: application/json"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Sprintf("Content-Type %q is not accepted; send the body as Content-Type: application/json", ct)
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return fmt.Sprintf("Content-Type %q: only a charset=utf-8 parameter is accepted", ct)
		}
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

func htmlEscape(s string) string { return htmlEscaper.Replace(s) }
