package daemon

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"remote/api"
)

// RouteAccess is the check a route demands beyond the socket's peer check
// (which every route passes first).
type RouteAccess int

// Route access levels.
const (
	// AccessPeer: any allowed peer (info, providers, metrics).
	AccessPeer RouteAccess = iota + 1
	// AccessUser: a request acting for a user: the one root, the daemon's
	// uid or a frontend names in X-Remote-User (401 without it), else the
	// peer's own login name (403 for a header naming anyone else); the
	// handler finds it with UserFrom.
	AccessUser
)

// HandlerFunc serves one route. A returned error goes through the single
// error mapping to the JSON envelope, unless the handler already wrote a
// response (then it is only logged).
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Route is one entry of the route table: routes are data, validated at
// start-up.
type Route struct {
	Method  string // GET, POST, PUT, DELETE, PATCH
	Pattern string // a net/http pattern path, e.g. /v1/chats/{id}
	Access  RouteAccess
	Handler HandlerFunc
}

// RouteProvider contributes routes to the table. This is the seam for the
// project routes (daemon/project*.go): a type there implements Routes and
// is passed in Options.RouteProviders; its handlers use the same helpers
// (decodeBody, writeJSON, UserFrom, BadRequest and the error classes) and
// get the same peer check, access check and error mapping.
type RouteProvider interface {
	Routes() []Route
}

var validMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// Methods returns the HTTP methods a route may have (a route that answers
// every method, like a reverse proxy, lists one route per method).
func Methods() []string { return slices.Clone(validMethods) }

// validateRoutes checks the table: known methods and access levels,
// absolute patterns, handlers present, no (method, pattern) twice.
func validateRoutes(routes []Route) error {
	seen := map[string]bool{}
	for i, rt := range routes {
		if !slices.Contains(validMethods, rt.Method) {
			return fmt.Errorf("route %d (%s %s): unknown method", i, rt.Method, rt.Pattern)
		}
		if !strings.HasPrefix(rt.Pattern, "/") || strings.ContainsAny(rt.Pattern, " \t") {
			return fmt.Errorf("route %d (%s %s): pattern must be an absolute path", i, rt.Method, rt.Pattern)
		}
		if rt.Handler == nil {
			return fmt.Errorf("route %d (%s %s): no handler", i, rt.Method, rt.Pattern)
		}
		if rt.Access != AccessPeer && rt.Access != AccessUser {
			return fmt.Errorf("route %d (%s %s): no access level", i, rt.Method, rt.Pattern)
		}
		key := rt.Method + " " + rt.Pattern
		if seen[key] {
			return fmt.Errorf("route %s registered twice", key)
		}
		seen[key] = true
	}
	return nil
}

// buildMux registers the table on a ServeMux: one mux entry per pattern,
// dispatching on method itself so every miss (404, 405) also answers with
// the JSON envelope.
func (s *Server) buildMux(routes []Route) (mux *http.ServeMux, err error) {
	if err := validateRoutes(routes); err != nil {
		return nil, err
	}
	byPattern := map[string]map[string]Route{}
	var order []string
	for _, rt := range routes {
		if byPattern[rt.Pattern] == nil {
			byPattern[rt.Pattern] = map[string]Route{}
			order = append(order, rt.Pattern)
		}
		byPattern[rt.Pattern][rt.Method] = rt
	}
	mux = http.NewServeMux()
	defer func() { // ServeMux panics on conflicting patterns
		if p := recover(); p != nil {
			mux, err = nil, fmt.Errorf("route table: %v", p)
		}
	}()
	for _, pattern := range order {
		methods := byPattern[pattern]
		mux.Handle(pattern, s.dispatch(methods))
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	}))
	return mux, nil
}

func (s *Server) dispatch(methods map[string]Route) http.Handler {
	var allow []string
	for m := range methods {
		allow = append(allow, m)
	}
	slices.Sort(allow)
	allowHeader := strings.Join(allow, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := methods[r.Method]
		if !ok && r.Method == http.MethodHead {
			rt, ok = methods[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", allowHeader)
			s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allowHeader)})
			return
		}
		rw := &trackingWriter{ResponseWriter: w}
		var user string
		if audited(r) {
			rw.commit = func(status int) { s.audit(r, rt, user, status) }
		}
		switch {
		case rt.Access == AccessUser:
			name, err := callerName(r)
			if err != nil {
				s.writeError(rw, r, err)
				return
			}
			user = name
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, name))
		case audited(r):
			// A peer route that changes state (a CLI install, an image
			// import) acts for someone too: the audit line names them.
			user = peerRouteUser(r)
		}
		err := rt.Handler(rw, r)
		if err != nil && !rw.wrote {
			s.writeError(rw, r, err)
		} else if err != nil {
			s.log.Debug("request ended with an error after the response started", "method", r.Method, "path", r.URL.Path, "error", err)
		}
		if !rw.wrote {
			rw.committed(http.StatusOK) // net/http answers 200 for a handler that wrote nothing
		}
	})
}

// audited reports whether r may change state, so it gets an audit line:
// every method but GET and HEAD, and every WebSocket upgrade (a chat
// socket takes prompts, a terminal runs a shell).
func audited(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return true
	}
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// peerRouteUser is who a request on an AccessPeer route acts as, for its
// audit line: the user callerName finds, else (a peer that names nobody,
// e.g. root's remotectl without X-Remote-User) the peer's own login name;
// "" when the request names a user the peer may not act as (the line then
// carries that name as asserted).
func peerRouteUser(r *http.Request) string {
	if name, err := callerName(r); err == nil {
		return name
	}
	p := PeerFrom(r.Context())
	if r.Header.Get(api.HeaderUser) == "" && p != nil && p.NameErr == nil && userName.MatchString(p.Name) {
		return p.Name
	}
	return ""
}

// audit logs one state-changing request at info: who (peer uid, acting
// user), what (route and its target from the path) and the result status.
// Never a body: a secret's value travels only there.
func (s *Server) audit(r *http.Request, rt Route, user string, status int) {
	args := []any{"route", rt.Method + " " + rt.Pattern, "user", user, "status", status}
	if p := PeerFrom(r.Context()); p != nil {
		args = append(args, "peer_uid", p.UID, "peer_pid", p.PID)
	}
	for _, wildcard := range []string{"id", "name", "key"} {
		if v := r.PathValue(wildcard); v != "" {
			args = append(args, wildcard, v)
		}
	}
	if user == "" {
		if asserted := r.Header.Get(api.HeaderUser); userName.MatchString(asserted) {
			args = append(args, "asserted", asserted)
		}
	}
	s.auditLog.Info("request", args...)
}

// trackingWriter remembers whether a response was started, tells commit
// (when set) the status once it is decided, and passes Flush and Hijack
// through (http.ResponseController uses Unwrap).
type trackingWriter struct {
	http.ResponseWriter
	wrote  bool
	commit func(status int)
}

// committed reports the response's status to commit, once.
func (t *trackingWriter) committed(status int) {
	if t.commit != nil {
		t.commit(status)
		t.commit = nil
	}
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.committed(code)
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	t.committed(http.StatusOK)
	return t.ResponseWriter.Write(b)
}

func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Hijack lets the chat socket take over the connection (gorilla/websocket
// asserts http.Hijacker directly).
func (t *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	t.wrote = true
	c, rw, err := http.NewResponseController(t.ResponseWriter).Hijack()
	if err == nil {
		t.committed(http.StatusSwitchingProtocols) // the upgrader answers 101 on the raw connection
	}
	return c, rw, err
}
