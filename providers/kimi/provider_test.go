package kimi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/providers"
	"remote/providers/runner"
	"remote/providers/runner/runnertest"
)

// fakeEnv makes the re-executed test binary act as the kimi CLI.
const fakeEnv = "KIMI_FAKE_SCENARIO"

func TestMain(m *testing.M) {
	if s := os.Getenv(fakeEnv); s != "" {
		os.Exit(fakeKimi(s))
	}
	os.Exit(m.Run())
}

// fakeKimi prints what the documented print mode prints for a scenario,
// including blank, malformed and unknown lines, and records its argv (in
// KIMI_FAKE_RECORD) and the prompt it got (in KIMI_FAKE_RECORD.prompt).
// It takes the prompt the way kimi-cli does (src/kimi_cli/cli/__init__.py,
// src/kimi_cli/ui/print/__init__.py Print.run): from -p/--prompt/-c/
// --command (stripped; empty is a usage error), else, in print mode with
// the text input format, all of stdin when stdin is not a terminal
// (stripped); with no prompt at all a text-mode run does nothing and
// exits 0.
func fakeKimi(scenario string) int {
	wd, _ := os.Getwd()
	record := os.Getenv("KIMI_FAKE_RECORD")
	os.WriteFile(record, []byte(strings.Join(append(os.Args[1:], "cwd="+wd, "home="+os.Getenv("HOME")), "\n")), 0o600)
	session := "0f5a8d3e-aaaa-4bbb-8ccc-111122223333"
	var prompt *string
	printMode, inputFormat := false, "text"
	for i := 1; i < len(os.Args); i++ {
		a, next := os.Args[i], ""
		if i+1 < len(os.Args) {
			next = os.Args[i+1]
		}
		switch a {
		case "--session", "-S":
			session = next
			i++
		case "-p", "--prompt", "-c", "--command":
			p := strings.TrimSpace(next)
			prompt = &p
			i++
		case "--input-format":
			inputFormat = next
			i++
		case "--print":
			printMode = true
		}
	}
	if prompt != nil && *prompt == "" {
		fmt.Fprintln(os.Stderr, "Error: Invalid value for --prompt: Prompt cannot be empty")
		return 2
	}
	if !printMode {
		fmt.Fprintln(os.Stderr, "fake kimi: only print mode is faked")
		return 98
	}
	if scenario == "notfound" { // the session is looked up before the prompt is read
		fmt.Fprintf(os.Stderr, "Error: Invalid value for --session: Session not found: %s\n", session)
		return 2
	}
	if fi, err := os.Stdin.Stat(); prompt == nil && err == nil && fi.Mode()&os.ModeCharDevice == 0 && inputFormat == "text" {
		b, _ := io.ReadAll(os.Stdin)
		p := strings.TrimSpace(string(b))
		prompt = &p
	}
	if prompt == nil {
		return 0 // text mode without a command: nothing to run
	}
	os.WriteFile(record+".prompt", []byte(*prompt), 0o600)
	if scenario == "block" {
		// Hold the run until the test has looked at /proc, then finish.
		os.WriteFile(record+".pid", []byte(strconv.Itoa(os.Getpid())), 0o600)
		for {
			if _, err := os.Stat(record + ".release"); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond) //nolint:forbidigo // the fake CLI (a subprocess, no testing.T) polls for the test's release file
		}
		scenario = "ok"
	}
	switch scenario {
	case "ok":
		fmt.Println(`{"role":"assistant","content":"Let me check.","tool_calls":[{"type":"function","id":"tc_1","function":{"name":"Shell","arguments":"{\"command\":\"ls\"}"}}]}`)
		fmt.Println(`{"role":"tool","tool_call_id":"tc_1","content":"file1.py\nfile2.py"}`)
		fmt.Println(``)
		fmt.Println(`{"role":"assistant","content":[{"type":"think","think":"two files"},{"type":"text","text":"There are two Python files."}]}`)
		fmt.Println(`this is not json`)
		fmt.Println(`{"type":"PlanDisplay","plan":"x"}`)
		fmt.Printf(`{"role":"meta","type":"session.resume_hint","session_id":%q,"content":"To resume this session: kimi -r %s"}`+"\n", session, session)
		return 0
	case "nohint":
		fmt.Println(`{"role":"assistant","content":"partial"}`)
		return 0
	case "crash":
		fmt.Println(`{"role":"assistant","content":"partial"}`)
		fmt.Fprintln(os.Stderr, "Traceback: boom")
		return 1
	}
	return 99
}

type fixture struct {
	record string
	p      *Provider
}

func newFixture(t *testing.T, scenario string, cfg providers.AdapterConfig) *fixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "record")
	cfg.Binary = exe
	cfg.Env = map[string]string{fakeEnv: scenario, "KIMI_FAKE_RECORD": record}
	cfg.ProjectEnv = []string{fakeEnv, "KIMI_FAKE_RECORD"} // the fake CLI in a (simulated) shared project
	return &fixture{record: record, p: New(cfg)}
}

func (f *fixture) run(t *testing.T, req providers.RunRequest) ([]string, error) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	err := f.p.Run(context.Background(), req, func(e providers.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Provider != providers.Kimi || e.ConversationID != req.ConversationID {
			t.Errorf("event %s: provider %q conversation %q", e.Type, e.Provider, e.ConversationID)
		}
		s := render(e)
		if e.Model != "" {
			s += " model=" + e.Model
		}
		got = append(got, s)
	})
	return got, err
}

func (f *fixture) argv(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.record)
	if err != nil {
		t.Fatalf("fake CLI did not run: %v", err)
	}
	return strings.Split(string(b), "\n")
}

var okEvents = []string{
	`assistant.delta msg=kimi-1 text="Let me check."`,
	`tool.started msg=kimi-1 item=tc_1 tool=Shell input={"command":"ls"}`,
	`tool.completed item=tc_1 tool=Shell output="file1.py\nfile2.py"`,
	`reasoning.delta msg=kimi-2 text="two files"`,
	`assistant.delta msg=kimi-2 text="There are two Python files."`,
	`provider.native native=PlanDisplay`,
}

func TestRunHost(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	tests := []struct {
		name     string
		scenario string
		req      providers.RunRequest
		want     []string
		wantArgs []string
		wantErr  func(error) bool
	}{
		{
			name: "fresh run", scenario: "ok",
			req: providers.RunRequest{ConversationID: "c1", Prompt: "list files", Model: "kimi-k2", Cwd: cwd},
			want: append(slices.Clone(okEvents),
				"session.updated session=0f5a8d3e-aaaa-4bbb-8ccc-111122223333",
				"run.completed session=0f5a8d3e-aaaa-4bbb-8ccc-111122223333 model=kimi-k2"),
			wantArgs: []string{"--print", "--output-format", "stream-json", "--model", "kimi-k2", "cwd=" + cwd},
		},
		{
			name: "resume keeps the session", scenario: "ok",
			req:      providers.RunRequest{ConversationID: "c1", Prompt: "again", ResumeID: "sess-1", Cwd: cwd},
			want:     append(slices.Clone(okEvents), "run.completed session=sess-1"),
			wantArgs: []string{"--print", "--output-format", "stream-json", "--session", "sess-1", "cwd=" + cwd},
		},
		{
			name: "fork clears resume", scenario: "ok",
			req: providers.RunRequest{ConversationID: "c1", Prompt: "fork", ResumeID: "sess-1", Fork: true, Cwd: cwd},
			want: append(slices.Clone(okEvents),
				"session.updated session=0f5a8d3e-aaaa-4bbb-8ccc-111122223333",
				"run.completed session=0f5a8d3e-aaaa-4bbb-8ccc-111122223333"),
			wantArgs: []string{"--print", "--output-format", "stream-json", "cwd=" + cwd},
		},
		{
			name: "unknown session", scenario: "notfound",
			req:     providers.RunRequest{ConversationID: "c1", Prompt: "x", ResumeID: "gone", Cwd: cwd},
			wantErr: func(err error) bool { return errors.Is(err, providers.ErrSessionNotFound) },
		},
		{
			name: "exit 0 without the hint is an unfinished turn, no completion", scenario: "nohint",
			req:  providers.RunRequest{ConversationID: "c1", Prompt: "x", Cwd: cwd},
			want: []string{`assistant.delta msg=kimi-1 text="partial"`},
			wantErr: func(err error) bool {
				return errors.Is(err, providers.ErrUnfinishedTurn) && err.Error() == "exited without finishing the turn"
			},
		},
		{
			name: "crash carries stderr", scenario: "crash",
			req:  providers.RunRequest{ConversationID: "c1", Prompt: "x", Cwd: cwd},
			want: []string{`assistant.delta msg=kimi-1 text="partial"`},
			wantErr: func(err error) bool {
				var pe *runner.ProcessError
				return errors.As(err, &pe) && strings.Contains(err.Error(), "Traceback: boom") &&
					!errors.Is(err, providers.ErrRunFailed) && !errors.Is(err, providers.ErrSessionNotFound)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.scenario, providers.AdapterConfig{})
			got, err := f.run(t, tt.req)
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Run = %v", err)
				}
			} else if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tt.wantArgs != nil {
				argv := f.argv(t)
				if !slices.Equal(argv[:len(argv)-1], tt.wantArgs) {
					t.Errorf("argv %q\nwant %q", argv[:len(argv)-1], tt.wantArgs)
				}
				if got, _ := os.ReadFile(f.record + ".prompt"); string(got) != tt.req.Prompt {
					t.Errorf("the CLI read prompt %q from stdin, want %q", got, tt.req.Prompt)
				}
			}
		})
	}
}

func TestRunProject(t *testing.T) {
	t.Parallel()
	var gotCmd providers.Command
	var gotName string
	synced := 0
	hostDir := t.TempDir()
	containers := runnertest.ContainersFunc(func(name string) providers.Launcher {
		gotName = name
		return runnertest.LauncherFunc(func(ctx context.Context, cmd providers.Command) (providers.Process, error) {
			gotCmd = cmd
			cmd.Dir = hostDir // /workspace exists only in the container
			return (&runner.HostLauncher{}).Start(ctx, cmd)
		})
	})
	prep := runnertest.Preparer{
		PrepareFunc: func(_ context.Context, req providers.PrepareRequest, emit func(providers.Event)) (providers.Target, error) {
			if req.Provider != providers.Kimi || req.ProjectID != "p1" {
				t.Errorf("prepare %+v", req)
			}
			emit(providers.Event{Type: providers.EventSystem, Subtype: "container_starting"})
			return providers.Target{ProjectID: "p1", Container: "proj-p1", SharedCredentials: true, Secrets: []providers.Secret{
				{Key: "HOME", Value: "/evil"}, {Key: "API_TOKEN", Value: "s3cret"}, {Key: "RUNTIME_X", Value: "masked"},
			}}, nil
		},
		SyncFunc: func(_ context.Context, tg providers.Target, p providers.ProviderID) error {
			synced++
			if tg.Container != "proj-p1" || p != providers.Kimi {
				t.Errorf("sync %+v %s", tg, p)
			}
			return errors.New("sync failed (best effort)")
		},
	}
	f := newFixture(t, "ok", providers.AdapterConfig{Containers: containers, Preparer: prep})
	got, err := f.run(t, providers.RunRequest{ConversationID: "c1", Prompt: "hi", ProjectID: "p1", RuntimeEnv: map[string]string{"RUNTIME_X": "issued"}})
	if err != nil {
		t.Fatalf("Run = %v (a failed credential sync must not fail the run)", err)
	}
	if got[0] != "system" || len(got) != len(okEvents)+3 {
		t.Errorf("events %q", got)
	}
	if gotName != "proj-p1" || gotCmd.Dir != "/workspace" || synced != 1 {
		t.Errorf("container %q dir %q synced %d", gotName, gotCmd.Dir, synced)
	}
	for _, want := range []string{"HOME=/root", "API_TOKEN=s3cret", "RUNTIME_X=issued", "LANG=C.UTF-8"} {
		if !slices.Contains(gotCmd.Env, want) {
			t.Errorf("env %q lacks %s", gotCmd.Env, want)
		}
	}

	// Not wired: a clear error.
	p := New(providers.AdapterConfig{Binary: "kimi"})
	if err := p.Run(context.Background(), providers.RunRequest{ProjectID: "p1"}, func(providers.Event) {}); !errors.Is(err, ErrNotWired) {
		t.Fatalf("unwired project run: %v", err)
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	c, err := New(providers.AdapterConfig{}).Capabilities(context.Background(), providers.CapabilityRequest{})
	if err != nil || !c.Resume || c.Fork || c.PlanMode || c.Skills != providers.SkillsInstructions || !c.CredentialSync {
		t.Fatalf("%+v %v", c, err)
	}
}
