package prompt

// The prompt service's own bounds: a UTF-8 tail that fits is kept whole,
// the history exactly at its bound, roots resolved through a symlink, and
// a session set for one provider keeping the others'.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"remote/api"
)

// TestTailUTF8KeepsAFittingStringWhole: a string of exactly max bytes is
// returned byte for byte, even one starting with a continuation byte.
func TestTailUTF8KeepsAFittingStringWhole(t *testing.T) {
	for _, s := range []string{"abcd", "\x80bcd", "é€"} {
		if got := tailUTF8(s, len(s)); got != s {
			t.Errorf("tailUTF8(%q, %d) = %q, want it whole", s, len(s), got)
		}
	}
}

// TestPromptWithHistoryExactlyAtBound: a transcript of exactly 24,000
// bytes is sent whole, without the omission marker; one byte more is cut.
func TestPromptWithHistoryExactlyAtBound(t *testing.T) {
	text := strings.Repeat("x", 24000-len("User:\n"))
	history := []api.Event{{Type: "user", Text: text}}
	if got := visibleTranscript(history); len(got) != 24000 {
		t.Fatalf("transcript is %d bytes, want 24000 (test setup)", len(got))
	}
	got := promptWithHistory(history, "q", 24000)
	if strings.Contains(got, "[Earlier visible transcript omitted]") || !strings.Contains(got, "User:\n"+text+"\n\nCurrent user request:\nq") {
		t.Fatalf("a 24000-byte transcript was cut: %.200q", got)
	}
	history[0].Text += "y"
	if got := promptWithHistory(history, "q", 24000); !strings.Contains(got, "[Earlier visible transcript omitted]\n") {
		t.Fatalf("a 24001-byte transcript was not cut: %.200q", got)
	}
}

// TestRootsThroughSymlink: a root configured through a symlink admits the
// directories under its target; the refusal names "the host user" when no
// user is named.
func TestRootsThroughSymlink(t *testing.T) {
	real := t.TempDir()
	if err := os.Mkdir(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	r := NewRoots([]string{link}, "")
	for _, cwd := range []string{filepath.Join(real, "sub"), filepath.Join(link, "sub")} {
		if _, err := r.Check(cwd); err != nil {
			t.Errorf("Check(%q) under a symlinked root = %v, want ok", cwd, err)
		}
	}
	_, err := r.Check(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not a directory the host user may enter") {
		t.Fatalf("Check outside = %v, want it to name the host user", err)
	}
}

// TestSetSessionKeepsOtherProviders: saving one provider's session keeps
// the others' (S28 scope).
func TestSetSessionKeepsOtherProviders(t *testing.T) {
	c := api.Chat{Sessions: map[string]string{"codex": "cx", "claude": "cl"}}
	SetSession(&c, "minimax", "mm")
	if c.Sessions["codex"] != "cx" || c.Sessions["claude"] != "cl" || c.Sessions["minimax"] != "mm" {
		t.Fatalf("sessions = %v, want codex, claude and minimax kept", c.Sessions)
	}
	var empty api.Chat
	SetSession(&empty, "codex", "c1")
	if empty.Sessions["codex"] != "c1" || empty.CodexSessionID != "c1" {
		t.Fatalf("first session on a chat = %+v", empty)
	}
}
