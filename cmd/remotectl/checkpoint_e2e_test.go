package main

import (
	"strings"
	"testing"

	"remote/internal/testkit"
)

// TestEndToEndCheckpointCommands drives project checkpoints, restore and
// limits and chat fork's flags against a real remoted on the local LXD.
func TestEndToEndCheckpointCommands(t *testing.T) {
	testkit.LXD(t)
	e := startE2E(t)
	name := strings.TrimPrefix(testkit.ContainerName("ctlck"), "t-")
	e.must("project", "create", name, "-checkpoints", "off")
	if out := e.must("project", "show", name); !strings.Contains(out, "checkpoints:  off") {
		t.Fatalf("show: %q", out)
	}
	if out := e.must("project", "limits", name, "-memory", "64MiB", "-processes", "50"); out != "memory=64MiB processes=50\n" {
		t.Fatalf("limits set: %q", out)
	}
	if out := e.must("project", "limits", name, "-processes", "0"); out != "memory=64MiB\n" {
		t.Fatalf("limits change one: %q", out)
	}
	if out := e.must("project", "limits", name); out != "memory=64MiB\n" {
		t.Fatalf("limits show: %q", out)
	}
	if r := e.run("", "project", "limits", name, "-memory", "lots"); r.code != 1 || !strings.Contains(r.stderr, `invalid limits.memory "lots"`) {
		t.Fatalf("bad limit: %d %q", r.code, r.stderr)
	}
	if out := e.must("project", "checkpoints", name); strings.TrimSpace(out) != "NAME  CHAT  SEQ  CREATED  SIZE" {
		t.Fatalf("checkpoints: %q", out)
	}
	if r := e.run("", "project", "restore", name, "snap0"); r.code != 1 || !strings.Contains(r.stderr, `invalid checkpoint "snap0": want rc-<chat>-<seq>`) {
		t.Fatalf("restore bad name: %d %q", r.code, r.stderr)
	}
	if r := e.run("", "chat", "fork", "abcdef012345", "-with-container"); r.code != 2 || !strings.Contains(r.stderr, "-with-container needs -at SEQ") {
		t.Fatalf("fork -with-container without -at: %d %q", r.code, r.stderr)
	}
	e.must("project", "rm", name, "-purge")
}
