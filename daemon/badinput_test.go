package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/internal/testkit"
	"remote/providers"
)

// snapshot renders everything stored, to prove bad input changed nothing.
func (ts *testServer) snapshot() string {
	ts.t.Helper()
	chats, err := ts.st.Chats()
	if err != nil {
		ts.t.Fatal(err)
	}
	var b bytes.Buffer
	for _, c := range chats {
		c.Running = false
		json.NewEncoder(&b).Encode(c)
		for _, ev := range ts.events(c.ID) {
			json.NewEncoder(&b).Encode(ev)
		}
	}
	return b.String()
}

func TestBadInput(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}})
	chat := ts.createChat("alice", "claude")
	ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
	ts.waitIdle(chat.ID)
	before := ts.snapshot()
	big := `{"text":"` + strings.Repeat("a", MaxBodyBytes) + `"}`
	prompt := "/v1/chats/" + chat.ID + "/prompt"
	tests := []struct {
		name, method, path, user string
		body                     any
		status                   int
		code, msg                string
	}{
		{"malformed JSON", "POST", "/v1/chats", "alice", `{"provider":`, 400, "bad_request", "malformed JSON"},
		{"unknown field", "POST", "/v1/chats", "alice", `{"provider":"claude","colour":"red"}`, 400, "bad_request", `unknown field "colour"`},
		{"wrong type", "POST", "/v1/chats", "alice", `{"provider":7}`, 400, "bad_request", `field "provider"`},
		{"oversized body", "POST", prompt, "alice", big, 413, "bad_request", "larger than"},
		{"unknown provider", "POST", "/v1/chats", "alice", `{"provider":"gpt9"}`, 400, "bad_request", `"gpt9"`},
		{"missing provider", "POST", "/v1/chats", "alice", `{}`, 400, "bad_request", "provider"},
		{"cwd outside roots", "POST", "/v1/chats", "alice", `{"provider":"claude","cwd":"/etc"}`, 400, "bad_request", `"/etc"`},
		{"relative cwd", "POST", "/v1/chats", "alice", `{"provider":"claude","cwd":"tmp"}`, 400, "bad_request", `"tmp"`},
		{"project without projects", "POST", "/v1/chats", "alice", `{"provider":"claude","project":"p"}`, 400, "bad_request", "project"},
		{"no user", "POST", "/v1/chats", "", `{"provider":"claude"}`, 401, "unauthorized", api.HeaderUser},
		{"bad user", "GET", "/v1/chats", "a b", nil, 400, "bad_request", api.HeaderUser},
		{"bad chat id", "GET", "/v1/chats/XYZ", "alice", nil, 400, "bad_request", "id"},
		{"unknown chat", "GET", "/v1/chats/abcdef012345", "alice", nil, 404, "not_found", ""},
		{"unknown chat prompt", "POST", "/v1/chats/abcdef012345/prompt", "alice", `{"text":"x"}`, 404, "not_found", ""},
		{"other user's chat", "POST", prompt, "bob", `{"text":"x"}`, 404, "not_found", ""},
		{"empty prompt", "POST", prompt, "alice", `{"text":"  "}`, 400, "bad_request", "text"},
		{"bad mode", "POST", prompt, "alice", `{"text":"x","mode":"yolo"}`, 400, "bad_request", "mode"},
		{"path-like skill", "POST", prompt, "alice", `{"text":"x","skills":["../x"]}`, 400, "bad_request", "skills[0]"},
		{"unknown skill", "POST", prompt, "alice", `{"text":"x","skills":["nope"]}`, 400, "bad_request", "nope"},
		{"bad since", "GET", "/v1/chats/" + chat.ID + "/events?since=-1", "alice", nil, 400, "bad_request", "since"},
		{"bad follow", "GET", "/v1/chats/" + chat.ID + "/events?follow=maybe", "alice", nil, 400, "bad_request", "follow"},
		{"bad interaction id", "POST", "/v1/chats/" + chat.ID + "/interactions", "alice", `{"interactionId":"not json","result":{}}`, 400, "bad_request", "interactionId"},
		{"no route", "GET", "/v1/nothing", "alice", nil, 404, "not_found", ""},
		{"wrong method", "PUT", "/v1/chats", "alice", nil, 405, "method_not_allowed", "PUT"},
		{"delete unknown", "DELETE", "/v1/chats/abcdef012345", "alice", nil, 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := ts.do(tt.method, tt.path, tt.user, tt.body)
			var e api.ErrorResponse
			if err := json.Unmarshal(body, &e); err != nil || st != tt.status || e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.msg) {
				t.Fatalf("%d %s; want %d %s containing %q", st, body, tt.status, tt.code, tt.msg)
			}
		})
	}

	t.Run("chat socket", func(t *testing.T) {
		for _, tt := range []struct {
			path, user string
			status     int
		}{
			{"/ws/chat/NOTHEX", "alice", 400},
			{"/ws/chat/abcdef012345", "alice", 404},
			{"/ws/chat/" + chat.ID, "bob", 404},
			{"/ws/chat/" + chat.ID, "", 401},
			{"/ws/chat/" + chat.ID + "?since=x", "alice", 400},
		} {
			_, resp, err := ts.dialWS(tt.path, tt.user)
			if err == nil || resp == nil || resp.StatusCode != tt.status {
				t.Errorf("dial %s as %q: %v, want %d", tt.path, tt.user, err, tt.status)
			}
		}
		ws, _, err := ts.dialWS("/ws/chat/"+chat.ID+"?since=999", "alice")
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if ev := readEvent(t, ws); ev.Type != api.EventSync {
			t.Fatalf("first frame %+v", ev)
		}
		frames := []struct {
			kind int
			data string
			want string
		}{
			{websocket.TextMessage, `not json`, "malformed JSON"},
			{websocket.TextMessage, `{"type":"dance"}`, `unknown message type "dance"`},
			{websocket.TextMessage, `{"type":"prompt","text":"x","bogus":1}`, `unknown field "bogus"`},
			{websocket.TextMessage, `{"text":"x"}`, "type: required"},
			{websocket.TextMessage, `{"type":"cancel"}`, "no prompt is currently running"}, // exactly, see below
			{websocket.TextMessage, `{"type":"interaction_response","interactionId":"1","result":{}}`, "no prompt is currently running"},
			{websocket.BinaryMessage, `{"type":"cancel"}`, "binary frames"},
		}
		for _, f := range frames {
			if err := ws.WriteMessage(f.kind, []byte(f.data)); err != nil {
				t.Fatalf("write %s: %v", f.data, err)
			}
			ev := readEvent(t, ws) // the connection stays open and answers each one
			if ev.Type != api.EventError || !strings.Contains(ev.Message, f.want) || ev.Seq != 0 ||
				(f.data == `{"type":"cancel"}` && f.kind == websocket.TextMessage && ev.Message != "no prompt is currently running") {
				t.Errorf("frame %s: got %+v, want a transient error containing %q", f.data, ev, f.want)
			}
			if strings.Contains(f.data, `"prompt"`) { // a refused prompt is closed with a sync
				if ev := readEvent(t, ws); ev.Type != api.EventSync || ev.Running {
					t.Errorf("frame %s: then %+v, want a closing sync", f.data, ev)
				}
			}
		}
		// An oversized frame closes the connection (read limit 1 MiB).
		ws.WriteMessage(websocket.TextMessage, []byte(big))
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
			t.Errorf("oversized frame: %v, want close 1009", err)
		}
	})

	if after := ts.snapshot(); after != before {
		t.Errorf("bad input changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// Peer credentials: the test binary re-executes itself as nobody and asks
// for /v1/info over the socket.
func TestMain(m *testing.M) {
	if sock := os.Getenv("REMOTED_TEST_PEER_CLIENT"); sock != "" {
		os.Exit(peerClient(sock))
	}
	if sock := os.Getenv("REMOTED_TEST_PEER_SCRIPT"); sock != "" {
		os.Exit(peerScript(sock)) // identity_test.go
	}
	os.Exit(m.Run())
}

func peerClient(sock string) int {
	c := http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (netConn, error) { return dialUnix(sock) }}}
	resp, err := c.Get("http://remoted/v1/info")
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, body)
	return 0
}

func TestPeerCredentials(t *testing.T) {
	testkit.NeedsRoot(t, "switching the client to nobody")
	ts := newTestServer(t, nil)
	// Open the socket's directory and file to everyone, so only the
	// daemon's peer check can refuse nobody.
	os.Chmod(filepath.Dir(ts.sock), 0o755)
	os.Chmod(ts.sock, 0o666)
	binDir, err := os.MkdirTemp("", "rdbin")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	os.Chmod(binDir, 0o755)
	self, _ := os.Executable()
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "client")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(cred *syscall.Credential) string {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = []string{"REMOTED_TEST_PEER_CLIENT=" + ts.sock}
		cmd.Dir = binDir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("client: %v: %s", err, out)
		}
		return string(out)
	}
	for _, tt := range []struct {
		name string
		cred *syscall.Credential
		want string
	}{
		{"nobody is refused", &syscall.Credential{Uid: 65534, Gid: 65534}, `403 {"error":{"code":"forbidden"`},
		{"root passes", nil, `200 {"version":"test"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(tt.cred); !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %q, want prefix %q", got, tt.want)
			}
		})
	}
	t.Run("listed uid passes", func(t *testing.T) {
		ts.srv.SetAccess(Access{UIDs: []int{65534}}) // read per connection: applies to the next one
		if got := run(&syscall.Credential{Uid: 65534, Gid: 65534}); !strings.HasPrefix(got, "200 ") {
			t.Errorf("listed nobody: %q", got)
		}
	})
	t.Run("browser origin refused", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "http://remoted/v1/info", nil)
		req.Header.Set("Origin", "https://evil.example")
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin without %s: %d", api.HeaderFrontend, resp.StatusCode)
		}
		req.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
		resp, err = ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Origin through remote-web: %d", resp.StatusCode)
		}
	})
}
