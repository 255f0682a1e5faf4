package projectapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/daemon/store"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning"
	"remote/provisioning/reconcile"
)

// benchEnv is a project env plus one started project for benchmarks.
func benchEnv(b *testing.B, o projectEnvOpts) (*projectEnv, api.Project) {
	b.Helper()
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(b, "lxc client for the side-by-side figures: %v", err)
	}
	e := newProjectEnv(b, o)
	name := uniqueProject("bench")
	status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: name})
	if status != http.StatusCreated {
		b.Fatalf("create: %d %s", status, body)
	}
	var p api.Project
	_ = json.Unmarshal(body, &p)
	testkit.CleanupContainer(b, e.lxd, p.Container)
	if status, body := e.do("POST", "/v1/projects/"+name+"/start", "alice", nil); status != 200 {
		b.Fatalf("start: %d %s", status, body)
	}
	return e, p
}

// apiExec posts an exec and drains the NDJSON stream; it returns the
// number of output bytes.
func (e *projectEnv) apiExec(b *testing.B, project string, cmd ...string) int64 {
	body, _ := json.Marshal(api.ExecRequest{Command: cmd})
	req, _ := http.NewRequest("POST", "http://remoted/v1/projects/"+project+"/exec", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderUser, "alice")
	resp, err := e.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	// An efficient client: output frames are decoded with one base64 pass,
	// only the final frame goes through encoding/json.
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	var n int64
	dst := make([]byte, 0, 256<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			b.Fatalf("stream ended without an exit code: %v", err)
		}
		if i := bytes.Index(line, []byte(`"data":"`)); i >= 0 && bytes.HasPrefix(line, []byte(`{"stream":`)) {
			enc := line[i+8:]
			enc = enc[:bytes.IndexByte(enc, '"')]
			out, err := base64.StdEncoding.AppendDecode(dst[:0], enc)
			if err != nil {
				b.Fatal(err)
			}
			n += int64(len(out))
			continue
		}
		var f api.ExecFrame
		if err := json.Unmarshal(line, &f); err != nil {
			b.Fatal(err)
		}
		if f.ExitCode != nil {
			if *f.ExitCode != 0 {
				b.Fatalf("exit %d", *f.ExitCode)
			}
			return n
		}
	}
}

func lxcExec(b *testing.B, container string, w io.Writer, cmd ...string) {
	c := exec.Command("lxc", append([]string{"exec", container, "--"}, cmd...)...)
	c.Stdout = w
	if err := c.Run(); err != nil {
		b.Fatal(err)
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkProjectExec compares exec through the daemon's API with
// `lxc exec` on the same container: start latency (`true`) and
// throughput (64 MiB of stdout).
func BenchmarkProjectExec(b *testing.B) {
	e, p := benchEnv(b, projectEnvOpts{})
	b.Run("start/api", func(b *testing.B) {
		for range b.N {
			e.apiExec(b, p.Name, "true")
		}
	})
	b.Run("start/lxc", func(b *testing.B) {
		for range b.N {
			lxcExec(b, p.Container, io.Discard, "true")
		}
	})
	const size = 64 << 20
	cmd := []string{"head", "-c", fmt.Sprint(size), "/dev/zero"}
	b.Run("throughput/api", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			if n := e.apiExec(b, p.Name, cmd...); n != size {
				b.Fatalf("%d bytes", n)
			}
		}
	})
	b.Run("throughput/lxdexec", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			ex, err := e.lxd.Exec(context.Background(), p.Container, lxdexec.ExecRequest{Command: cmd})
			if err != nil {
				b.Fatal(err)
			}
			_ = ex.Stdin().Close()
			go func() { _, _ = io.Copy(io.Discard, ex.Stderr()) }()
			n, _ := io.Copy(io.Discard, ex.Stdout())
			if code, err := ex.Wait(); err != nil || code != 0 || n != size {
				b.Fatalf("%d bytes, exit %d, %v", n, code, err)
			}
		}
	})
	b.Run("throughput/lxc", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			var w countWriter
			lxcExec(b, p.Container, &w, cmd...)
			if w.n != size {
				b.Fatalf("%d bytes", w.n)
			}
		}
	})
}

// readyProvider prepares the project and emits one delta: the time from
// prompt to its first event is the daemon's and the preparer's overhead.
type readyProvider struct{ prep providers.ProjectPreparer }

func (r readyProvider) ID() providers.ProviderID { return providers.Claude }
func (r readyProvider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return providers.Capabilities{Label: "ready", Skills: providers.SkillsNone}, nil
}
func (r readyProvider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	if _, err := r.prep.Prepare(ctx, providers.PrepareRequest{Provider: providers.Claude, ProjectID: req.ProjectID}, emit); err != nil {
		return err
	}
	emit(providers.Event{Type: providers.EventAssistantDelta, Text: "hi", MessageID: "m"})
	emit(providers.Event{Type: providers.EventRunCompleted})
	return nil
}

// BenchmarkProjectPrepareReady measures preparing an already prepared
// container (CLI present, credentials, instructions, skills and assets
// published), and prompt → first event of a project chat on it.
func BenchmarkProjectPrepareReady(b *testing.B) {
	dir := b.TempDir()
	writeBench := func(p, s string) {
		if err := writeFileAll(p, s); err != nil {
			b.Fatal(err)
		}
	}
	writeBench(dir+"/instr/shared.md", "Be brief.\n")
	writeBench(dir+"/skills/demo/SKILL.md", "---\nname: demo\n---\n")
	writeBench(dir+"/home/.claude/.credentials.json", `{"token":"t"}`)
	steps := &provisioning.StepsOptions{
		InstructionsDir: dir + "/instr", SkillsDir: dir + "/skills",
		Providers: map[providers.ProviderID]provisioning.ProviderSetup{providers.Claude: {
			Check:            []string{"true"},
			Credentials:      []provisioning.Credential{{Host: dir + "/home/.claude/.credentials.json", Container: "/root/.claude/.credentials.json", Sync: true}},
			InstructionsPath: "/root/.claude/CLAUDE.md", SkillLinkDir: "/root/.claude/skills",
			Assets: []provisioning.File{{Content: []byte(`{}`), Container: "/root/.claude/settings.json"}},
		}},
	}
	e, p := benchEnv(b, projectEnvOpts{steps: steps, providers: []func(providers.AdapterConfig) providers.Provider{
		func(ports providers.AdapterConfig) providers.Provider { return readyProvider{prep: ports.Preparer} },
	}})
	req := providers.PrepareRequest{Provider: providers.Claude, ProjectID: p.Name}
	if _, err := e.prep.Prepare(context.Background(), req, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("prepare", func(b *testing.B) {
		for range b.N {
			if _, err := e.prep.Prepare(context.Background(), req, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: p.Name})
	if status != http.StatusCreated {
		b.Fatalf("chat: %d %s", status, body)
	}
	var chat api.Chat
	_ = json.Unmarshal(body, &chat)
	ws, _, err := e.dialWS("/ws/chat/"+chat.ID, "alice")
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	var mu sync.Mutex
	b.Run("prompt-to-first-event", func(b *testing.B) {
		for range b.N {
			mu.Lock()
			if err := ws.WriteJSON(api.ClientMessage{Type: "prompt", Text: "hello"}); err != nil {
				b.Fatal(err)
			}
			for {
				var ev api.Event
				if err := ws.ReadJSON(&ev); err != nil {
					b.Fatal(err)
				}
				if ev.Type == api.EventAssistantText {
					break
				}
			}
			// Let the run end before the next prompt.
			for {
				var ev api.Event
				if err := ws.ReadJSON(&ev); err != nil {
					b.Fatal(err)
				}
				if ev.Type == "sync" && !ev.Running {
					break
				}
			}
			mu.Unlock()
		}
	})
}

// BenchmarkProjectStartup measures start-up reconciliation of 20 autostart
// projects whose containers are stopped.
func BenchmarkProjectStartup(b *testing.B) {
	cl := testkit.LXD(b)
	st := openStore(b, b.TempDir())
	defer st.Close()
	var names []string
	for i := range 20 {
		c := testkit.NewContainer(b, cl, fmt.Sprint("boot", i))
		names = append(names, c)
		id := store.NewProjectID()
		if err := st.CreateProject(api.Project{ID: id, Name: fmt.Sprintf("boot%d", i), Container: c, Autostart: true, Status: provisioning.StatusRunning, CreatedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
		// Marked as the project's, as the daemon marks what it creates.
		if err := cl.UpdateInstance(context.Background(), c, lxdexec.InstancePatch{Config: map[string]string{provisioning.MarkerKey: id}}, ""); err != nil {
			b.Fatal(err)
		}
	}
	prep, err := provisioning.New(provisioning.Options{LXD: cl, Projects: st})
	if err != nil {
		b.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Options{Start: func(ctx context.Context, p api.Project) error { _, err := prep.Start(ctx, p); return err },
		MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey, Projects: st, Lister: cl})
	if err != nil {
		b.Fatal(err)
	}
	stopAll := func() {
		var wg sync.WaitGroup
		for _, c := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = cl.SetState(context.Background(), c, lxdexec.StateRequest{Action: "stop", Force: true})
			}()
		}
		wg.Wait()
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		stopAll()
		b.StartTimer()
		if err := rec.StartAll(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func writeFileAll(p, content string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o600)
}
