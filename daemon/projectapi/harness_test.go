package projectapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/daemon/socket"
	"remote/daemon/store"
	"remote/internal/testkit"
	"remote/providers"
)

// fakeProvider is a providers.Provider with func fields.
type fakeProvider struct {
	id   providers.ProviderID
	caps providers.Capabilities
	run  func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error

	mu   sync.Mutex
	reqs []providers.RunRequest
}

var _ providers.Provider = (*fakeProvider)(nil)

func (f *fakeProvider) ID() providers.ProviderID { return f.id }

func (f *fakeProvider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return f.caps, nil
}

func (f *fakeProvider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if f.run == nil {
		emit(providers.Event{Type: providers.EventAssistantDelta, Text: "ok", MessageID: "m1"})
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}
	return f.run(ctx, req, emit)
}

// testKey is a fixed secrets key for test stores.
var testKey = bytes.Repeat([]byte{7}, 32)

func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "remoted.db"), store.Options{Key: testKey})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return st
}

// testServer is a daemon.Server on a real Unix socket with a real store
// (a copy of package daemon's test harness, over its exported API).
type testServer struct {
	t      testing.TB
	srv    *daemon.Server
	hub    *runhub.Hub
	svc    *daemon.Service
	st     *store.Store
	dir    string // state and the chats' cwd
	sock   string
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

type serverOpt func(*daemon.Options)

// withHub builds o's metrics, run hub and prompt service where o has none
// (a hook that hands them to routes builds them first).
func withHub(o *daemon.Options) {
	if o.Metrics == nil {
		o.Metrics = daemon.NewMetrics()
	}
	if o.Hub == nil {
		o.Hub = daemon.NewRunHub(*o)
	}
	if o.Service == nil {
		o.Service = daemon.NewPromptService(*o, o.Hub)
	}
}

func newTestServer(t testing.TB, ps []providers.Provider, opts ...serverOpt) *testServer {
	t.Helper()
	return newTestServerIn(t, t.TempDir(), ps, opts...)
}

// newTestServerIn is newTestServer with its state (and chats' cwd) in dir.
func newTestServerIn(t testing.TB, dir string, ps []providers.Provider, opts ...serverOpt) *testServer {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "rd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	st := openStore(t, dir)
	reg := prompt.NewRegistry()
	m := map[providers.ProviderID]providers.Provider{}
	for _, p := range ps {
		m[p.ID()] = p
	}
	reg.Set(m, nil, nil)
	o := daemon.Options{
		Store: st, Registry: reg, Version: "test",
		Logger:     hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard}),
		Roots:      prompt.NewRoots([]string{dir}, ""),
		DefaultCwd: dir,
	}
	for _, f := range opts {
		f(&o)
	}
	withHub(&o)
	srv, err := daemon.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := o.Service.RecoverInterrupted(); err != nil {
		t.Fatalf("RecoverInterrupted: %v", err)
	}
	ts := &testServer{t: t, srv: srv, hub: o.Hub, svc: o.Service, st: st, dir: dir, sock: filepath.Join(sockDir, "s.sock"), done: make(chan error, 1)}
	ln, err := socket.Listen(ts.sock, "")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	go func() { ts.done <- srv.Serve(ctx, ln) }()
	ts.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", ts.sock)
	}}}
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	if ts.cancel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		ts.t.Errorf("Shutdown: %v", err)
	}
	ts.cancel()
	<-ts.done
	ts.cancel = nil
	ts.client.CloseIdleConnections()
	if err := ts.st.Close(); err != nil {
		ts.t.Errorf("close store: %v", err)
	}
}

// do sends a request as user (none when "") and returns status and body.
func (ts *testServer) do(method, path, user string, body any) (int, []byte) {
	ts.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, "http://remoted"+path, r)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set(api.HeaderUser, user)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (ts *testServer) createChat(user, provider string) api.Chat {
	ts.t.Helper()
	status, body := ts.do("POST", "/v1/chats", user, api.CreateChatRequest{Provider: provider, Cwd: ts.dir})
	if status != http.StatusCreated {
		ts.t.Fatalf("create chat: %d %s", status, body)
	}
	var c api.Chat
	if err := json.Unmarshal(body, &c); err != nil {
		ts.t.Fatal(err)
	}
	return c
}

func (ts *testServer) events(chatID string) []api.Event {
	ts.t.Helper()
	var out []api.Event
	if err := ts.st.Events(chatID, 0, 0, func(ev api.Event) error { out = append(out, ev); return nil }); err != nil {
		ts.t.Fatalf("events: %v", err)
	}
	return out
}

// waitIdle waits until the chat has no run.
func (ts *testServer) waitIdle(chatID string) {
	ts.t.Helper()
	testkit.Eventually(ts.t, 90*time.Second, func() bool { return !ts.hub.Running(chatID) }, "chat %s idle", chatID)
}

func (ts *testServer) dialWS(path, user string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", ts.sock)
	}}
	h := http.Header{}
	if user != "" {
		h.Set(api.HeaderUser, user)
	}
	return d.Dial("ws://remoted"+path, h)
}

// readEvent reads one event from a chat socket.
func readEvent(t testing.TB, c *websocket.Conn) api.Event {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
	var ev api.Event
	if err := c.ReadJSON(&ev); err != nil {
		t.Fatalf("read chat socket: %v", err)
	}
	return ev
}

func errorCode(t testing.TB, body []byte) string {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.Code
}

func types(evs []api.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
		if ev.Subtype != "" {
			out[i] += "/" + ev.Subtype
		}
	}
	return out
}
