//go:build systemd

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
)

// Loose chats in the real-systemd bed (systemd_test.go): remoted on a
// configuration with Claude Code against the fake model, and the agent's
// sandbox under the shipped unit.

// sdModelPort is where the fake model server answers inside the container
// (a proxy device to the test's server on the host's loopback).
const sdModelPort = "18080"

// sdRunConfig is /etc/remote/remoted.toml for the run tests: the shipped
// paths, LXD absent (loose chats only), Claude Code at /opt/claude
// against the fake model.
const sdRunConfig = `[daemon]
socket = "/run/remote/remoted.sock"
state_dir = "/var/lib/remote"
log_level = "debug"

[agent]
allowed_roots = ["/root/work"]

[providers.claude]
binary = "/opt/claude/claude"
env = { HOME = "/root/agent-home", ANTHROPIC_BASE_URL = "http://127.0.0.1:` + sdModelPort + `", ANTHROPIC_API_KEY = "sk-ant-test-dummy", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }
project_env = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]
`

// events returns the chat's stored events.
func (b *sdBed) events(chatID string) []api.Event {
	b.t.Helper()
	st, body := b.do("GET", "/v1/chats/"+chatID+"/events", nil)
	var evs []api.Event
	if err := json.Unmarshal(body, &evs); st != 200 || err != nil {
		b.t.Fatalf("events: %d %s", st, body)
	}
	return evs
}

// waitEvents polls the chat's events until done says so.
func (b *sdBed) waitEvents(chatID string, within time.Duration, done func([]api.Event) bool) []api.Event {
	b.t.Helper()
	var evs []api.Event
	if testkit.Poll(within, func() bool { evs = b.events(chatID); return done(evs) }) != nil {
		b.t.Fatalf("chat %s: condition not met in %v; events: %s\njournal:\n%s", chatID, within, summarize(evs), b.journal("-n", "60"))
	}
	return evs
}

// prompt starts a turn and returns its run id.
func (b *sdBed) prompt(chatID, text string) string {
	b.t.Helper()
	st, body := b.do("POST", "/v1/chats/"+chatID+"/prompt", api.PromptRequest{Text: text})
	var resp api.PromptResponse
	if err := json.Unmarshal(body, &resp); st != 202 || err != nil || resp.RunID == "" {
		b.t.Fatalf("prompt: %d %s", st, body)
	}
	return resp.RunID
}

// newRunBed is a bed with remoted installed and running on sdRunConfig,
// the pinned Claude Code CLI at /opt/claude/claude and the fake model
// (replies queued) at the container's 127.0.0.1:sdModelPort.
func newRunBed(t *testing.T, replies ...fakeanthropic.Reply) *sdBed {
	t.Helper()
	claude := testkit.ClaudeBinary(t)
	fake := fakeanthropic.New(t, replies...)
	b := newSystemdBed(t)
	b.install()
	b.must0(sdHostLXC(nil, "config", "device", "add", b.name, "model", "proxy",
		"listen=tcp:127.0.0.1:"+sdModelPort, "connect=tcp:"+strings.TrimPrefix(fake.URL, "http://"), "bind=container"))
	b.must0(sdHostLXC(nil, "file", "push", "--create-dirs", "--mode", "0755", claude, b.name+"/opt/claude/claude"))
	b.must("mkdir", "-p", "/root/work", "/root/agent-home")
	b.write("/etc/remote/remoted.toml", "0640", sdRunConfig)
	b.must("systemctl", "enable", "--now", "remoted.socket", "remoted.service")
	return b
}

// createChat creates a loose Claude Code chat in /root/work.
func (b *sdBed) createChat() api.Chat {
	b.t.Helper()
	st, body := b.do("POST", "/v1/chats", api.CreateChatRequest{Provider: "claude", Cwd: "/root/work"})
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 201 || err != nil {
		b.t.Fatalf("create chat: %d %s", st, body)
	}
	return chat
}

// waitRunsEmpty waits until GET /v1/runs lists nothing.
func (b *sdBed) waitRunsEmpty() {
	b.t.Helper()
	testkit.Eventually(b.t, 15*time.Second, func() error {
		if st, body := b.do("GET", "/v1/runs", nil); st != 200 || strings.TrimSpace(string(body)) != "[]" {
			return fmt.Errorf("runs still listed: %d %s", st, body)
		}
		return nil
	}, "no run listed")
}

// TestAttackSystemdAgentWritesConfig: a loose chat's agent runs as root
// (no [agent] host_user) and its model has it append to
// /etc/remote/remoted.toml. Under the shipped unit every agent CLI runs in
// remoted.service's sandbox, where /etc/remote is read-only
// (ReadOnlyPaths=, ProtectSystem=strict): the write fails and the file is
// unchanged, and its capability bound is the unit's. A supervisor that
// starts the CLI outside the service (a transient unit, a detached
// session) must keep that sandbox.
func TestAttackSystemdAgentWritesConfig(t *testing.T) {
	t.Parallel() // its own container
	b := newRunBed(t,
		fakeanthropic.ToolUse("Bash", `{"command":"echo pwned >> /etc/remote/remoted.toml; touch /etc/remote/pwned; grep CapBnd /proc/self/status","description":"edit"}`),
		fakeanthropic.AfterToolResult(fakeanthropic.Text("done")))
	chat := b.createChat()
	b.prompt(chat.ID, "edit the daemon's configuration")
	evs := b.waitEvents(chat.ID, 90*time.Second, ended)
	var out string
	for _, ev := range evs {
		if ev.Type == api.EventToolUseEnd {
			out = ev.Output
		}
	}
	if got := b.must("cat", "/etc/remote/remoted.toml"); got != strings.TrimSpace(sdRunConfig) {
		t.Errorf("the agent rewrote /etc/remote/remoted.toml (tool output %q):\n%s", out, got)
	}
	if ls, err := b.sh("ls /etc/remote/pwned"); err == nil {
		t.Errorf("the agent created a file in /etc/remote: %s", ls)
	}
	if !strings.Contains(out, "Read-only file system") {
		t.Errorf("tool output %q, want the write refused with Read-only file system; events: %s", out, summarize(evs))
	}
	// The unit's CapabilityBoundingSet= (CHOWN, DAC_OVERRIDE,
	// DAC_READ_SEARCH, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP):
	// a root agent has no CAP_SYS_ADMIN, CAP_NET_ADMIN and the like.
	if !strings.Contains(out, "CapBnd:\t00000000000001ff") {
		t.Errorf("tool output %q, want the agent's capability bound CapBnd: 00000000000001ff", out)
	}
}
