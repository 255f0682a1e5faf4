package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/testkit"
	"remote/providers"
)

// peerRequest is one request the re-executed test binary sends as another
// uid (env REMOTED_TEST_PEER_SCRIPT names the socket, the JSON request list
// follows on stdin); peerAnswer is what it prints for each, one JSON line.
type peerRequest struct {
	Method, Path, User string
	Body               json.RawMessage `json:",omitempty"`
	// Upgrade asks for a WebSocket upgrade.
	Upgrade bool `json:",omitempty"`
	// Frontend marks the request as relayed by remote-web
	// (X-Remote-Frontend).
	Frontend bool `json:",omitempty"`
}

type peerAnswer struct {
	Status int
	Body   string
}

// peerScript runs in the child: it sends each request over sock and
// prints the answers. It exits non-zero only when it cannot talk at all.
func peerScript(sock string) int {
	var reqs []peerRequest
	if err := json.NewDecoder(os.Stdin).Decode(&reqs); err != nil {
		fmt.Println("error: read script:", err)
		return 2
	}
	c := http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (netConn, error) { return dialUnix(sock) }}}
	enc := json.NewEncoder(os.Stdout)
	for _, pr := range reqs {
		var body io.Reader
		if pr.Body != nil {
			body = bytes.NewReader(pr.Body)
		}
		req, _ := http.NewRequest(pr.Method, "http://remoted"+pr.Path, body)
		if pr.Body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if pr.User != "" {
			req.Header.Set(api.HeaderUser, pr.User)
		}
		if pr.Frontend {
			req.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
		}
		if pr.Upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		_ = enc.Encode(peerAnswer{Status: resp.StatusCode, Body: string(data)})
	}
	return 0
}

// asNobody prepares ts for a client running as nobody (uid and gid 65534):
// the socket's directory is opened for traversal and the socket file is
// given group 65534, which the server's access list admits. It returns a
// function that runs a script of requests as nobody and returns the
// answers in order.
func asNobody(t *testing.T, ts *testServer) func(reqs ...peerRequest) []peerAnswer {
	t.Helper()
	testkit.NeedsRoot(t, "running the client as nobody")
	if err := os.Chmod(filepath.Dir(ts.sock), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ts.sock, 0, 65534); err != nil {
		t.Fatal(err)
	}
	// The test binary lives in a 0700 build directory: copy it where
	// nobody may execute it.
	binDir, err := os.MkdirTemp("", "rdbin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "client")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return func(reqs ...peerRequest) []peerAnswer {
		t.Helper()
		script, _ := json.Marshal(reqs)
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = []string{"REMOTED_TEST_PEER_SCRIPT=" + ts.sock}
		cmd.Dir = binDir
		cmd.Stdin = bytes.NewReader(script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("client as nobody: %v: %s", err, out)
		}
		var answers []peerAnswer
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var a peerAnswer
			if err := dec.Decode(&a); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("client output %q: %v", out, err)
			}
			answers = append(answers, a)
		}
		if len(answers) != len(reqs) {
			t.Fatalf("client answered %d of %d requests: %s", len(answers), len(reqs), out)
		}
		return answers
	}
}

// aliceChat creates alice's chat (as root, which may name her) with a
// prompt in it, and returns its id.
func aliceChat(t *testing.T, ts *testServer) string {
	t.Helper()
	st, body := ts.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Cwd: ts.dir, Title: "alice-private"})
	if st != http.StatusCreated {
		t.Fatalf("create alice's chat: %d %s", st, body)
	}
	var c api.Chat
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if st, body := ts.do("POST", "/v1/chats/"+c.ID+"/prompt", "alice", api.PromptRequest{Text: "alice's secret plan"}); st != http.StatusAccepted && st != http.StatusOK {
		t.Fatalf("prompt alice's chat: %d %s", st, body)
	}
	ts.waitIdle(c.ID)
	return c.ID
}

// TestAttackImpersonationFromUnprivilegedPeer: a local user the socket
// admits (nobody, through the socket's group) names alice in
// X-Remote-User. It must be refused with 403 on every route and never see
// alice's chat; without the header (or naming itself) it acts as nobody.
func TestAttackImpersonationFromUnprivilegedPeer(t *testing.T) {
	var logs lockedBuffer
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}}, func(o *Options) {
		o.Access = Access{GIDs: []int{65534}}
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "api", Level: hclog.Info, Output: &logs, JSONFormat: true})
	})
	run := asNobody(t, ts)
	id := aliceChat(t, ts)
	before := len(ts.events(id))

	const refusal = `{"error":{"code":"forbidden","message":"X-Remote-User \"alice\" refused: uid 65534 (nobody) may act only as itself; only root, the daemon's user and [daemon] frontend_uids may name another user"}}` + "\n"
	attack := []peerRequest{
		{Method: "GET", Path: "/v1/chats", User: "alice"},
		{Method: "GET", Path: "/v1/chats/" + id, User: "alice"},
		{Method: "GET", Path: "/v1/chats/" + id + "/events", User: "alice"},
		{Method: "POST", Path: "/v1/chats/" + id + "/prompt", User: "alice", Body: json.RawMessage(`{"text":"exfiltrate"}`)},
		{Method: "POST", Path: "/v1/chats/" + id + "/fork", User: "alice"},
		{Method: "DELETE", Path: "/v1/chats/" + id, User: "alice"},
		{Method: "GET", Path: "/ws/chat/" + id, User: "alice", Upgrade: true},
		{Method: "POST", Path: "/v1/chats", User: "alice", Body: json.RawMessage(`{"provider":"claude","cwd":` + jsonString(ts.dir) + `}`)},
	}
	for i, a := range run(attack...) {
		if a.Status != http.StatusForbidden || a.Body != refusal {
			t.Errorf("%s %s as nobody naming alice: %d %s, want 403 %s", attack[i].Method, attack[i].Path, a.Status, a.Body, refusal)
		}
	}
	// The refused prompt is audited with who tried it and whom it named.
	wantAudit := `{"@level":"info","@message":"request","@module":"api.audit","asserted":"alice","id":"` + id + `","peer_uid":65534,"route":"POST /v1/chats/{id}/prompt","status":403,"user":""}`
	found := false
	for _, m := range auditLines(t, logs.String()) {
		delete(m, "peer_pid")
		if b, _ := json.Marshal(m); string(b) == wantAudit {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit line %s in\n%s", wantAudit, logs.String())
	}
	if n := len(ts.events(id)); n != before {
		t.Errorf("alice's chat has %d events after the attack, want %d", n, before)
	}
	if c, err := ts.st.Chat(id); err != nil || c.Owner != "alice" {
		t.Errorf("alice's chat after the attack: %+v, %v", c, err)
	}

	// Without the header, or naming itself, nobody acts as nobody.
	own := run(
		peerRequest{Method: "GET", Path: "/v1/chats"},
		peerRequest{Method: "GET", Path: "/v1/chats/" + id},
		peerRequest{Method: "POST", Path: "/v1/chats", Body: json.RawMessage(`{"provider":"claude","title":"mine","cwd":` + jsonString(ts.dir) + `}`)},
		peerRequest{Method: "GET", Path: "/v1/chats", User: "nobody"},
	)
	if own[0].Status != http.StatusOK || own[0].Body != "[]\n" {
		t.Errorf("nobody's own list: %d %s, want 200 []", own[0].Status, own[0].Body)
	}
	if own[1].Status != http.StatusNotFound {
		t.Errorf("alice's chat as nobody: %d %s, want 404", own[1].Status, own[1].Body)
	}
	var mine api.Chat
	if own[2].Status != http.StatusCreated || json.Unmarshal([]byte(own[2].Body), &mine) != nil || mine.Owner != "nobody" {
		t.Errorf("create as nobody: %d %s, want 201 owned by nobody", own[2].Status, own[2].Body)
	}
	var listed []api.Chat
	if own[3].Status != http.StatusOK || json.Unmarshal([]byte(own[3].Body), &listed) != nil || len(listed) != 1 || listed[0].ID != mine.ID || listed[0].Owner != "nobody" {
		t.Errorf("list naming itself: %d %s, want nobody's one chat %s", own[3].Status, own[3].Body, mine.ID)
	}
	for i, a := range append(run(attack...), own...) {
		if strings.Contains(a.Body, "secret plan") || strings.Contains(a.Body, "alice-private") {
			t.Errorf("answer %d leaked alice's chat: %s", i, a.Body)
		}
	}
}

// TestFrontendMayAssertUser: a uid listed as a frontend (remote-web's)
// names the acting user, as root does; a frontend that names nobody gets
// 401, not its own identity.
func TestFrontendMayAssertUser(t *testing.T) {
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: providers.Claude}}, func(o *Options) {
		o.Access = Access{Frontends: []int{65534}}
	})
	run := asNobody(t, ts)
	id := aliceChat(t, ts)
	got := run(
		peerRequest{Method: "GET", Path: "/v1/chats/" + id, User: "alice"},
		peerRequest{Method: "GET", Path: "/v1/chats"},
	)
	var c api.Chat
	if got[0].Status != http.StatusOK || json.Unmarshal([]byte(got[0].Body), &c) != nil || c.ID != id || c.Owner != "alice" {
		t.Errorf("frontend naming alice: %d %s, want alice's chat", got[0].Status, got[0].Body)
	}
	if want := `{"error":{"code":"unauthorized","message":"X-Remote-User header is required"}}` + "\n"; got[1].Status != http.StatusUnauthorized || got[1].Body != want {
		t.Errorf("frontend without the header: %d %s, want 401 %s", got[1].Status, got[1].Body, want)
	}

	// A reload that drops the frontend takes the right away from the next
	// connection: nobody is then only itself.
	ts.srv.SetAccess(Access{UIDs: []int{65534}})
	got = run(peerRequest{Method: "GET", Path: "/v1/chats/" + id, User: "alice"})
	if got[0].Status != http.StatusForbidden || errorCode(t, []byte(got[0].Body)) != api.CodeForbidden {
		t.Errorf("after the reload: %d %s, want 403", got[0].Status, got[0].Body)
	}
}

// TestCallerName covers the identity rules with fake user lookups.
func TestCallerName(t *testing.T) {
	daemonUID := uint32(os.Getuid())
	// The ordinary uids are not the daemon's own, whoever runs the test
	// (make test-short as uid 1000 or 1001).
	base := uint32(1000)
	if daemonUID >= 990 && daemonUID <= 1002 {
		base = 101000
	}
	bobUID, badUID, nameless, frontend := base, base+1, base+2, base-10
	names := map[uint32]string{bobUID: "bob", badUID: "Bad Name"}
	a := Access{UIDs: []int{int(bobUID), int(badUID), int(nameless)}, Frontends: []int{int(frontend)}, nameOf: func(uid uint32) (string, error) {
		if n, ok := names[uid]; ok {
			return n, nil
		}
		return "", fmt.Errorf("unknown uid %d", uid)
	}}
	for _, tt := range []struct {
		name   string
		uid    uint32
		header string
		want   string
		status int
	}{
		{"root names a user", 0, "alice", "alice", 0},
		{"root without header", 0, "", "", http.StatusUnauthorized},
		{"daemon's uid names a user", daemonUID, "alice", "alice", 0},
		{"frontend names a user", frontend, "alice", "alice", 0},
		{"frontend without header", frontend, "", "", http.StatusUnauthorized},
		{"user without header is itself", bobUID, "", "bob", 0},
		{"user naming itself", bobUID, "bob", "bob", 0},
		{"user naming another", bobUID, "alice", "", http.StatusForbidden},
		{"user naming root", bobUID, "root", "", http.StatusForbidden},
		{"invalid header", bobUID, "a b", "", http.StatusBadRequest},
		{"uid without a name", nameless, "", "", http.StatusForbidden},
		{"login name the API cannot hold", badUID, "", "", http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &Peer{UID: tt.uid, Allowed: a.Allows(tt.uid, tt.uid), MayAssert: a.MayAssert(tt.uid)}
			if !p.MayAssert {
				p.Name, p.NameErr = a.loginName(tt.uid)
			}
			r, _ := http.NewRequestWithContext(context.WithValue(context.Background(), peerKey{}, p), "GET", "/", nil)
			if tt.header != "" {
				r.Header.Set(api.HeaderUser, tt.header)
			}
			got, err := callerName(r)
			status := 0
			if err != nil {
				status, _ = ToHTTP(err)
			}
			if got != tt.want || status != tt.status {
				t.Errorf("callerName = %q, %v (status %d), want %q, status %d", got, err, status, tt.want, tt.status)
			}
		})
	}
	if !a.Allows(frontend, frontend) {
		t.Error("a frontend uid is not allowed to connect")
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
