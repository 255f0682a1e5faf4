package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"remote/api"
)

// routineHookPrefix is where routines are fired over HTTP with a
// schedule's routine token (docs/api.md, remote-web).
const routineHookPrefix = "/hooks/routines/"

// maxRoutineAnswer bounds the daemon's answer relayed to a hook's caller.
const maxRoutineAnswer = 64 << 10

// routineToken reports whether r carries a routine token as its bearer
// credential.
func routineToken(r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return tok, ok && strings.HasPrefix(tok, api.RoutineTokenPrefix)
}

// refuseRoutineToken answers 403 for a request carrying a routine token
// anywhere but its hook (POST /hooks/routines/{id}): the token fires one
// schedule, it never reads, and it is never a session.
func refuseRoutineToken(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := routineToken(r); !ok {
		return false
	}
	rest, hook := strings.CutPrefix(r.URL.Path, routineHookPrefix)
	if hook && r.Method == http.MethodPost && rest != "" && !strings.Contains(rest, "/") {
		return false
	}
	writeError(w, http.StatusForbidden, api.CodeForbidden, "a routine token only fires its routine: POST "+routineHookPrefix+"{id}")
	return true
}

// newDaemonClient is a client of the daemon's socket for requests
// remote-web makes itself.
func newDaemonClient(socket string) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
	}}
}

// serveRoutine serves POST /hooks/routines/{id}: the routine token goes
// to the daemon's POST /v1/schedules/{id}/fire, which checks it; nothing
// else of the request is passed on (no cookie, no user, no body).
func (s *Server) serveRoutine(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "a routine is fired with POST only; its token reads nothing")
		return
	}
	tok, ok := routineToken(r)
	if !ok {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "this token may not fire this routine")
		return
	}
	id := r.PathValue("id")
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://remoted/v1/schedules/"+url.PathEscape(id)+"/fire", nil)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "bad routine id")
		return
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
	resp, err := s.routines.Do(req)
	if err != nil {
		s.log.Error("routine: daemon unreachable", "error", err) // never the token
		writeError(w, http.StatusBadGateway, api.CodeUnavailable, "the daemon is not reachable")
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRoutineAnswer))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}
