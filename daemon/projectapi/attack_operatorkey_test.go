package projectapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/claude"
	"remote/provisioning"
)

// fakeEnvCLI stands in for the Claude CLI in a project container: it
// writes the environment it was given to /tmp/cli-env, where a project's
// agent (root in the container) can read it too.
const fakeEnvCLI = `#!/bin/sh
[ "$1" = "--version" ] && { echo "2.0.0 (Claude Code)"; exit 0; }
env > /tmp/cli-env
cat > /dev/null
exit 0
`

// TestAttackOperatorKeyInProjectContainer: an operator gives Claude an
// ANTHROPIC_API_KEY in [providers.claude] env for loose chats. A project's
// agent reads its own environment: the key must not be there, neither in a
// credentials "shared" project (project_env does not name it) nor in a
// credentials "project" one (never), while the key project_env names
// reaches the shared project only. Before project_env, env was copied into
// every project container's run.
func TestAttackOperatorKeyInProjectContainer(t *testing.T) {
	testkit.LXD(t)
	const operatorKey = "sk-ant-operator-4f9e1c"
	e := newProjectEnv(t, projectEnvOpts{
		steps: &provisioning.StepsOptions{Providers: map[providers.ProviderID]provisioning.ProviderSetup{
			providers.Claude: {
				Check:        []string{"/usr/local/bin/claude", "--version"},
				InstallFiles: []provisioning.File{{Content: []byte(fakeEnvCLI), Container: "/usr/local/bin/claude", Mode: 0o755}},
			},
		}},
		providers: []func(providers.AdapterConfig) providers.Provider{func(ports providers.AdapterConfig) providers.Provider {
			ports.Binary = "/usr/local/bin/claude"
			ports.Env = map[string]string{"ANTHROPIC_API_KEY": operatorKey, "DISABLE_AUTOUPDATER": "1"}
			ports.ProjectEnv = []string{"DISABLE_AUTOUPDATER"}
			return claude.New(ports)
		}},
	})
	for _, tt := range []struct {
		credentials string
		wantSetting bool // DISABLE_AUTOUPDATER, which project_env names
	}{
		{api.CredentialsShared, true},
		{api.CredentialsProject, false},
	} {
		t.Run(tt.credentials, func(t *testing.T) {
			name := uniqueProject("opkey")
			p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude", Credentials: tt.credentials})
			status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: name})
			if status != http.StatusCreated {
				t.Fatalf("create chat: %d %s", status, body)
			}
			var chat api.Chat
			_ = json.Unmarshal(body, &chat)
			evs := e.prompt(t, chat.ID, "alice", "print your environment")
			env := readContainerFile(t, e.lxd, p.Container, "/tmp/cli-env")
			if !strings.Contains(env, "HOME=/root") {
				t.Fatalf("the CLI did not run in the container (events %s); its environment: %q", dump(evs), env)
			}
			if strings.Contains(env, operatorKey) || strings.Contains(env, "ANTHROPIC_API_KEY") {
				t.Errorf("the operator's ANTHROPIC_API_KEY reached the %s project's CLI", tt.credentials)
			}
			if got := strings.Contains(env, "DISABLE_AUTOUPDATER=1"); got != tt.wantSetting {
				t.Errorf("DISABLE_AUTOUPDATER in the %s project's CLI environment: %v, want %v", tt.credentials, got, tt.wantSetting)
			}
		})
	}
	if strings.Contains(e.logs.String(), operatorKey) {
		t.Error("the operator's key appears in the daemon's log")
	}
}

// readContainerFile returns the file at path in container ("" if absent).
func readContainerFile(t *testing.T, cl *lxdexec.Client, container, path string) string {
	t.Helper()
	rc, _, err := cl.PullFile(context.Background(), container, path)
	if err != nil {
		t.Logf("read %s in %s: %v", path, container, err)
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}
