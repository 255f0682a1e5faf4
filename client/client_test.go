package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/client"
	"remote/daemon/daemontest"
	"remote/internal/errdefs"
	"remote/internal/testkit"
)

// newPair starts the real daemon (daemontest) and a client acting as alice.
func newPair(t *testing.T, o daemontest.Options) (*daemontest.Daemon, *client.Client) {
	t.Helper()
	d := daemontest.New(t, o)
	return d, d.Client("alice")
}

func TestChatsRoundTrip(t *testing.T) {
	d, c := newPair(t, daemontest.Options{})
	ctx := context.Background()
	info, err := c.Info(ctx)
	if err != nil || info.Version != "test" || info.LXD.Reachable {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	ps, err := c.Providers(ctx)
	if err != nil || len(ps) != 2 || ps[0].ID != "claude" {
		t.Fatalf("Providers = %+v, %v", ps, err)
	}
	chat, err := c.CreateChat(ctx, api.CreateChatRequest{Provider: "claude", Title: "hello", Cwd: "/tmp"})
	if err != nil || chat.ID == "" || chat.Owner != "alice" {
		t.Fatalf("CreateChat = %+v, %v", chat, err)
	}
	got, err := c.Chat(ctx, chat.ID)
	if err != nil || got.ID != chat.ID || got.Title != "hello" {
		t.Fatalf("Chat = %+v, %v", got, err)
	}
	list, err := c.Chats(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("Chats = %+v, %v", list, err)
	}
	if other, err := c.WithUser("bob").Chats(ctx); err != nil || len(other) != 0 {
		t.Fatalf("bob sees %+v, %v", other, err)
	}
	if _, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	// Follow until the closing sync: replay and live, in order.
	st, err := c.Follow(ctx, chat.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var text strings.Builder
	for {
		ev, err := st.Next()
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == api.EventAssistantText {
			text.WriteString(ev.Text)
		}
		if ev.Type == api.EventSync && !ev.Running {
			break
		}
	}
	st.Close()
	if text.String() != "echo: hi" {
		t.Fatalf("assistant text %q (events %v)", text.String(), types)
	}
	// user, session, two assistant_text pieces, complete.
	evs, err := c.Events(ctx, chat.ID, 3)
	if err != nil || len(evs) != 2 || evs[0].Seq != 4 {
		t.Fatalf("Events(since 3) = %+v, %v", evs, err)
	}
	stop := errors.New("stop")
	n := 0
	if err := c.EachEvent(ctx, chat.ID, 0, func(api.Event) error { n++; return stop }); err != stop || n != 1 { //nolint:errorlint // the callback's own error comes back, unwrapped
		t.Fatalf("EachEvent stop: %v after %d", err, n)
	}
	fork, err := c.ForkChat(ctx, chat.ID)
	if err != nil || fork.ID == chat.ID || !fork.ForkPending {
		t.Fatalf("ForkChat = %+v, %v", fork, err)
	}
	if err := c.DeleteChat(ctx, chat.ID); err != nil {
		t.Fatal(err)
	}
	audit := d.Audit()
	if len(audit) < 4 {
		t.Fatalf("audit log has %d requests, want create, prompt, fork and delete: %+v", len(audit), audit)
	}
	for _, r := range audit {
		if r.User != "alice" && r.User != "bob" {
			t.Errorf("request %s sent user %q", r.Route, r.User)
		}
	}
}

func TestErrorsAreTyped(t *testing.T) {
	d, c := newPair(t, daemontest.Options{})
	d.Claude.SetHold(true)
	ctx := context.Background()
	chat, err := c.CreateChat(ctx, api.CreateChatRequest{Provider: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "one"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		call   func() error
		status int
		code   string
		text   string
		class  error // errdefs class the client maps the code to (ToNative)
	}{
		{"unknown chat", func() error { _, err := c.Chat(ctx, "abcdef"); return err }, 404, api.CodeNotFound, `not_found: chat abcdef: not found`, errdefs.ErrNotFound},
		{"bad chat id", func() error { _, err := c.Chat(ctx, "XYZ"); return err }, 400, api.CodeBadRequest, `invalid chat id "XYZ"`, errdefs.ErrInvalidArgument},
		{"another user's chat", func() error { _, err := c.WithUser("bob").Chat(ctx, chat.ID); return err }, 404, api.CodeNotFound, "not found", errdefs.ErrNotFound},
		{"second prompt", func() error { _, err := c.Prompt(ctx, chat.ID, api.PromptRequest{Text: "two"}); return err }, 409, api.CodePromptAlreadyRunning, "a previous prompt is still running", errdefs.ErrConflict},
		{"bad provider", func() error { _, err := c.CreateChat(ctx, api.CreateChatRequest{Provider: "nope"}); return err }, 400, api.CodeBadRequest, `"nope"`, errdefs.ErrInvalidArgument},
		{"no user", func() error { _, err := c.WithUser("").Chats(ctx); return err }, 401, api.CodeUnauthorized, "X-Remote-User", errdefs.ErrUnauthenticated},
		{"missing secret", func() error { return c.DeleteSecret(ctx, "nope", "K") }, 404, api.CodeNotFound, "nope", errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *client.Error", err, err)
			}
			if e.Status != tt.status || e.Code != tt.code || client.Code(err) != tt.code || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %+v (%q), want %d %s containing %q", e, err, tt.status, tt.code, tt.text)
			}
			if !errors.Is(err, tt.class) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tt.class)
			}
		})
	}
	if err := c.Cancel(ctx, chat.ID); err != nil {
		t.Fatal(err)
	}
}

// TestErrorWithoutEnvelope: an answer that is not the JSON envelope (a
// proxy, a panic) still becomes a *Error with a code from its status.
func TestErrorWithoutEnvelope(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	srv := startRaw(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream is down", http.StatusServiceUnavailable)
	}))
	_ = srv
	_, err := client.New(sock).Info(context.Background())
	var e *client.Error
	if !errors.As(err, &e) || e.Code != api.CodeUnavailable || e.Message != "upstream is down" {
		t.Fatalf("err = %#v", err)
	}
}

func TestNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	_, err := client.New(sock).Info(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connect to remoted at "+sock) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
	var e *client.Error
	if errors.As(err, &e) {
		t.Fatal("a dial failure must not look like a daemon answer")
	}
}

// TestProjectsSecretsExec runs on the real LXD: the project's container is
// created from the busybox test image.
func TestProjectsSecretsExec(t *testing.T) {
	d, c := newPair(t, daemontest.Options{LXD: true})
	ctx := context.Background()
	info, err := c.Info(ctx)
	if err != nil || !info.LXD.Reachable || info.LXD.ServerVersion == "" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	name := testkit.ContainerName("web")
	testkit.CleanupProjectContainers(t, d.LXD, name)
	p, err := c.CreateProject(ctx, api.CreateProjectRequest{Name: name, Ports: []int{8080}})
	if err != nil || !strings.HasPrefix(p.Container, "remote-"+name+"-") || !p.Autostart {
		t.Fatalf("CreateProject = %+v, %v", p, err)
	}
	if p, err = c.StartProject(ctx, name); err != nil || p.Status != "running" {
		t.Fatalf("StartProject = %+v, %v", p, err)
	}
	three := 3
	var out, errb bytes.Buffer
	code, err := c.Exec(ctx, name, api.ExecRequest{Command: []string{"sh", "-c", "printf 'out1 '; printf err >&2; printf out2; exit 3"}}, &out, &errb)
	if err != nil || code != three || out.String() != "out1 out2" || errb.String() != "err" {
		t.Fatalf("Exec = %d, %v, %q, %q", code, err, out.String(), errb.String())
	}
	if p, err = c.StopProject(ctx, name); err != nil || p.Status != "stopped" {
		t.Fatalf("StopProject = %+v, %v", p, err)
	}
	if ps, err := c.Projects(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("Projects = %+v, %v", ps, err)
	}
	if err := c.PutSecret(ctx, name, "API_TOKEN", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecret(ctx, name, "BAD-KEY", "v"); client.Code(err) != api.CodeBadRequest {
		t.Fatalf("bad key: %v", err)
	}
	keys, err := c.Secrets(ctx, name)
	if err != nil || len(keys) != 1 || keys[0].Key != "API_TOKEN" {
		t.Fatalf("Secrets = %+v, %v", keys, err)
	}
	if err := c.DeleteSecret(ctx, name, "API_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteProject(ctx, name, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Project(ctx, name); !client.IsNotFound(err) {
		t.Fatalf("Project after delete: %v", err)
	}
}

// TestExecFrames: an error frame becomes *ExecError and a stream that ends
// without an exit frame ErrExecNoExit (a daemon that died mid-exec), never
// a made-up exit code. The real daemon sends neither on demand, so a raw
// server plays them.
func TestExecFrames(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		check      func(error) bool
	}{
		{"error frame", `{"error":"exec failed: boom"}` + "\n", func(err error) bool {
			var ee *client.ExecError
			return errors.As(err, &ee) && ee.Message == "exec failed: boom"
		}},
		{"no exit", `{"stream":"stdout","data":"b3V0"}` + "\n", func(err error) bool { return errors.Is(err, client.ErrExecNoExit) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "s.sock")
			startRaw(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, tt.body) }))
			_, err := client.New(sock).Exec(context.Background(), "web", api.ExecRequest{Command: []string{"x"}}, io.Discard, io.Discard)
			if !tt.check(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestFollowStopsWithContext(t *testing.T) {
	_, c := newPair(t, daemontest.Options{Chats: []daemontest.Chat{
		{Chat: api.Chat{ID: "abcd", Owner: "alice", Provider: "claude"}, Events: []api.Event{{Type: api.EventUser, Text: "x"}}},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.Follow(ctx, "abcd", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, want := range []string{api.EventUser, api.EventSync} {
		ev, err := st.Next()
		if err != nil || ev.Type != want {
			t.Fatalf("Next = %+v, %v; want %s", ev, err, want)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := st.Next(); done <- err }()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Next after cancel returned an event")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after the context was cancelled")
	}
}

// TestMalformedAnswers: a 2xx answer that is not what the route promises is
// an error naming the route, never a silently empty result.
func TestMalformedAnswers(t *testing.T) {
	tests := []struct {
		name, body string
		call       func(*client.Client) error
		want       string
	}{
		{"events object", `{}`, func(c *client.Client) error { _, err := c.Events(context.Background(), "abcd", 0); return err }, "want a JSON array"},
		{"events truncated", `[{"seq":1,"type":"user"},`, func(c *client.Client) error { _, err := c.Events(context.Background(), "abcd", 0); return err }, "decode event"},
		{"chat garbage", `not json`, func(c *client.Client) error { _, err := c.Chat(context.Background(), "abcd"); return err }, "GET /v1/chats/abcd: decode answer"},
		{"follow garbage", "garbage\n", func(c *client.Client) error {
			st, err := c.Follow(context.Background(), "abcd", 0)
			if err != nil {
				return err
			}
			defer st.Close()
			_, err = st.Next()
			return err
		}, `decode event "garbage"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "s.sock")
			startRaw(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, tt.body) }))
			err := tt.call(client.New(sock))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
