package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/providers"
)

func readWorkspace(t *testing.T, c *websocket.Conn) map[string]json.RawMessage {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var m map[string]json.RawMessage
	if err := c.ReadJSON(&m); err != nil {
		t.Fatalf("read workspace socket: %v", err)
	}
	return m
}

func wsType(m map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(m["type"], &s)
	return s
}

func wsChat(t *testing.T, m map[string]json.RawMessage) api.Chat {
	t.Helper()
	if wsType(m) != "chat.upsert" {
		t.Fatalf("got %s, want chat.upsert", wsType(m))
	}
	var c api.Chat
	if err := json.Unmarshal(m["chat"], &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWorkspaceSocket: a snapshot of the caller's own chats and projects,
// then every change to them — created, running, waiting for an answer,
// renamed, deleted — and nothing of another user's.
func TestWorkspaceSocket(t *testing.T) {
	p := &fakeProvider{id: "codex", run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventInteractionRequest, InteractionID: "1", ToolName: "item/commandExecution/requestApproval", Input: json.RawMessage(`{"command":"ls"}`)})
		select {
		case <-req.InteractionResponses:
		case <-ctx.Done():
		}
		emit(providers.Event{Type: providers.EventInteractionResolved, InteractionID: "1"})
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p})
	old := ts.createChat("alice", "codex")
	ts.createChat("bob", "codex")
	if err := ts.st.CreateProject(api.Project{Name: "web", Owner: "alice", Container: "remote-web", Status: "missing"}); err != nil {
		t.Fatal(err)
	}

	a, _, err := ts.dialWS("/ws/workspace", "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _, err := ts.dialWS("/ws/workspace", "bob")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	snap := readWorkspace(t, a)
	var s api.WorkspaceSnapshotMessage
	raw, _ := json.Marshal(snap)
	_ = json.Unmarshal(raw, &s)
	if s.Type != "workspace.snapshot" || len(s.Chats) != 1 || s.Chats[0].ID != old.ID || len(s.Projects) != 1 || s.Projects[0].Name != "web" {
		t.Fatalf("alice's snapshot %s", raw)
	}
	readWorkspace(t, b) // bob's snapshot

	chat := ts.createChat("alice", "codex")
	if c := wsChat(t, readWorkspace(t, a)); c.ID != chat.ID || c.Owner != "alice" || c.Running {
		t.Fatalf("created: %+v", c)
	}
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "list"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	// running, then waiting for alice
	var c api.Chat
	for c = wsChat(t, readWorkspace(t, a)); c.Attention == ""; c = wsChat(t, readWorkspace(t, a)) {
		if !c.Running {
			t.Fatalf("before the approval: %+v, want running", c)
		}
	}
	if c.Attention != "approval" || !c.Running {
		t.Fatalf("waiting: %+v", c)
	}
	if st, body := ts.do("GET", "/v1/chats/"+chat.ID, "alice", nil); st != 200 || !json.Valid(body) || !containsField(body, "attention", "approval") {
		t.Fatalf("GET chat while waiting: %d %s", st, body)
	}
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/interactions", "alice", api.InteractionRequest{InteractionID: "1", Result: json.RawMessage(`{}`)}); st != http.StatusAccepted {
		t.Fatalf("answer: %d %s", st, body)
	}
	for c = wsChat(t, readWorkspace(t, a)); c.Running || c.Attention != ""; c = wsChat(t, readWorkspace(t, a)) { //nolint:revive // empty-block: the work is in the post statement
	}
	if st, body := ts.do("PATCH", "/v1/chats/"+chat.ID, "alice", map[string]string{"title": "Renamed"}); st != 200 {
		t.Fatalf("rename: %d %s", st, body)
	}
	// Updates of the run's end (its title, last message time) may still
	// be on the way; the rename must follow them (30 s read deadline).
	for c = wsChat(t, readWorkspace(t, a)); c.Title != "Renamed"; c = wsChat(t, readWorkspace(t, a)) { //nolint:revive // empty-block: the work is in the post statement
	}
	if st, body := ts.do("DELETE", "/v1/chats/"+chat.ID, "alice", nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d %s", st, body)
	}
	if m := readWorkspace(t, a); wsType(m) != "chat.delete" || string(m["id"]) != `"`+chat.ID+`"` {
		t.Fatalf("deleted: %v", m)
	}
	if _, err := ts.st.UpdateProject("web", func(p *api.Project) error { p.Status = "running"; return nil }); err != nil {
		t.Fatal(err)
	}
	if m := readWorkspace(t, a); wsType(m) != "project.upsert" || !containsField(m["project"], "status", "running") {
		t.Fatalf("project changed: %v", m)
	}
	web, err := ts.st.Project("web")
	if err != nil || web.ID == "" {
		t.Fatalf("project web: %+v %v", web, err)
	}
	if err := ts.st.DeleteProject("web"); err != nil {
		t.Fatal(err)
	}
	if m := readWorkspace(t, a); wsType(m) != "project.delete" || string(m["id"]) != `"`+web.ID+`"` {
		t.Fatalf("project deleted: %v, want id %s", m, web.ID)
	}
	// Bob saw none of it: his next message is his own new chat.
	mine := ts.createChat("bob", "codex")
	if c := wsChat(t, readWorkspace(t, b)); c.ID != mine.ID || c.Owner != "bob" {
		t.Fatalf("bob's first message is about %+v, want his own chat %s", c, mine.ID)
	}
}
