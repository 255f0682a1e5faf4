package daemon

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"remote/api"
	"remote/daemon/prompt"
	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
)

// idProvider runs `sh -c 'id -u; echo $HOME; pwd'` through the host
// launcher it was given and reports the output as assistant text, so a test
// can see who a loose chat's agent runs as, where, and with which HOME.
type idProvider struct{ host providers.Launcher }

func (p *idProvider) ID() providers.ProviderID { return providers.Claude }

func (p *idProvider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return providers.Capabilities{Label: "id"}, nil
}

func (p *idProvider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	proc, err := p.host.Start(ctx, providers.Command{Path: "/bin/sh", Args: []string{"-c", "id -u; echo $HOME; pwd"},
		Env: runner.HostEnv(nil), Dir: req.Cwd})
	if err != nil {
		return err
	}
	out, _ := io.ReadAll(proc.Stdout())
	io.Copy(io.Discard, proc.Stderr())
	if err := proc.Wait(); err != nil {
		return err
	}
	emit(providers.Event{Type: providers.EventAssistantDelta, Text: string(out)})
	emit(providers.Event{Type: providers.EventRunCompleted})
	return nil
}

// TestLooseChatRunsAsHostUser: with [agent] host_user = nobody the agent
// process runs with nobody's uid and HOME, in the chat's cwd (S8).
func TestLooseChatRunsAsHostUser(t *testing.T) {
	testkit.NeedsRoot(t, "running agents as another user")
	nobody, err := runner.LookupHostUser("nobody")
	if err != nil {
		t.Skipf("no nobody user: %v", err)
	}
	cwd, err := os.MkdirTemp("", "rdcwd") // nobody must be able to enter the cwd
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(cwd)
	os.Chmod(cwd, 0o755)
	p := &idProvider{host: runner.HostUserLauncher(&runner.HostLauncher{}, nobody)}
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) { o.Roots = prompt.NewRoots([]string{cwd}, "") })
	st, body := ts.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Cwd: cwd})
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 201 || err != nil {
		t.Fatalf("create: %d %s", st, body)
	}
	ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "who am i"})
	ts.waitIdle(chat.ID)
	evs := ts.events(chat.ID)
	if !slices.Equal(types(evs), []string{"user", "assistant_text", "complete"}) {
		t.Fatalf("events %v %+v", types(evs), evs)
	}
	lines := strings.Split(strings.TrimSpace(evs[1].Text), "\n")
	if len(lines) != 3 || lines[0] != strconv.FormatUint(uint64(nobody.UID), 10) || lines[1] != nobody.Home || lines[2] != chat.Cwd {
		t.Errorf("agent ran as %q, want uid %d, HOME %s, cwd %s", lines, nobody.UID, nobody.Home, chat.Cwd)
	}
}

// TestAttackCwdOracle: a local user asks for loose chats in paths under a
// root-only directory it cannot enter. The daemon (root) must not answer
// differently for a directory that exists there and one that does not:
// the cwd check runs with the host user's rights and every refusal is the
// same message. A directory the user can enter is still accepted.
func TestAttackCwdOracle(t *testing.T) {
	testkit.NeedsRoot(t, "the oracle needs a root daemon and another host user")
	nobody, err := runner.LookupHostUser("nobody")
	if err != nil {
		t.Skipf("no nobody user: %v", err)
	}
	base, err := os.MkdirTemp("", "rdoracle")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	for _, d := range []string{"secret/exists", "open/sub"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(base, "secret"), 0o700) // root only
	if err := os.WriteFile(filepath.Join(base, "open/file.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	outside, err := os.MkdirTemp("", "rdoutside")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	os.Chmod(outside, 0o755)

	p := &fakeProvider{id: providers.Claude}
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) { o.Roots = prompt.NewUserRoots([]string{base}, nobody) })
	for _, cwd := range []string{
		filepath.Join(base, "secret/exists"),  // exists, root-only
		filepath.Join(base, "secret/missing"), // does not exist, root-only
		filepath.Join(base, "open/missing"),   // does not exist
		filepath.Join(base, "open/file.txt"),  // not a directory
		outside,                               // outside the roots
	} {
		st, body := ts.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Cwd: cwd})
		var e api.ErrorResponse
		_ = json.Unmarshal(body, &e)
		want := `cwd: "` + cwd + `" is not a directory user "nobody" may enter inside the allowed roots (` + base + `)`
		if st != 400 || e.Error.Code != "bad_request" || e.Error.Message != want {
			t.Errorf("cwd %s: %d %s, want 400 bad_request %q", cwd, st, body, want)
		}
	}
	st, body := ts.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Cwd: filepath.Join(base, "open/sub")})
	if st != 201 {
		t.Fatalf("enterable cwd: %d %s", st, body)
	}
}
