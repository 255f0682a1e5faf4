package loginapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/providers"
	"remote/providers/runner"
)

// keepEndedLogins is how long an ended login stays readable.
const keepEndedLogins = time.Hour

// ProviderLogins serves the host CLIs' logins (a daemon.RouteProvider):
//
//	POST   /v1/providers/{id}/login               start (202, the login)
//	GET    /v1/providers/{id}/login/{login}       its state
//	POST   /v1/providers/{id}/login/{login}/code  hand the pasted code to the CLI
//	DELETE /v1/providers/{id}/login/{login}       cancel
//	POST   /v1/providers/{id}/logout              the CLI's own logout
//
// The CLI runs as the host user, so it logs in the account every loose
// chat of every user runs on: only the host user itself (on the socket,
// or named by a frontend) and an administrator acting as itself (daemon.IsAdmin:
// root or the daemon's uid, not through a frontend) may do this; any other
// user is refused (403). One login per provider runs at a time; starting
// another returns the running one.
type ProviderLogins struct {
	Registry *daemon.Registry
	HostUser runner.HostUser

	mu     sync.Mutex
	logins map[string]*loginEntry
}

type loginEntry struct {
	id       string
	provider string
	session  providers.LoginSession
}

// Routes returns the login routes.
func (l *ProviderLogins) Routes() []daemon.Route {
	return []daemon.Route{
		{Method: http.MethodPost, Pattern: "/v1/providers/{id}/login", Access: daemon.AccessUser, Handler: l.handleStart},
		{Method: http.MethodGet, Pattern: "/v1/providers/{id}/login/{login}", Access: daemon.AccessUser, Handler: l.handleGet},
		{Method: http.MethodPost, Pattern: "/v1/providers/{id}/login/{login}/code", Access: daemon.AccessUser, Handler: l.handleCode},
		{Method: http.MethodDelete, Pattern: "/v1/providers/{id}/login/{login}", Access: daemon.AccessUser, Handler: l.handleCancel},
		{Method: http.MethodPost, Pattern: "/v1/providers/{id}/logout", Access: daemon.AccessUser, Handler: l.handleLogout},
	}
}

// mayLogin refuses every acting user but the host user and an
// administrator acting as itself.
func (l *ProviderLogins) mayLogin(r *http.Request) error {
	name := daemon.UserFrom(r.Context())
	if name != "" && name == l.HostUser.Name {
		return nil
	}
	if daemon.IsAdmin(r) {
		return nil
	}
	return &daemon.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
		Message: fmt.Sprintf("user %q may not log the host's CLIs in or out: only the host user (%s) or root may", name, l.HostUser.Name)}
}

func (l *ProviderLogins) driver(r *http.Request) (string, providers.LoginDriver, error) {
	if err := l.mayLogin(r); err != nil {
		return "", nil, err
	}
	id := r.PathValue("id")
	p, err := l.Registry.Get(id)
	if err != nil {
		return "", nil, err
	}
	d, ok := p.(providers.LoginDriver)
	if !ok {
		return "", nil, errdefs.InvalidArgument("provider %q has no login the daemon can drive: log its CLI in on the host as the host user", id)
	}
	return id, d, nil
}

func (l *ProviderLogins) handleStart(w http.ResponseWriter, r *http.Request) error {
	id, d, err := l.driver(r)
	if err != nil {
		return err
	}
	var req api.StartLoginRequest
	if r.ContentLength != 0 {
		if err := daemon.DecodeBody(w, r, &req); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune()
	for _, e := range l.logins {
		if e.provider == id && !e.session.Status().Done() {
			return daemon.WriteJSON(w, http.StatusAccepted, e.view())
		}
	}
	s, err := d.StartLogin(r.Context(), req.Method)
	if errors.Is(err, providers.ErrLoginMethod) {
		return errdefs.InvalidArgument("method: %v", err)
	}
	if err != nil {
		return &daemon.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
			Message: fmt.Sprintf("start the %s login as the host user: %v", id, err), Err: errdefs.ErrUnavailable}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	e := &loginEntry{id: hex.EncodeToString(b), provider: id, session: s}
	if l.logins == nil {
		l.logins = map[string]*loginEntry{}
	}
	l.logins[e.id] = e
	return daemon.WriteJSON(w, http.StatusAccepted, e.view())
}

func (l *ProviderLogins) entry(r *http.Request) (*loginEntry, error) {
	if _, _, err := l.driver(r); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.logins[r.PathValue("login")]
	if !ok || e.provider != r.PathValue("id") {
		return nil, fmt.Errorf("login %q of provider %q: %w", r.PathValue("login"), r.PathValue("id"), errdefs.ErrNotFound)
	}
	return e, nil
}

func (l *ProviderLogins) handleGet(w http.ResponseWriter, r *http.Request) error {
	e, err := l.entry(r)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, e.view())
}

func (l *ProviderLogins) handleCode(w http.ResponseWriter, r *http.Request) error {
	e, err := l.entry(r)
	if err != nil {
		return err
	}
	var req api.LoginCodeRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	if err := e.session.SubmitCode(req.Code); err != nil {
		return &daemon.Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: err.Error(), Err: errdefs.ErrConflict}
	}
	return daemon.WriteJSON(w, http.StatusOK, e.view())
}

func (l *ProviderLogins) handleCancel(w http.ResponseWriter, r *http.Request) error {
	e, err := l.entry(r)
	if err != nil {
		return err
	}
	e.session.Cancel()
	<-e.session.Done()
	return daemon.WriteJSON(w, http.StatusOK, e.view())
}

func (l *ProviderLogins) handleLogout(w http.ResponseWriter, r *http.Request) error {
	id, d, err := l.driver(r)
	if err != nil {
		return err
	}
	msg, err := d.Logout(r.Context())
	if err != nil {
		return &daemon.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: err.Error(), Err: errdefs.ErrUnavailable}
	}
	return daemon.WriteJSON(w, http.StatusOK, api.LogoutResponse{Provider: id, Message: msg})
}

// prune drops logins that ended more than keepEndedLogins ago.
func (l *ProviderLogins) prune() {
	for id, e := range l.logins {
		if st := e.session.Status(); st.Done() && time.Since(st.EndedAt) > keepEndedLogins {
			delete(l.logins, id)
		}
	}
}

func (e *loginEntry) view() api.ProviderLogin {
	st := e.session.Status()
	return api.ProviderLogin{ID: e.id, Provider: e.provider, State: st.State, Method: st.Method, URL: st.URL,
		UserCode: st.UserCode, NeedsCode: st.NeedsCode, Message: st.Message, StartedAt: st.StartedAt, EndedAt: st.EndedAt}
}
