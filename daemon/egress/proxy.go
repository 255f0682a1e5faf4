package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
)

// Port is where a project container reaches its egress proxy:
// 127.0.0.1:Port on its own loopback (the LXD proxy device's listen).
const Port = 3128

// Resolver resolves host names; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Server.
type Options struct {
	// Dir holds the projects' sockets (<project id>.sock); required.
	Dir string
	// Lookup returns the project of an id as stored now (the policy is
	// read per connection: an allow added through the API counts for the
	// next one).
	Lookup func(projectID string) (api.Project, error)
	// Policy is the operator's part of every project's policy.
	Policy *Compiled
	// Blocked reports a refusal (a system/egress_blocked event); it must
	// not block. Called at most once per project, host and port every
	// BlockedEvery.
	Blocked func(proj api.Project, host string, port int, method, reason string)
	// Resolver resolves names (nil: net.DefaultResolver).
	Resolver Resolver
	// Public says which addresses are public (nil: Public). Tests name
	// their stand-in for the internet here (a second loopback address).
	Public func(netip.Addr) bool
	// DialTimeout bounds a dial (0: 15s).
	DialTimeout time.Duration
	Log         hclog.Logger
}

// MaxConns bounds one project's connections through its proxy at once
// (the daemon's file descriptors); a connection past it waits for one to
// close.
const MaxConns = 256

// limitListener accepts a connection only while fewer than cap(slots)
// are open.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

type slotConn struct {
	net.Conn
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// BlockedEvery is how often one project's refusals of one host and port
// are reported.
const BlockedEvery = 10 * time.Second

// Server serves every project's egress socket.
type Server struct {
	o Options

	mu        sync.Mutex
	listeners map[string]*http.Server         // by project id
	reported  map[string]time.Time            // project id, host, port: last Blocked
	tunnels   map[string]map[*tunnel]struct{} // open CONNECT tunnels by project id
	grants    grants                          // live setup credentials
	closed    bool
	wg        sync.WaitGroup
}

// New returns a Server; its sockets are opened by Socket.
func New(o Options) (*Server, error) {
	if o.Dir == "" || !filepath.IsAbs(o.Dir) || o.Lookup == nil || o.Policy == nil {
		return nil, errors.New("egress: an absolute socket directory, Lookup and Policy are required")
	}
	if n := len(filepath.Join(o.Dir, strings.Repeat("0", 16)+".sock")); n > 107 {
		return nil, fmt.Errorf("egress: socket directory %q is too long: its socket paths would be %d bytes, at most 107 fit", o.Dir, n)
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 15 * time.Second
	}
	if o.Public == nil {
		o.Public = Public
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	if o.Blocked == nil {
		o.Blocked = func(api.Project, string, int, string, string) {}
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return &Server{o: o, listeners: map[string]*http.Server{}, reported: map[string]time.Time{},
		tunnels: map[string]map[*tunnel]struct{}{}}, nil
}

// Socket returns the host path of projectID's egress socket, listening
// on it first when it is not yet.
func (s *Server) Socket(projectID string) (string, error) {
	if len(projectID) != 16 || strings.Trim(projectID, "0123456789abcdef") != "" {
		return "", fmt.Errorf("egress: invalid project id %q", projectID)
	}
	path := filepath.Join(s.o.Dir, projectID+".sock")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("egress: server closed")
	}
	if _, ok := s.listeners[projectID]; ok {
		return path, nil
	}
	_ = os.Remove(path) // a socket left by an earlier daemon
	l, err := net.Listen("unix", path)
	if err != nil {
		return "", fmt.Errorf("egress: listen for project %s: %w", projectID, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return "", fmt.Errorf("egress: %w", err)
	}
	srv := &http.Server{
		Handler:           &handler{s: s, projectID: projectID},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          s.o.Log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	s.listeners[projectID] = srv
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(&limitListener{Listener: l, slots: make(chan struct{}, MaxConns), done: make(chan struct{})})
	}()
	return path, nil
}

// Forget closes projectID's socket (a deleted project).
func (s *Server) Forget(projectID string) {
	s.mu.Lock()
	srv := s.listeners[projectID]
	delete(s.listeners, projectID)
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		_ = os.Remove(filepath.Join(s.o.Dir, projectID+".sock"))
	}
	s.closeTunnels(projectID)
}

// tunnel is an open CONNECT tunnel: both its connections.
type tunnel struct{ down, up net.Conn }

func (t *tunnel) Close() {
	_ = t.down.Close()
	_ = t.up.Close()
}

// track records an open tunnel; untrack forgets it.
func (s *Server) track(projectID string, c *tunnel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.listeners[projectID]; !ok {
		return false // forgotten meanwhile
	}
	if s.tunnels[projectID] == nil {
		s.tunnels[projectID] = map[*tunnel]struct{}{}
	}
	s.tunnels[projectID][c] = struct{}{}
	return true
}

func (s *Server) untrack(projectID string, c *tunnel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tunnels[projectID], c)
}

// closeTunnels cuts projectID's open tunnels (a deleted project, the
// daemon closing).
func (s *Server) closeTunnels(projectID string) {
	s.mu.Lock()
	conns := s.tunnels[projectID]
	delete(s.tunnels, projectID)
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Close closes every socket and the connections through them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	srvs := s.listeners
	s.listeners = map[string]*http.Server{}
	s.mu.Unlock()
	for id, srv := range srvs {
		_ = srv.Close()
		_ = os.Remove(filepath.Join(s.o.Dir, id+".sock"))
		s.closeTunnels(id)
	}
	s.wg.Wait()
	return nil
}

type handler struct {
	s         *Server
	projectID string
}

// hopHeaders are not forwarded (RFC 9110 7.6.1), nor the proxy's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proj, err := h.s.o.Lookup(h.projectID)
	if err != nil {
		http.Error(w, "egress: this project is gone", http.StatusForbidden)
		return
	}
	// A setup credential (Grant) widens the policy for this request; one
	// that is not live (setup ended, forged, another project's) is
	// refused whatever the request.
	if g, present := h.s.credential(h.projectID, r); g != nil {
		proj = withGrant(proj, g)
	} else if present {
		h.refuseAuth(w, proj, r)
		return
	}
	var host, port string
	if r.Method == http.MethodConnect {
		// The target is the request line's authority (Go puts it in
		// r.Host for CONNECT; a Host header is never looked at).
		host, port, err = net.SplitHostPort(r.RequestURI)
		if err != nil {
			h.refuse(w, proj, r.RequestURI, 0, r.Method, "not host:port")
			return
		}
	} else {
		// Only absolute-form requests, and only their URL: the Host
		// header is replaced by it, never believed.
		if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" || r.URL.User != nil {
			h.refuse(w, proj, r.URL.Host, 0, r.Method, "not an absolute http:// URL (use CONNECT for https)")
			return
		}
		host, port = r.URL.Hostname(), r.URL.Port()
		if port == "" {
			port = "80"
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		h.refuse(w, proj, host, 0, r.Method, "bad port")
		return
	}
	d := h.s.o.Policy.Decide(proj, host, n)
	if !d.Allowed {
		h.refuse(w, proj, host, n, r.Method, d.Reason)
		return
	}
	addr, reason := h.s.resolve(r.Context(), host, d.Trusted)
	if reason != "" {
		h.refuse(w, proj, host, n, r.Method, reason)
		return
	}
	target := netip.AddrPortFrom(addr, uint16(n)).String()
	if r.Method == http.MethodConnect {
		h.connect(w, r, target)
		return
	}
	h.forward(w, r, target)
}

// resolve returns the address to dial for host: itself when an IP
// address, else the first address it resolves to, which must be public
// unless trusted. reason says why none.
func (s *Server) resolve(ctx context.Context, host string, trusted bool) (netip.Addr, string) {
	if a, err := netip.ParseAddr(host); err == nil {
		if !trusted && !s.o.Public(a) {
			return netip.Addr{}, "a non-public address"
		}
		return a.Unmap(), ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := s.o.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, "does not resolve"
	}
	for _, a := range addrs {
		if trusted || s.o.Public(a) {
			return a.Unmap(), ""
		}
	}
	return netip.Addr{}, "resolves to a private, loopback or link-local address"
}

// report calls Blocked at most once per project, host and port every
// BlockedEvery.
func (s *Server) report(proj api.Project, host string, port int, method, reason string) {
	key := proj.ID + " " + host + " " + strconv.Itoa(port)
	now := time.Now()
	s.mu.Lock()
	last, seen := s.reported[key]
	report := !seen || now.Sub(last) >= BlockedEvery
	if report {
		if len(s.reported) > 4096 {
			clear(s.reported)
		}
		s.reported[key] = now
	}
	s.mu.Unlock()
	if report {
		s.o.Blocked(proj, host, port, method, reason)
	}
}

func (h *handler) refuse(w http.ResponseWriter, proj api.Project, host string, port int, method, reason string) {
	if len(host) > 255 {
		host = host[:255]
	}
	h.s.o.Log.Info("egress refused", "project", proj.Name, "host", host, "port", port, "method", method, "reason", reason)
	h.s.report(proj, host, port, method, reason)
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("egress: %s:%d refused: %s; the project's owner may allow it (POST /v1/projects/%s/network/allow)",
		host, port, reason, proj.Name), http.StatusForbidden)
}

// refuseAuth answers a request whose proxy credential is not a live
// setup credential of this project: 407, reported like a refusal. The
// credential itself is never logged nor echoed.
func (h *handler) refuseAuth(w http.ResponseWriter, proj api.Project, r *http.Request) {
	host, port := r.URL.Hostname(), 0
	if r.Method == http.MethodConnect {
		host = r.RequestURI
		if hh, pp, err := net.SplitHostPort(r.RequestURI); err == nil {
			host = hh
			port, _ = strconv.Atoi(pp)
		}
	} else if p, err := strconv.Atoi(r.URL.Port()); err == nil {
		port = p
	} else {
		port = 80
	}
	if len(host) > 255 {
		host = host[:255]
	}
	const reason = "a proxy credential that is not valid (a setup credential is valid only while its setup runs)"
	h.s.o.Log.Info("egress refused", "project", proj.Name, "host", host, "port", port, "method", r.Method, "reason", reason)
	h.s.report(proj, host, port, r.Method, reason)
	w.Header().Set("Connection", "close")
	http.Error(w, "egress: "+reason, http.StatusProxyAuthRequired)
}

func (h *handler) connect(w http.ResponseWriter, r *http.Request, target string) {
	dialer := net.Dialer{Timeout: h.s.o.DialTimeout}
	up, err := dialer.DialContext(r.Context(), "tcp", target)
	if err != nil {
		http.Error(w, "egress: cannot reach "+r.RequestURI, http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	tun := &tunnel{down: down, up: up}
	if !h.s.track(h.projectID, tun) {
		tun.Close()
		return
	}
	defer h.s.untrack(h.projectID, tun)
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		_ = up.Close()
		_ = down.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // client to upstream, with what the reader already buffered
		defer wg.Done()
		_, _ = io.Copy(up, buf.Reader)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
	}()
	wg.Wait()
	_ = up.Close()
	_ = down.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func (h *handler) forward(w http.ResponseWriter, r *http.Request, target string) {
	dialer := net.Dialer{Timeout: h.s.o.DialTimeout}
	tr := &http.Transport{
		Proxy: nil, // never the daemon's own proxy settings
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", target) // the checked address only
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	defer tr.CloseIdleConnections()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Host = r.URL.Host // the URL's authority, never a Host header
	for _, k := range hopHeaders {
		out.Header.Del(k)
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "egress: cannot reach "+r.URL.Host, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, k := range hopHeaders {
		resp.Header.Del(k)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
