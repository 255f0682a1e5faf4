package main

import (
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
)

// TestEndToEndProjectEnv: project env show, log and rebuild against a
// real remoted: a project without an environment shows "none", its log
// is empty, a rebuild is accepted; a bad action is a usage error.
func TestEndToEndProjectEnv(t *testing.T) {
	cl := testkit.LXD(t)
	e := startE2E(t)
	name := strings.TrimPrefix(testkit.ContainerName("ctlenv"), "t-")
	testkit.CleanupProjectContainers(t, cl, name)
	e.must("project", "create", name)
	if out := e.must("project", "env", "show", name); !strings.Contains(out, "state:     none") {
		t.Fatalf("env show: %q", out)
	}
	if out := e.must("project", "env", "log", name); out != "" {
		t.Fatalf("env log: %q", out)
	}
	if out := e.must("project", "env", "rebuild", name); !strings.Contains(out, "state:     building") {
		t.Fatalf("env rebuild: %q", out)
	}
	// The rebuild runs in the background: it starts the container, finds
	// no environment and says so.
	testkit.Eventually(t, 3*time.Minute, func() bool {
		return strings.Contains(e.must("project", "env", "show", name), "state:     none")
	}, "the rebuild to end")
	if r := e.run("", "project", "env", "bogus", name); r.code != 2 || !strings.Contains(r.stderr, "unknown action") {
		t.Fatalf("env bogus: %d %s", r.code, r.stderr)
	}
	if r := e.run("", "project", "env", "show", "no-such-project"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("env show of a missing project: %d %s", r.code, r.stderr)
	}
	e.must("project", "rm", name, "-purge")
}
