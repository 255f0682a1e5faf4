package projectapi

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeopenai"
	"remote/providers"
	"remote/providers/codex"
	"remote/provisioning"
)

// TestProjectChatRealCodex runs the real (static) Codex CLI's app-server
// inside a busybox container through the daemon's API; its config.toml
// reaches the container as a runtime asset and the model server through an
// LXD proxy device.
func TestProjectChatRealCodex(t *testing.T) {
	bin := testkit.CodexBinary(t)
	testkit.LXD(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	model := fakeopenai.Serve(ln)
	t.Cleanup(func() { _ = model.Close() })
	profile := proxyProfile(t, port)
	hostHome := t.TempDir()
	authPath := filepath.Join(hostHome, ".codex", "auth.json")
	if err := os.MkdirAll(filepath.Dir(authPath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(authPath, []byte(`{"auth_mode":"chatgpt","tokens":{"id_token":"x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fakeopenai.CodexConfigTOML(fakeopenai.CodexConfig{BaseURL: fmt.Sprintf("http://127.0.0.1:%d/v1", port)})
	e := newProjectEnv(t, projectEnvOpts{
		profiles: []string{"default", profile},
		steps: &provisioning.StepsOptions{Providers: map[providers.ProviderID]provisioning.ProviderSetup{
			providers.Codex: {
				Check:        []string{"/usr/local/bin/codex", "--version"},
				InstallFiles: []provisioning.File{{Host: bin, Container: "/usr/local/bin/codex", Mode: 0o755}},
				Credentials:  []provisioning.Credential{{Host: authPath, Container: codex.ContainerCodexHome + "/auth.json", Sync: true, RejectAPIKey: true}},
				Assets:       []provisioning.File{{Content: []byte(cfg), Container: codex.ContainerCodexHome + "/config.toml", Mode: 0o600}},
			},
		}},
		providers: []func(providers.AdapterConfig) providers.Provider{func(ports providers.AdapterConfig) providers.Provider {
			ports.Binary = "/usr/local/bin/codex"
			ports.Env = map[string]string{"FAKE_OPENAI_API_KEY": "test-key"}
			ports.ProjectEnv = []string{"FAKE_OPENAI_API_KEY"}
			return codex.New(ports)
		}},
	})
	name := uniqueProject("codex")
	e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "codex"})
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "codex", Project: name})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	_ = json.Unmarshal(body, &chat)

	model.Enqueue(fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("codex in a container")}})
	evs := e.prompt(t, chat.ID, "alice", "hello")
	var text strings.Builder
	for _, ev := range evs {
		if ev.Type == api.EventAssistantText {
			text.WriteString(ev.Text)
		}
	}
	if !hasType(evs, api.EventComplete) || text.String() != "codex in a container" {
		t.Fatalf("codex run: %q %s", text.String(), dump(evs))
	}
	if got := subtypes(evs); len(got) == 0 || got[0] != "container_starting" {
		t.Fatalf("system events %v", got)
	}
	out := e.execFrames(t, name, "alice", api.ExecRequest{Command: []string{"sh", "-c", "stat -c '%a' /root/.codex/auth.json; ls /root/.codex"}})
	if s := joinStream(out, "stdout"); !strings.HasPrefix(s, "600\n") || !strings.Contains(s, "config.toml") {
		t.Fatalf("container codex home: %q", s)
	}

	// A second chat in the same project asks before it runs a command: the
	// approval is answered through the API and the run completes (S21).
	// ("on-request" would not ask here: in a container the sandbox is
	// danger-full-access, so no command needs an escalation.)
	t.Run("approval untrusted", func(t *testing.T) {
		approvalRun(t, e, model, name, api.ApprovalUntrusted)
	})
}

// approvalRun creates a Codex chat in project with the approval policy,
// makes the agent run a command, waits for the interaction_request, accepts
// it with POST /v1/chats/{id}/interactions and checks the command's output
// and the completion.
func approvalRun(t *testing.T, e *projectEnv, model *fakeopenai.Server, project, policy string) {
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "codex", Project: project, ApprovalPolicy: policy})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	_ = json.Unmarshal(body, &chat)
	if chat.ApprovalPolicy != policy {
		t.Fatalf("chat approval policy %q, want %q", chat.ApprovalPolicy, policy)
	}
	marker := "approved-" + policy
	model.Enqueue(
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Shell("echo " + marker)}},
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("ran it in the container")}},
	)
	if status, body := e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "run the command"}); status != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", status, body)
	}
	var req api.Event
	testkit.Eventually(t, 3*time.Minute, func() error {
		evs := e.events(chat.ID)
		for _, ev := range evs {
			if ev.Type == api.EventInteractionRequest {
				req = ev
			}
		}
		if req.Type != "" || !e.hub.Running(chat.ID) {
			return nil
		}
		return fmt.Errorf("events so far: %s", dump(evs))
	}, "an interaction_request")
	if req.Type == "" {
		t.Fatalf("run ended without asking for approval: %s", dump(e.events(chat.ID)))
	}
	var asked struct {
		ItemID  string `json:"itemId"`
		Command string `json:"command"`
	}
	_ = json.Unmarshal(req.Input, &asked)
	if req.InteractionID == "" || req.Name != "item/commandExecution/requestApproval" || asked.ItemID == "" || !strings.Contains(asked.Command, marker) {
		t.Fatalf("interaction_request %+v", req)
	}
	if hasType(e.events(chat.ID), api.EventToolUseEnd) {
		t.Fatalf("the command ran before it was approved: %s", dump(e.events(chat.ID)))
	}
	answer := api.InteractionRequest{InteractionID: req.InteractionID, Result: json.RawMessage(`{"decision":"accept"}`)}
	if status, body := e.do("POST", "/v1/chats/"+chat.ID+"/interactions", "alice", answer); status/100 != 2 {
		t.Fatalf("answer interaction: %d %s", status, body)
	}
	testkit.Eventually(t, 3*time.Minute, func() bool { return !e.hub.Running(chat.ID) }, "chat %s idle", chat.ID)
	evs := e.events(chat.ID)
	ran := slices.ContainsFunc(evs, func(ev api.Event) bool {
		return ev.Type == api.EventToolUseEnd && ev.ID == asked.ItemID && strings.Contains(ev.Output, marker) && !ev.IsError
	})
	resolved := slices.ContainsFunc(evs, func(ev api.Event) bool {
		return ev.Type == api.EventInteractionResolved && ev.InteractionID == req.InteractionID && ev.Status == "approved"
	})
	if !ran || !resolved || evs[len(evs)-1].Type != api.EventComplete {
		raw, _ := json.MarshalIndent(evs, "", " ")
		t.Fatalf("approved run: ran=%v resolved=%v request %+v\n%s", ran, resolved, req, raw)
	}
}
