package antigravity

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
	"unicode/utf8"

	"remote/providers"
	"remote/providers/runner"
	"remote/providers/runner/runnertest"
)

const fakeEnv = "AGY_FAKE_SCENARIO"

func TestMain(m *testing.M) {
	if s := os.Getenv(fakeEnv); s != "" {
		os.Exit(fakeAgy(s))
	}
	os.Exit(m.Run())
}

const (
	newConv   = "6a1f3c2e-0b9d-4e4f-9a8b-7c6d5e4f3a2b"
	otherConv = "7b2e4d3f-1c0e-4f5a-8b9c-8d7e6f5a4b3c"
)

// markdown is what the fake prints in pieces, with blank lines, a code
// fence, trailing spaces, a JSON-looking line and a rune split across
// writes.
const markdown = "# Plan\n\n\nFirst paragraph.  \n\n```go\nfmt.Println(\"hi\")\n```\n\n{\"not\": \"parsed\"\n- café ✓\n\n"

// fakeAgy acts as agy 1.1.1 or later for a scenario, recording its argv in
// AGY_FAKE_RECORD and the prompt it got in AGY_FAKE_RECORD.prompt. It
// takes the prompt as agy does (google-antigravity/antigravity-cli#582):
// from the value of --print, -p or --prompt (Go flags: one or two dashes,
// "=value" or the next argument; empty is "empty prompt"), and then never
// from stdin; without a prompt flag, all of stdin when stdin is not a
// terminal (print mode). A terminal with no prompt flag would be the TUI,
// which is not faked.
func fakeAgy(scenario string) int {
	record := os.Getenv("AGY_FAKE_RECORD")
	os.WriteFile(record, []byte(strings.Join(os.Args[1:], "\n")), 0o600)
	var prompt *string
	for i := 1; i < len(os.Args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(os.Args[i], "-"), "=")
		if !strings.HasPrefix(os.Args[i], "-") || (name != "print" && name != "p" && name != "prompt") {
			continue
		}
		if !hasValue {
			if i+1 >= len(os.Args) {
				fmt.Fprintln(os.Stderr, "flag needs an argument: -"+name)
				return 2
			}
			value = os.Args[i+1]
		}
		prompt = &value
		break
	}
	if prompt == nil {
		if fi, err := os.Stdin.Stat(); err != nil || fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(os.Stderr, "fake agy: the interactive TUI is not faked")
			return 98
		}
		b, _ := io.ReadAll(os.Stdin)
		p := string(b)
		prompt = &p
	}
	if strings.TrimSpace(*prompt) == "" {
		fmt.Fprintln(os.Stderr, "Error: empty prompt")
		return 1
	}
	os.WriteFile(record+".prompt", []byte(*prompt), 0o600)
	brain := filepath.Join(os.Getenv("HOME"), BrainDir)
	mkconv := func(names ...string) {
		for _, n := range names {
			os.MkdirAll(filepath.Join(brain, n, ".system_generated", "logs"), 0o700)
		}
	}
	write := func(s string) {
		os.Stdout.WriteString(s)
		time.Sleep(5 * time.Millisecond) //nolint:forbidigo // separate reads on the other end
	}
	switch scenario {
	case "ok", "two", "invalid":
		b := []byte(markdown)
		split := strings.Index(markdown, "é") + 1 // inside the two-byte é
		write(string(b[:20]))
		write(string(b[20:split]))
		write(string(b[split:]))
		switch scenario {
		case "ok":
			mkconv(newConv)
		case "two":
			mkconv(newConv, otherConv)
		case "invalid":
			mkconv("not-a-conversation")
			os.MkdirAll(brain, 0o700)
			os.WriteFile(filepath.Join(brain, newConv), nil, 0o600) // a file, not a directory
		}
		return 0
	case "signin":
		fmt.Println("Starting Antigravity…")
		fmt.Fprintln(os.Stderr, "Error: you are signed out. Please sign in to continue.")
		return 1
	case "fail":
		for i := 0; i < 200; i++ {
			fmt.Printf("line %03d of noisy output\n", i)
		}
		fmt.Fprintln(os.Stderr, "fatal: model quota exhausted")
		return 3
	case "block":
		// Hold the run until the test has looked at /proc, then finish.
		os.WriteFile(record+".pid", []byte(strconv.Itoa(os.Getpid())), 0o600)
		for {
			if _, err := os.Stat(record + ".release"); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond) //nolint:forbidigo // the fake CLI (a subprocess, no testing.T) polls for the test's release file
		}
		write("done\n")
		return 0
	case "hang":
		write("working\n")
		time.Sleep(time.Minute) //nolint:forbidigo // the fake CLI hangs: the subject
		return 0
	}
	return 99
}

type fixture struct {
	home, record string
	p            *Provider
}

func newFixture(t *testing.T, scenario string, cfg providers.AdapterConfig) *fixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{home: t.TempDir(), record: filepath.Join(t.TempDir(), "argv")}
	cfg.Binary = exe
	cfg.Env = map[string]string{fakeEnv: scenario, "AGY_FAKE_RECORD": f.record, "HOME": f.home}
	cfg.ProjectEnv = []string{fakeEnv, "AGY_FAKE_RECORD"} // the fake CLI in a (simulated) shared project
	f.p = New(cfg)
	return f
}

type result struct {
	events []providers.Event
	text   string
	seq    []string
}

func (f *fixture) run(t *testing.T, ctx context.Context, req providers.RunRequest) (result, error) {
	t.Helper()
	var mu sync.Mutex
	var r result
	err := f.p.Run(ctx, req, func(e providers.Event) {
		mu.Lock()
		defer mu.Unlock()
		r.events = append(r.events, e)
		if e.Provider != providers.Antigravity {
			t.Errorf("event %s without provider", e.Type)
		}
		if e.Type == providers.EventAssistantDelta {
			if !utf8.ValidString(e.Text) {
				t.Errorf("delta %q splits a rune", e.Text)
			}
			r.text += e.Text
			if len(r.seq) == 0 || r.seq[len(r.seq)-1] != "assistant.delta*" {
				r.seq = append(r.seq, "assistant.delta*")
			}
			return
		}
		s := string(e.Type)
		for _, kv := range [][2]string{{"session", e.SessionID}, {"model", e.Model}, {"subtype", e.Subtype}, {"message", e.Message}} {
			if kv[1] != "" {
				s += " " + kv[0] + "=" + kv[1]
			}
		}
		r.seq = append(r.seq, s)
	})
	return r, err
}

func TestRunHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		scenario string
		req      providers.RunRequest
		preexist []string
		wantSeq  []string
		wantText string
		wantArgs []string
		wantErr  func(error) bool
	}{
		{
			name: "fresh run: chunks, one new conversation, completion", scenario: "ok",
			req:      providers.RunRequest{Prompt: "plan it", Model: "gemini-3-pro", Preferences: providers.RunPreferences{ReasoningEffort: "high"}},
			preexist: []string{otherConv},
			wantSeq:  []string{"assistant.delta*", "session.updated session=" + newConv + " model=gemini-3-pro", "run.completed model=gemini-3-pro"},
			wantText: markdown,
			wantArgs: []string{"--print-timeout", "240m", "--dangerously-skip-permissions", "--model", "gemini-3-pro", "--effort", "high"},
		},
		{
			name: "plan mode, unknown effort dropped", scenario: "ok",
			req:      providers.RunRequest{Prompt: "p", Mode: providers.ModePlan, Preferences: providers.RunPreferences{ReasoningEffort: "max"}},
			wantSeq:  []string{"assistant.delta*", "session.updated session=" + newConv, "run.completed"},
			wantText: markdown,
			wantArgs: []string{"--print-timeout", "240m", "--mode", "plan"},
		},
		{
			name: "two new conversations: ambiguous, no session", scenario: "two",
			req:      providers.RunRequest{Prompt: "p"},
			wantSeq:  []string{"assistant.delta*", "run.completed"},
			wantText: markdown,
		},
		{
			name: "no valid new directory: no session", scenario: "invalid",
			req:      providers.RunRequest{Prompt: "p"},
			wantSeq:  []string{"assistant.delta*", "run.completed"},
			wantText: markdown,
		},
		{
			name: "resume: no discovery", scenario: "ok",
			req:      providers.RunRequest{Prompt: "p", ResumeID: otherConv},
			wantSeq:  []string{"assistant.delta*", "run.completed"},
			wantText: markdown,
			wantArgs: []string{"--print-timeout", "240m", "--dangerously-skip-permissions", "--conversation", otherConv},
		},
		{
			name: "fork clears resume and discovers", scenario: "ok",
			req:      providers.RunRequest{Prompt: "p", ResumeID: otherConv, Fork: true},
			preexist: []string{otherConv},
			wantSeq:  []string{"assistant.delta*", "session.updated session=" + newConv, "run.completed"},
			wantText: markdown,
			wantArgs: []string{"--print-timeout", "240m", "--dangerously-skip-permissions"},
		},
		{
			name: "sign-in failure becomes an instruction", scenario: "signin",
			req:      providers.RunRequest{Prompt: "p"},
			wantSeq:  []string{"assistant.delta*", "run.failed message=" + SignInInstruction},
			wantText: "Starting Antigravity…\n",
			wantErr: func(err error) bool {
				return errors.Is(err, providers.ErrRunFailed) && errors.Is(err, ErrNotSignedIn)
			},
		},
		{
			name: "other failure carries the 4 KiB output tail", scenario: "fail",
			req:     providers.RunRequest{Prompt: "p"},
			wantSeq: []string{"assistant.delta*"},
			wantErr: func(err error) bool {
				var pe *runner.ProcessError
				var ee *providers.ExitError
				return errors.As(err, &pe) && errors.As(err, &ee) && ee.Code == 3 && len(pe.Stderr) <= 4096 &&
					strings.Contains(pe.Stderr, "fatal: model quota exhausted") && strings.Contains(pe.Stderr, "line 199") &&
					!strings.Contains(pe.Stderr, "line 000") && !errors.Is(err, providers.ErrRunFailed)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.scenario, providers.AdapterConfig{})
			for _, c := range tt.preexist {
				os.MkdirAll(filepath.Join(f.home, BrainDir, c), 0o700)
			}
			tt.req.Cwd = t.TempDir()
			r, err := f.run(t, context.Background(), tt.req)
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Run = %v", err)
				}
			} else if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if strings.Join(r.seq, "\n") != strings.Join(tt.wantSeq, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(r.seq, "\n"), strings.Join(tt.wantSeq, "\n"))
			}
			if tt.wantText != "" && r.text != tt.wantText {
				t.Errorf("text %q\nwant %q", r.text, tt.wantText)
			}
			if tt.wantArgs != nil {
				b, _ := os.ReadFile(f.record)
				if got := strings.Split(string(b), "\n"); !slices.Equal(got, tt.wantArgs) {
					t.Errorf("argv %q\nwant %q", got, tt.wantArgs)
				}
				if got, _ := os.ReadFile(f.record + ".prompt"); string(got) != tt.req.Prompt {
					t.Errorf("the CLI read prompt %q from stdin, want %q", got, tt.req.Prompt)
				}
			}
		})
	}
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "hang", providers.AdapterConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []providers.EventType
	err := f.p.Run(ctx, providers.RunRequest{Prompt: "p", Cwd: t.TempDir()}, func(e providers.Event) {
		got = append(got, e.Type)
		cancel()
	})
	if err != nil || !slices.Equal(got, []providers.EventType{providers.EventAssistantDelta}) {
		t.Fatalf("Run = %v, events %v; want nil and no completion", err, got)
	}
}

func TestRunProject(t *testing.T) {
	t.Parallel()
	// The container is simulated by the host: its launcher records the
	// command and runs it with $HOME pointing at a temp dir, and the brain
	// listing goes through the same launcher (sh and find on the host).
	home := t.TempDir()
	var cmds []providers.Command
	var mu sync.Mutex
	launcher := runnertest.LauncherFunc(func(ctx context.Context, cmd providers.Command) (providers.Process, error) {
		mu.Lock()
		cmds = append(cmds, cmd)
		mu.Unlock()
		if cmd.Path == "sh" { // the brain listing: map /root to the fake home
			cmd.Args = slices.Clone(cmd.Args)
			cmd.Args[len(cmd.Args)-1] = strings.Replace(cmd.Args[len(cmd.Args)-1], "/root", home, 1)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		} else {
			cmd.Dir = home
			cmd.Env = append(slices.Clone(cmd.Env), "HOME="+home)
		}
		return (&runner.HostLauncher{}).Start(ctx, cmd)
	})
	synced := false
	prep := runnertest.Preparer{
		PrepareFunc: func(context.Context, providers.PrepareRequest, func(providers.Event)) (providers.Target, error) {
			return providers.Target{ProjectID: "p1", Container: "c-p1", SharedCredentials: true}, nil
		},
		SyncFunc: func(context.Context, providers.Target, providers.ProviderID) error { synced = true; return nil },
	}
	f := newFixture(t, "ok", providers.AdapterConfig{Preparer: prep, Containers: runnertest.ContainersFunc(func(string) providers.Launcher { return launcher })})
	var seq []providers.EventType
	err := f.p.Run(context.Background(), providers.RunRequest{Prompt: "p", ProjectID: "p1"}, func(e providers.Event) { seq = append(seq, e.Type) })
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	var agy providers.Command
	for _, c := range cmds {
		if c.Path != "sh" {
			agy = c
		}
	}
	if agy.Dir != "/workspace" || !slices.Contains(agy.Env, "HOME=/root") || synced {
		t.Errorf("command %+v, credential sync %v (antigravity has none)", agy, synced)
	}
	if len(cmds) != 3 {
		t.Errorf("%d commands, want listing, run, listing", len(cmds))
	}
	if n := len(seq); n < 3 || seq[n-2] != providers.EventSessionUpdated || seq[n-1] != providers.EventRunCompleted {
		t.Errorf("events %v: want the conversation found through the container listing, then completion", seq)
	}
}
