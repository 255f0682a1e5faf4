package daemon

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
}
