package projectapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/claude"
	"remote/provisioning"
)

// glibcLibs are the shared libraries the Claude Code native binary needs,
// pushed from the host to the same paths in the busybox container.
var glibcLibs = []string{
	"/lib64/ld-linux-x86-64.so.2",
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/lib/x86_64-linux-gnu/libm.so.6",
	"/lib/x86_64-linux-gnu/libpthread.so.0",
	"/lib/x86_64-linux-gnu/libdl.so.2",
	"/lib/x86_64-linux-gnu/librt.so.1",
}

// lxcCommand runs the lxc client (proxyProfile checked it is there).
func lxcCommand(args ...string) func() ([]byte, error) {
	return func() ([]byte, error) { return exec.Command("lxc", args...).CombinedOutput() }
}

// proxyProfile creates an LXD profile whose proxy device makes the host's
// 127.0.0.1:port reachable on the container's 127.0.0.1:port, so every
// container the daemon (re)creates with it reaches the fake model server.
func proxyProfile(t *testing.T, port int) string {
	t.Helper()
	testkit.LXD(t)
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "lxc client: %v", err)
	}
	name := "rt-proxy-" + strings.TrimPrefix(testkit.ContainerName("p"), "t-p-")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("lxc", args...).CombinedOutput(); err != nil {
			t.Fatalf("lxc %v: %v\n%s", args, err, out)
		}
	}
	run("profile", "create", name)
	// Registered before the containers' cleanups, so it runs after them.
	t.Cleanup(func() { _ = exec.Command("lxc", "profile", "delete", name).Run() })
	// The device is named after its port: a container given two of these
	// profiles (the model's and the git server's) keeps both devices,
	// where one name would leave only the last profile's.
	run("profile", "device", "add", name, fmt.Sprintf("port%d", port), "proxy",
		fmt.Sprintf("listen=tcp:127.0.0.1:%d", port), fmt.Sprintf("connect=tcp:127.0.0.1:%d", port), "bind=instance")
	return name
}

func (e *projectEnv) prompt(t testing.TB, chatID, user, text string) []api.Event {
	t.Helper()
	before := len(e.events(chatID))
	status, body := e.do("POST", "/v1/chats/"+chatID+"/prompt", user, api.PromptRequest{Text: text})
	if status != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", status, body)
	}
	// The run lock is taken before 202, so waiting for idle is enough.
	testkit.Eventually(t, 3*time.Minute, func() bool { return !e.hub.Running(chatID) }, "chat %s idle", chatID)
	return e.events(chatID)[before:]
}

func subtypes(evs []api.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == api.EventSystem {
			out = append(out, ev.Subtype)
		}
	}
	return out
}

func hasType(evs []api.Event, typ string) bool {
	return slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Type == typ })
}

// TestProjectChatRealClaude runs the real Claude Code CLI inside a busybox
// container through the daemon's API, talking to the fake model server on
// the host through an LXD proxy device.
func TestProjectChatRealClaude(t *testing.T) {
	bin := testkit.ClaudeBinary(t)
	testkit.LXD(t)
	for _, lib := range glibcLibs {
		if _, err := os.Stat(lib); err != nil {
			testkit.Missing(t, "host library %s: %v", lib, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	model := fakeanthropic.NewListener(t, ln)
	profile := proxyProfile(t, port)

	hostHome := t.TempDir()
	credPath := filepath.Join(hostHome, ".claude", ".credentials.json")
	if err := os.MkdirAll(filepath.Dir(credPath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(credPath, []byte(`{"token":"host-original"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(credPath, old, old)
	install := []provisioning.File{{Host: bin, Container: "/usr/local/bin/claude", Mode: 0o755}}
	for _, lib := range glibcLibs {
		install = append(install, provisioning.File{Host: lib, Container: lib, Mode: 0o755})
	}
	var hang atomic.Bool
	release := make(chan struct{})
	defer close(release)
	e := newProjectEnv(t, projectEnvOpts{
		profiles: []string{"default", profile},
		stepsLXD: func(l provisioning.LXD) provisioning.LXD { return &hangingPull{LXD: l, hang: &hang, release: release} },
		steps: &provisioning.StepsOptions{Providers: map[providers.ProviderID]provisioning.ProviderSetup{
			providers.Claude: {
				Check:        []string{"/usr/local/bin/claude", "--version"},
				InstallFiles: install,
				Credentials:  []provisioning.Credential{{Host: credPath, Container: "/root/.claude/.credentials.json", Sync: true}},
			},
		}},
		providers: []func(providers.AdapterConfig) providers.Provider{func(ports providers.AdapterConfig) providers.Provider {
			ports.Binary = "/usr/local/bin/claude"
			ports.Env = map[string]string{
				"ANTHROPIC_BASE_URL":                       fmt.Sprintf("http://127.0.0.1:%d", port),
				"ANTHROPIC_API_KEY":                        "sk-ant-test-dummy",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
				"DISABLE_AUTOUPDATER":                      "1",
			}
			ports.ProjectEnv = []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"}
			return claude.New(ports)
		}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recDone := make(chan struct{})
	go func() { defer close(recDone); _ = e.rec.Run(ctx) }()
	defer func() { cancel(); <-recDone }()

	name := uniqueProject("claude")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "claude"})
	const secretValue = "sv-7f3a-secret-never-shown"
	for key, value := range map[string]string{"PROJECT_TOKEN": secretValue, "IS_SANDBOX": "0"} {
		if status, body := e.do("PUT", "/v1/projects/"+name+"/secrets/"+key, "alice", api.PutSecretRequest{Value: value}); status != 204 {
			t.Fatalf("put secret: %d %s", status, body)
		}
	}
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: name})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, body)
	}
	var chat api.Chat
	_ = json.Unmarshal(body, &chat)
	var responses []string // every API body of the test, checked for the secret

	t.Run("first prompt creates the container and runs claude in it", func(t *testing.T) {
		start := time.Now()
		// The reply is slow, so the test can look at the live CLI from
		// inside the container and change its credentials, as a token
		// refresh during the run would.
		model.Push(fakeanthropic.Slow(6*time.Second, fakeanthropic.Text("all done")))
		envc := make(chan string, 1)
		go func() {
			envc <- observeCLI(e.lxd, p.Container)
		}()
		evs := e.prompt(t, chat.ID, "alice", "inspect the environment")
		env := <-envc
		t.Logf("first prompt (container create + 373 MB CLI push + run) took %s", time.Since(start))
		if got := subtypes(evs); len(got) == 0 || got[0] != "container_starting" {
			t.Fatalf("system events %v, want container_starting first", got)
		}
		if !hasType(evs, api.EventComplete) || hasType(evs, api.EventError) {
			t.Fatalf("run did not complete cleanly: %s", dump(evs))
		}
		for _, want := range []string{"PROJECT_TOKEN=" + secretValue, "IS_SANDBOX=1", "HOME=/root", "PWD=/workspace"} {
			if !strings.Contains(env, want) {
				t.Errorf("container environment lacks %q", strings.ReplaceAll(want, secretValue, "<secret>"))
			}
		}
		if strings.Contains(env, "IS_SANDBOX=0") {
			t.Error("a project secret overrode the provider-forced IS_SANDBOX (S11)")
		}
		b, _ := os.ReadFile(credPath)
		if !strings.Contains(string(b), "rotated-in-container") {
			t.Errorf("credentials not synced back after the run: %s", b)
		}
	})

	t.Run("container deleted outside is recreated on the next prompt", func(t *testing.T) {
		testkit.BehindTheBack(t, "lxc delete --force", lxcCommand("delete", "--force", p.Container))
		model.Push(fakeanthropic.Text("back again"))
		evs := e.prompt(t, chat.ID, "alice", "are you there?")
		if got := subtypes(evs); !slices.Contains(got, "container_starting") {
			t.Fatalf("system events %v, want container_starting", got)
		}
		if !hasType(evs, api.EventComplete) {
			t.Fatalf("no completion: %s", dump(evs))
		}
	})

	t.Run("container stopped outside is noticed and restarted", func(t *testing.T) {
		testkit.BehindTheBack(t, "lxc stop --force", lxcCommand("stop", "--force", p.Container))
		testkit.Eventually(t, 90*time.Second, func() bool {
			_, body := e.do("GET", "/v1/projects/"+name, "alice", nil)
			responses = append(responses, string(body))
			return strings.Contains(string(body), `"status":"stopped"`)
		}, "stored status stopped")
		model.Push(fakeanthropic.Text("restarted"))
		evs := e.prompt(t, chat.ID, "alice", "again")
		if got := subtypes(evs); !slices.Contains(got, "container_starting") || !hasType(evs, api.EventComplete) {
			t.Fatalf("events: %s", dump(evs))
		}
	})

	t.Run("a hanging credential sync is abandoned and the run completes", func(t *testing.T) {
		hang.Store(true)
		defer hang.Store(false)
		model.Push(fakeanthropic.Text("synced or not"))
		evs := e.prompt(t, chat.ID, "alice", "one more")
		if !hasType(evs, api.EventComplete) || hasType(evs, api.EventError) {
			t.Fatalf("events: %s", dump(evs))
		}
		if !strings.Contains(e.logs.String(), "credential sync") {
			t.Error("the abandoned sync was not logged")
		}
	})

	t.Run("the secret value never leaves the container", func(t *testing.T) {
		for _, path := range []string{"/v1/projects/" + name, "/v1/projects", "/v1/projects/" + name + "/secrets", "/v1/chats/" + chat.ID, "/v1/chats/" + chat.ID + "/events"} {
			_, body := e.do("GET", path, "alice", nil)
			responses = append(responses, string(body))
		}
		evJSON, _ := json.Marshal(e.events(chat.ID))
		for what, text := range map[string]string{"logs": e.logs.String(), "events": string(evJSON), "API responses": strings.Join(responses, "\n")} {
			if strings.Contains(text, secretValue) {
				t.Errorf("the secret value appears in the %s", what)
			}
		}
	})
}

func dump(evs []api.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "\n  %s %s %s %.200s", ev.Type, ev.Subtype, ev.Message, ev.Text)
	}
	return b.String()
}

// observeCLI waits (bounded) for the claude process in the container, and
// returns its environment and working directory read from /proc; it also
// rewrites the container's credentials as a token refresh would (a valid
// claudeAiOauth record: sync-back refuses anything else).
func observeCLI(cl *lxdexec.Client, container string) string {
	// The run's CLI, by its stream-json flag: a short-lived claude (a
	// version or login check) may come and go before it.
	script := `for i in $(seq 1 600); do
  for p in $(pidof claude); do grep -qa -- --output-format /proc/$p/cmdline 2>/dev/null && pid=$p && break 2; done; sleep 0.05
done
[ -n "$pid" ] || exit 1
env=$(tr '\0' '\n' < /proc/$pid/environ) || exit 1
echo "$env"; echo "PWD=$(readlink /proc/$pid/cwd)"
echo '{"claudeAiOauth":{"accessToken":"rotated-in-container","refreshToken":"rt-rotated","expiresAt":4102444800000}}' > /root/.claude/.credentials.json`
	for range 600 {
		ex, err := cl.Exec(context.Background(), container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
		if err != nil { // the container is still being created
			time.Sleep(100 * time.Millisecond) //nolint:forbidigo // retries an exec while the container is still being created
			continue
		}
		_ = ex.Stdin().Close()
		var out strings.Builder
		done := make(chan struct{})
		go func() { _, _ = io.Copy(&out, ex.Stdout()); close(done) }()
		_, _ = io.Copy(io.Discard, ex.Stderr())
		<-done
		if code, err := ex.Wait(); err == nil && code == 0 {
			return out.String()
		}
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // retries the in-container script until the CLI shows up
	}
	return ""
}

// hangingPull makes PullFile (the credential sync's read) hang, ignoring
// its context like a wedged transfer, while hang is set.
type hangingPull struct {
	provisioning.LXD
	hang    *atomic.Bool
	release chan struct{}
}

func (h *hangingPull) PullFile(ctx context.Context, instance, path string) (io.ReadCloser, *lxdexec.FileInfo, error) {
	if h.hang.Load() {
		<-h.release
		return nil, nil, fmt.Errorf("released")
	}
	return h.LXD.PullFile(ctx, instance, path)
}
