package projectapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// noExec is a ProjectExecer for routes that never reach a container.
type noExec struct{}

func (noExec) Exec(context.Context, string, lxdexec.ExecRequest) (*lxdexec.Exec, error) {
	return nil, errors.New("no containers in this test")
}

// auditLines returns the audit lines of a JSON log, without the timestamp.
func auditLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["@module"] == "api.audit" {
			delete(m, "@timestamp")
			out = append(out, m)
		}
	}
	return out
}

// TestAuditStateChangingRequests: every request that may change state
// leaves one info line naming the peer, the acting user, the route, its
// target and the status; reads leave none, and a secret's value appears
// nowhere in the log, even at trace level.
func TestAuditStateChangingRequests(t *testing.T) {
	var logs lockedBuffer
	var st ProjectStore
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}}, func(o *daemon.Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "api", Level: hclog.Trace, Output: &logs, JSONFormat: true})
		st = o.Store.(ProjectStore)
		routes, err := NewProjects(ProjectsOptions{Store: st, Preparer: &provisioning.Preparer{}, Exec: noExec{}, Logger: o.Logger.Named("projects")})
		if err != nil {
			t.Fatal(err)
		}
		o.RouteProviders = append(o.RouteProviders, routes)
	})
	if err := st.CreateProject(api.Project{Name: "p", Owner: "alice", Container: ContainerPrefix + "p", Status: "missing", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-VALUE-never-logged"

	if code, body := ts.do("PUT", "/v1/projects/p/secrets/API_TOKEN", "alice", api.PutSecretRequest{Value: secret}); code != http.StatusNoContent {
		t.Fatalf("put secret: %d %s", code, body)
	}
	if code, body := ts.do("PUT", "/v1/projects/p/secrets/API_TOKEN", "bob", api.PutSecretRequest{Value: secret}); code != http.StatusNotFound {
		t.Fatalf("put secret as bob: %d %s", code, body)
	}
	if code, body := ts.do("GET", "/v1/projects/p/secrets", "alice", nil); code != http.StatusOK {
		t.Fatalf("list secrets: %d %s", code, body)
	}
	chat := ts.createChat("alice", "claude")
	if code, body := ts.do("DELETE", "/v1/chats/"+chat.ID, "alice", nil); code != http.StatusNoContent {
		t.Fatalf("delete chat: %d %s", code, body)
	}
	if _, resp, err := ts.dialWS("/ws/chat/"+chat.ID, "alice"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("chat socket of a deleted chat: %v", err)
	}
	live := ts.createChat("alice", "claude")
	c, _, err := ts.dialWS("/ws/chat/"+live.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, c) // the socket is being served: its audit line is out
	c.Close()

	got := auditLines(t, logs.String())
	uid := float64(os.Getuid()) // the test's client is this process
	want := []map[string]any{
		{"@level": "info", "@message": "request", "@module": "api.audit", "route": "PUT /v1/projects/{name}/secrets/{key}", "user": "alice", "status": 204.0, "peer_uid": uid, "name": "p", "key": "API_TOKEN"},
		{"@level": "info", "@message": "request", "@module": "api.audit", "route": "PUT /v1/projects/{name}/secrets/{key}", "user": "bob", "status": 404.0, "peer_uid": uid, "name": "p", "key": "API_TOKEN"},
		{"@level": "info", "@message": "request", "@module": "api.audit", "route": "POST /v1/chats", "user": "alice", "status": 201.0, "peer_uid": uid},
		{"@level": "info", "@message": "request", "@module": "api.audit", "route": "DELETE /v1/chats/{id}", "user": "alice", "status": 204.0, "peer_uid": uid, "id": chat.ID},
		{"@level": "info", "@message": "request", "@module": "api.audit", "route": "GET /ws/chat/{id}", "user": "alice", "status": 404.0, "peer_uid": uid, "id": chat.ID},
		{"@level": "info", "@message": "request", "@module": "api.audit", "route": "POST /v1/chats", "user": "alice", "status": 201.0, "peer_uid": uid},
		{"@level": "info", "@message": "request", "@module": "api.audit", "route": "GET /ws/chat/{id}", "user": "alice", "status": 101.0, "peer_uid": uid, "id": live.ID},
	}
	for _, m := range got {
		if _, ok := m["peer_pid"].(float64); !ok {
			t.Errorf("audit line without peer_pid: %v", m)
		}
		delete(m, "peer_pid")
	}
	if len(got) != len(want) {
		t.Fatalf("audit lines:\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		gj, _ := json.Marshal(got[i])
		wj, _ := json.Marshal(want[i])
		if string(gj) != string(wj) {
			t.Errorf("audit line %d:\n%s\nwant\n%s", i, gj, wj)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the secret's value is in the log:\n%s", logs.String())
	}
}
