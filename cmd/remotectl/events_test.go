package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"remote/api"
	"remote/client"
	"remote/daemon/daemontest"
)

// TestEventsSystemData: events (and prompt and tail, which share the
// renderer) show the daemon's repository events with their data: the
// branch and commit of a push, the number and URL of a pull request, the
// repository, ref and commit of a clone, git's message of a failed clone
// (on one line, control sequences removed). Stdout keeps only the reply.
func TestEventsSystemData(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	const sha = "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"
	fake := newDaemon(t, daemontest.Options{}, daemontest.Chat{
		Chat: api.Chat{ID: "feed01234567", Owner: client.New("").User(), Provider: "codex", Cwd: os.TempDir()},
		Events: []api.Event{
			{Type: api.EventSystem, Subtype: api.SubtypeRepoCloned, Data: raw(map[string]string{"url": "https://git.example.com/o/r.git", "ref": "main", "sha": sha})},
			{Type: api.EventSystem, Subtype: api.SubtypeRepoCloneFailed, Data: raw(map[string]string{"url": "https://git.example.com/o/r.git", "error": "fatal: repository not found\n\x1b[31mhint\x1b[0m: check it"})},
			{Type: api.EventAssistantText, MessageID: "m1", Text: "done"},
			{Type: api.EventSystem, Subtype: api.SubtypePushed, Data: raw(api.PushResult{Branch: "fix/login", SHA: sha})},
			{Type: api.EventSystem, Subtype: api.SubtypePullRequest, Data: raw(map[string]any{"url": "https://git.example.com/o/r/pull/12", "number": 12})},
			{Type: api.EventSystem, Subtype: api.SubtypeContainerStarting},
			{Type: api.EventSystem, Subtype: "init", Data: raw(map[string]string{"url": "a CLI's own system line is not shown"})},
			{Type: api.EventComplete},
		},
	})
	r := runCtl(context.Background(), fake, "", "events", "feed01234567")
	if r.code != 0 {
		t.Fatalf("events: %+v", r)
	}
	want := "[repo_cloned https://git.example.com/o/r.git main at 1a2b3c4d5e6f]\n" +
		"[repo_clone_failed https://git.example.com/o/r.git: fatal: repository not found hint: check it]\n" +
		"[pushed fix/login at 1a2b3c4d5e6f]\n" +
		"[pull_request #12 https://git.example.com/o/r/pull/12]\n" +
		"[container_starting]\n" +
		"[init]\n"
	if r.stderr != want {
		t.Errorf("stderr:\n%s\nwant\n%s", r.stderr, want)
	}
	if r.stdout != "done\n" {
		t.Errorf("stdout %q, want only the reply", r.stdout)
	}
	if strings.Contains(r.stderr, "\x1b") {
		t.Errorf("a control sequence reached the terminal: %q", r.stderr)
	}
}
