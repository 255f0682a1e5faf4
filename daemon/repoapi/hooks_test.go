package repoapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"remote/api"
	"remote/daemon"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/provisioning"
)

type countingStore struct{ calls atomic.Int32 }

func (s *countingStore) Project(string) (api.Project, error) {
	s.calls.Add(1)
	return api.Project{}, errdefs.NotFound("no project")
}
func (s *countingStore) Secrets(string) ([]store.Secret, error) { s.calls.Add(1); return nil, nil }

type noStarter struct{}

func (noStarter) Start(context.Context, api.Project) (provisioning.Container, error) {
	return provisioning.Container{}, errdefs.Unavailable("no")
}

type noExec struct{}

func (noExec) Exec(context.Context, string, lxdexec.ExecRequest) (*lxdexec.Exec, error) {
	return nil, errdefs.Unavailable("no")
}

// TestAttackForgeEventsPeer: the forge-events route is a peer route (a
// forge names no user), but only a peer that may assert users (remote-web,
// root, the daemon's uid) may deliver: an ordinary local user calling
// the socket is refused before the project, its secret or the body is
// looked at.
func TestAttackForgeEventsPeer(t *testing.T) {
	st := &countingStore{}
	rt, err := New(Options{Store: st, Starter: noStarter{}, Exec: noExec{}})
	if err != nil {
		t.Fatal(err)
	}
	var h daemon.HandlerFunc
	for _, r := range rt.Routes() {
		if r.Pattern == "/v1/projects/{name}/forge-events" {
			h = r.Handler
		}
	}
	if h == nil {
		t.Fatal("no forge-events route")
	}
	for name, peer := range map[string]*daemon.Peer{
		"a local user": {UID: 1000, Allowed: true, Name: "mallory"},
		"no peer":      nil,
	} {
		req := httptest.NewRequest("POST", "/v1/projects/calc/forge-events?forge=github", strings.NewReader(`{}`))
		if peer != nil {
			req = req.WithContext(daemon.WithPeer(req.Context(), peer))
		}
		req.SetPathValue("name", "calc")
		err := h(httptest.NewRecorder(), req)
		if !errdefs.IsPermissionDenied(err) {
			t.Errorf("%s: %v, want permission denied", name, err)
		}
	}
	if n := st.calls.Load(); n != 0 {
		t.Errorf("the store was asked %d times", n)
	}
	// A frontend passes the peer check (and fails further on: no server here).
	req := httptest.NewRequest("POST", "/v1/projects/calc/forge-events?forge=github", strings.NewReader(`{}`))
	req = req.WithContext(daemon.WithPeer(req.Context(), &daemon.Peer{UID: 999, Allowed: true, MayAssert: true}))
	req.SetPathValue("name", "calc")
	if err := h(httptest.NewRecorder(), req); err == nil || errdefs.IsPermissionDenied(err) {
		t.Errorf("frontend: %v", err)
	}
}
