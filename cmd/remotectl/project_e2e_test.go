package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
)

// TestEndToEndProject drives the project commands against a real remoted
// wired to the local LXD.
func TestEndToEndProject(t *testing.T) {
	cl := testkit.LXD(t)
	e := startE2E(t)
	name := strings.TrimPrefix(testkit.ContainerName("ctl"), "t-")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = cl.ForceDeleteInstance(ctx, "remote-"+name)
	})
	if out := e.must("project", "create", name, "-port", "8080"); !strings.Contains(out, "remote-"+name) {
		t.Fatalf("create: %q", out)
	}
	if out := e.must("project", "list"); !strings.Contains(out, name) {
		t.Fatalf("list: %q", out)
	}
	if r := e.run("value-from-stdin\n", "project", "secret", "set", name, "TOKEN"); r.code != 0 {
		t.Fatalf("secret set: %d %s", r.code, r.stderr)
	}
	if out := e.must("project", "secret", "list", name); !strings.Contains(out, "TOKEN") || strings.Contains(out, "value-from-stdin") {
		t.Fatalf("secret list: %q", out)
	}
	r := e.run("", "project", "exec", name, "--", "sh", "-c", "echo hi; echo oops >&2; exit 7")
	if r.code != 7 || r.stdout != "hi\n" || !strings.Contains(r.stderr, "oops") {
		t.Fatalf("exec: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if out := e.must("project", "show", name); !strings.Contains(out, "running") {
		t.Fatalf("show after exec: %q", out)
	}
	if out := e.must("project", "stop", name); !strings.Contains(out, "stopped") {
		t.Fatalf("stop: %q", out)
	}
	e.must("project", "secret", "rm", name, "TOKEN")
	if r := e.run("", "project", "secret", "rm", name, "TOKEN"); r.code != 1 {
		t.Fatalf("second secret rm: %d", r.code)
	}
	if r := e.run("", "project", "bogus"); r.code != 2 || !strings.Contains(r.stderr, "unknown subcommand") {
		t.Fatalf("bogus: %d %s", r.code, r.stderr)
	}
	e.must("project", "rm", name, "-purge")
	if _, _, err := cl.Instance(context.Background(), "remote-"+name); err == nil {
		t.Fatal("container survived rm -purge")
	}
}
