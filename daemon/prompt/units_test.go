package prompt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"remote/api"
	"remote/internal/errdefs"
	"remote/providers"
)

func TestPromptWithHistory(t *testing.T) {
	history := []api.Event{
		{Type: "user", Text: "first question"},
		{Type: "thinking", Text: "SECRET REASONING"},
		{Type: "assistant_text", Text: "first "},
		{Type: "tool_use_end", Output: "TOOL OUTPUT"},
		{Type: "assistant_text", Text: "answer"},
	}
	got := promptWithHistory(history, "now", 24000)
	if !strings.Contains(got, "User:\nfirst question") || !strings.Contains(got, "Assistant:\nfirst answer") || !strings.HasSuffix(got, "Current user request:\nnow") {
		t.Errorf("prompt lacks the transcript: %q", got)
	}
	if strings.Contains(got, "SECRET") || strings.Contains(got, "TOOL OUTPUT") {
		t.Errorf("prompt includes reasoning or tool output: %q", got)
	}
	if got := promptWithHistory(nil, "now", 24000); got != "now" {
		t.Errorf("empty history changed the prompt: %q", got)
	}

	t.Run("bounded on a rune boundary", func(t *testing.T) {
		long := strings.Repeat("é", 20000) // 40000 bytes
		got := promptWithHistory([]api.Event{{Type: "user", Text: long}}, "q", 24000)
		if !utf8.ValidString(got) {
			t.Fatal("transcript cut inside a rune")
		}
		body := strings.TrimSuffix(got, "\n\nCurrent user request:\nq")
		i := strings.Index(body, "[Earlier visible transcript omitted]\n")
		if i < 0 {
			t.Fatalf("no omission marker")
		}
		tail := body[i+len("[Earlier visible transcript omitted]\n"):]
		if len(tail) > 24000 || len(tail) < 23990 {
			t.Errorf("transcript tail is %d bytes, want <= 24000 and close to it", len(tail))
		}
	})
}

func TestRootsCheck(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(root, "escape"))
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	r := NewRoots([]string{root}, "")
	for _, tt := range []struct {
		cwd string
		ok  bool
	}{
		{root, true},
		{filepath.Join(root, "sub"), true},
		{filepath.Join(root, "sub", ".."), true},
		{filepath.Join(root, "escape"), false},
		{filepath.Join(root, "sub", "..", ".."), false},
		{filepath.Join(root, "missing"), false},
		{filepath.Join(root, "file"), false},
		{"relative", false},
		{outside, false},
	} {
		_, err := r.Check(tt.cwd)
		if (err == nil) != tt.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tt.cwd, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tt.cwd) {
			t.Errorf("error %q does not name the cwd", err)
		}
	}
}

func TestSessions(t *testing.T) {
	c := api.Chat{ClaudeSessionID: " legacy ", Sessions: map[string]string{"codex": "cx", "kimi": " "}}
	NormalizeSessions(&c)
	if c.Sessions["claude"] != "legacy" || c.Sessions["codex"] != "cx" || c.CodexSessionID != "cx" || c.ClaudeSessionID != "legacy" {
		t.Errorf("normalize: %+v", c)
	}
	if _, ok := c.Sessions["kimi"]; ok {
		t.Errorf("empty session kept: %+v", c.Sessions)
	}
	SetSession(&c, "claude", "")
	if c.ClaudeSessionID != "" || c.Sessions["claude"] != "" || c.Sessions["codex"] != "cx" {
		t.Errorf("clear claude: %+v", c)
	}
	SetSession(&c, "minimax", "mm")
	if SessionID(c, "minimax") != "mm" {
		t.Errorf("new provider session not kept: %+v", c)
	}
}

func TestSkills(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"review", "deploy"} {
		os.MkdirAll(filepath.Join(dir, s), 0o755)
		os.WriteFile(filepath.Join(dir, s, "SKILL.md"), []byte("# "+s), 0o644)
	}
	t.Run("validation", func(t *testing.T) {
		for _, tt := range []struct {
			names []string
			dir   string
			ok    bool
		}{
			{nil, "", true},
			{[]string{"review"}, dir, true},
			{[]string{"review", "deploy"}, dir, true},
			{[]string{"missing"}, dir, false},
			{[]string{"review"}, "", false},
			{[]string{"../etc"}, dir, false},
			{[]string{"a/b"}, dir, false},
			{[]string{".hidden"}, dir, false},
			{[]string{"review", "review"}, dir, false},
			{[]string{""}, dir, false},
		} {
			err := validateSkills(tt.names, tt.dir)
			if (err == nil) != tt.ok {
				t.Errorf("validateSkills(%q, %q) = %v, want ok=%v", tt.names, tt.dir, err, tt.ok)
			}
			if err != nil && !errdefs.IsInvalidArgument(err) { // ToHTTP: 400 bad_request
				t.Errorf("error %v is not bad_request", err)
			}
		}
	})
	t.Run("strategies", func(t *testing.T) {
		skills := []string{"review", "deploy"}
		for _, tt := range []struct {
			strategy providers.SkillsStrategy
			want     string
		}{
			{providers.SkillsSlashCommand, "/review /deploy\n\ngo"},
			{providers.SkillsDollarMention, "Use these skills: $review, $deploy.\n\ngo"},
			{providers.SkillsInstructions, "Before you start, read and follow these skill instructions:\n- " + filepath.Join(dir, "review", "SKILL.md") + "\n- " + filepath.Join(dir, "deploy", "SKILL.md") + "\n\ngo"},
			{providers.SkillsNone, "go"},
		} {
			if got := promptWithSkills(tt.strategy, skills, dir, "go"); got != tt.want {
				t.Errorf("%s: got %q, want %q", tt.strategy, got, tt.want)
			}
		}
	})
}

func TestTailUTF8(t *testing.T) {
	for _, tt := range []struct {
		s    string
		max  int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "bc"}, {"aé", 1, ""}, {"aéb", 2, "b"}, {"aéb", 3, "éb"}, {"x", 0, ""}} {
		if got := tailUTF8(tt.s, tt.max); got != tt.want {
			t.Errorf("tailUTF8(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

// runWatch alone: silence cancels with errIdleTimeout; a finished turn,
// a stopped watch or no timeout never cancel.
func TestRunWatch(t *testing.T) {
	watch := func(idle time.Duration) (*runWatch, chan error) {
		got := make(chan error, 1)
		return newRunWatch(idle, func(err error) { got <- err }), got
	}
	w, got := watch(time.Nanosecond) // fires at once: no race with its own set-up
	if err := <-got; !errors.Is(err, errIdleTimeout) {
		t.Fatalf("cause %v, want errIdleTimeout", err)
	}
	w.stop()
	for _, tt := range []struct {
		name string
		idle time.Duration
		do   func(*runWatch)
	}{
		{"finished turn", 50 * time.Millisecond, func(w *runWatch) { w.saw(providers.Event{Type: providers.EventRunCompleted}) }},
		{"stopped", 50 * time.Millisecond, func(w *runWatch) { w.stop() }},
		{"no timeout", 0, func(*runWatch) {}},
	} {
		w, got := watch(tt.idle)
		tt.do(w)
		select {
		case err := <-got:
			t.Errorf("%s: cancelled with %v", tt.name, err)
		case <-time.After(200 * time.Millisecond):
		}
		w.stop()
	}
}

// TestProjectChatSkillPaths (S7): in a project chat the `instructions`
// strategy points at the skill inside the container, where provisioning
// publishes it, never at the host's skills_dir.
func TestProjectChatSkillPaths(t *testing.T) {
	host := "/srv/remote/skills"
	project := promptWithSkills(providers.SkillsInstructions, []string{"review"}, skillsDirFor(api.Chat{Project: "web"}, host), "go")
	want := "Before you start, read and follow these skill instructions:\n- /workspace/.agents/skills/review/SKILL.md\n\ngo"
	if project != want {
		t.Errorf("project chat: %q, want %q", project, want)
	}
	loose := promptWithSkills(providers.SkillsInstructions, []string{"review"}, skillsDirFor(api.Chat{}, host), "go")
	if !strings.Contains(loose, "- /srv/remote/skills/review/SKILL.md\n") {
		t.Errorf("loose chat: %q, want the host path", loose)
	}
}

// keyless is a provider missing a credential every run needs (MiniMax
// without MINIMAX_API_KEY).
type keyless struct{ providers.Provider }

func (keyless) MissingCredential() string { return "set MINIMAX_API_KEY" }

// A prompt to a provider missing its configured credential is refused at
// once, in a project chat too (where the host CLI is not checked): 503
// with the line naming what to set.
func TestCheckReadyRefusesMissingCredential(t *testing.T) {
	for _, chat := range []api.Chat{{ID: "abcd"}, {ID: "abcd", Project: "web"}} {
		err := checkReady(t.Context(), "minimax", keyless{}, chat)
		if !errdefs.IsUnavailable(err) || err.Error() != `provider "minimax" is not ready: set MINIMAX_API_KEY` {
			t.Errorf("project %q: checkReady = %v, want unavailable naming the key", chat.Project, err)
		}
	}
}
