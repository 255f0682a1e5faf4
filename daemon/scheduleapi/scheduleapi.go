// Package scheduleapi serves the chats' schedule routes (docs/api.md,
// "Schedules"): create and list on a chat, change, delete, run now,
// history, routine tokens, and the routine firing remote-web forwards
// (POST /v1/schedules/{id}/fire, authorised by the schedule's routine
// token alone). Every other route acts for the chat's owner; another
// user's chat or schedule is not found. The domain is daemon/schedule.
//
// It imports daemon (routes, errors, identity) and daemon/schedule; it
// must never import projectapi, repoapi or config.
package scheduleapi

import (
	"errors"
	"net/http"
	"strings"

	"remote/api"
	"remote/daemon"
	"remote/daemon/schedule"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
)

// Routes serves the schedule routes.
type Routes struct {
	s *schedule.Scheduler
}

// New returns the routes of scheduler s (nil: they answer 503).
func New(s *schedule.Scheduler) *Routes { return &Routes{s: s} }

// Routes lists the schedule routes.
func (rt *Routes) Routes() []daemon.Route {
	return []daemon.Route{
		{Method: http.MethodPost, Pattern: "/v1/chats/{id}/schedules", Access: daemon.AccessUser, Handler: rt.create},
		{Method: http.MethodGet, Pattern: "/v1/chats/{id}/schedules", Access: daemon.AccessUser, Handler: rt.list},
		{Method: http.MethodPatch, Pattern: "/v1/schedules/{id}", Access: daemon.AccessUser, Handler: rt.patch},
		{Method: http.MethodDelete, Pattern: "/v1/schedules/{id}", Access: daemon.AccessUser, Handler: rt.delete},
		{Method: http.MethodPost, Pattern: "/v1/schedules/{id}/run", Access: daemon.AccessUser, Handler: rt.run},
		{Method: http.MethodGet, Pattern: "/v1/schedules/{id}/history", Access: daemon.AccessUser, Handler: rt.history},
		{Method: http.MethodPost, Pattern: "/v1/schedules/{id}/token", Access: daemon.AccessUser, Handler: rt.token},
		// The routine token is the only authority: any allowed peer
		// (remote-web's hook) may present it; no acting user.
		{Method: http.MethodPost, Pattern: "/v1/schedules/{id}/fire", Access: daemon.AccessPeer, Handler: rt.fire},
	}
}

var _ daemon.RouteProvider = (*Routes)(nil)

var (
	chatIDRE     = lazyre.New(`^[0-9a-f]{4,32}$`)
	scheduleIDRE = lazyre.New(`^[0-9a-f]{12}$`)
)

func (rt *Routes) sched() (*schedule.Scheduler, error) {
	s := rt.s
	if s == nil {
		return nil, errdefs.Unavailable("schedules are not running yet")
	}
	return s, nil
}

// ids returns the scheduler, the caller and the checked path id.
func (rt *Routes) ids(r *http.Request, chat bool) (*schedule.Scheduler, string, string, error) {
	s, err := rt.sched()
	if err != nil {
		return nil, "", "", err
	}
	id := r.PathValue("id")
	if chat && !chatIDRE.MatchString(id) {
		return nil, "", "", errdefs.InvalidArgument("id: invalid chat id %.40q (want 4-32 lowercase hex characters)", id)
	}
	if !chat && !scheduleIDRE.MatchString(id) {
		return nil, "", "", errdefs.InvalidArgument("id: invalid schedule id %.40q (want 12 lowercase hex characters)", id)
	}
	return s, daemon.UserFrom(r.Context()), id, nil
}

func (rt *Routes) create(w http.ResponseWriter, r *http.Request) error {
	s, user, id, err := rt.ids(r, true)
	if err != nil {
		return err
	}
	var req api.ScheduleRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	sc, err := s.Create(user, id, req)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusCreated, sc)
}

func (rt *Routes) list(w http.ResponseWriter, r *http.Request) error {
	s, user, id, err := rt.ids(r, true)
	if err != nil {
		return err
	}
	l, err := s.List(user, id)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, l)
}

func (rt *Routes) patch(w http.ResponseWriter, r *http.Request) error {
	s, user, id, err := rt.ids(r, false)
	if err != nil {
		return err
	}
	var p api.SchedulePatch
	if err := daemon.DecodeBody(w, r, &p); err != nil {
		return err
	}
	sc, err := s.Patch(user, id, p)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, sc)
}

func (rt *Routes) delete(w http.ResponseWriter, r *http.Request) error {
	s, user, id, err := rt.ids(r, false)
	if err != nil {
		return err
	}
	if err := s.Delete(user, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (rt *Routes) run(w http.ResponseWriter, r *http.Request) error {
	s, user, id, err := rt.ids(r, false)
	if err != nil {
		return err
	}
	res, err := s.RunNow(r.Context(), user, id)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusAccepted, res)
}

func (rt *Routes) history(w http.ResponseWriter, r *http.Request) error {
	s, user, id, err := rt.ids(r, false)
	if err != nil {
		return err
	}
	h, err := s.History(user, id)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, h)
}

func (rt *Routes) token(w http.ResponseWriter, r *http.Request) error {
	s, user, id, err := rt.ids(r, false)
	if err != nil {
		return err
	}
	tok, err := s.Token(user, id)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return daemon.WriteJSON(w, http.StatusCreated, api.RoutineToken{Token: tok})
}

// errNoToken: the fire route takes a bearer routine token and nothing
// else.
var errNoToken = errors.New("missing bearer token")

// bearer returns the request's bearer credential.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" || len(tok) > 256 {
		return "", errNoToken
	}
	return tok, nil
}

func (rt *Routes) fire(w http.ResponseWriter, r *http.Request) error {
	s, err := rt.sched()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	tok, err := bearer(r)
	if err != nil || !scheduleIDRE.MatchString(id) {
		return errdefs.PermissionDenied("this token may not fire this routine")
	}
	res, err := s.Fire(r.Context(), id, tok)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusAccepted, res)
}
