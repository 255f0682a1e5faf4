package main

import (
	"strings"
	"testing"

	"remote/internal/testkit"
)

// TestEndToEndPreviewCommands drives project ports and project preview
// against a real remoted on the local LXD: busybox httpd in the project's
// container answers through the daemon's port route.
func TestEndToEndPreviewCommands(t *testing.T) {
	cl := testkit.LXD(t)
	e := startE2E(t)
	name := strings.TrimPrefix(testkit.ContainerName("ctlpv"), "t-")
	testkit.CleanupProjectContainers(t, cl, name)
	e.must("project", "create", name, "-port", "8080")
	e.must("project", "start", name)
	cs := testkit.ProjectContainers(t, cl, name)
	if len(cs) != 1 {
		t.Fatalf("containers of %s: %v", name, cs)
	}
	testkit.ServeHTTPD(t, cl, cs[0], 8080, "hello remotectl\n")
	if out := e.must("project", "preview", name, "8080", "/index.html"); out != "hello remotectl\n" {
		t.Fatalf("preview: %q", out)
	}
	if out := e.must("project", "ports", name); out != "PORT  ROUTE\n8080  /v1/projects/"+name+"/ports/8080/\n" {
		t.Fatalf("ports: %q", out)
	}
	if out := e.must("project", "ports", name, "-set", "8080,8081", "--json"); strings.Join(strings.Fields(out), "") != "[8080,8081]" {
		t.Fatalf("ports -set: %q", out)
	}
	if r := e.run("", "project", "preview", name, "9999"); r.code != 1 || !strings.Contains(r.stderr, `port 9999 is not a port of project "`+name+`"`) {
		t.Fatalf("preview of an unknown port: %d %q", r.code, r.stderr)
	}
	if r := e.run("", "project", "ports", name, "-set", "80x"); r.code != 2 || !strings.Contains(r.stderr, `-set: "80x" is not a port (1-65535)`) {
		t.Fatalf("ports -set 80x: %d %q", r.code, r.stderr)
	}
	e.must("project", "stop", name)
	if r := e.run("", "project", "preview", name, "8080"); r.code != 1 || !strings.Contains(r.stderr, `project "`+name+`" is not running`) {
		t.Fatalf("preview of a stopped project: %d %q", r.code, r.stderr)
	}
	if out := e.must("project", "ports", name, "-set", ""); out != "PORT  ROUTE\n" {
		t.Fatalf("ports -set \"\": %q", out)
	}
	e.must("project", "rm", name, "-purge")
}
