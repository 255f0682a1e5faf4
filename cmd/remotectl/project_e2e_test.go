package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// TestEndToEndProject drives the project commands against a real remoted
// wired to the local LXD.
func TestEndToEndProject(t *testing.T) {
	cl := testkit.LXD(t)
	e := startE2E(t)
	name := strings.TrimPrefix(testkit.ContainerName("ctl"), "t-")
	testkit.CleanupProjectContainers(t, cl, name)
	out := e.must("project", "create", name, "-port", "8080")
	container, ok := strings.CutPrefix(strings.TrimSpace(out), name+" (container ")
	container, ok2 := strings.CutSuffix(container, ")")
	if !ok || !ok2 || !strings.HasPrefix(container, "remote-"+name+"-") {
		t.Fatalf("create: %q, want %q then the container's name", out, name+" (container remote-"+name+"-…)")
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
	if _, _, err := cl.Instance(context.Background(), container); err == nil {
		t.Fatal("container survived rm -purge")
	}
}

// TestEndToEndProjectAutostart restarts remoted while three autostart
// projects' containers are stopped: all three run again after start-up.
func TestEndToEndProjectAutostart(t *testing.T) {
	cl := testkit.LXD(t)
	e := startE2E(t)
	var containers []string
	for i := range 3 {
		name := strings.TrimPrefix(testkit.ContainerName(fmt.Sprint("auto", i)), "t-")
		testkit.CleanupProjectContainers(t, cl, name)
		e.must("project", "create", name)
		e.must("project", "start", name)
		cs := testkit.ProjectContainers(t, cl, name)
		if len(cs) != 1 {
			t.Fatalf("project %s has containers %v, want one", name, cs)
		}
		containers = append(containers, cs[0])
	}
	// Stop the daemon, then the containers behind its back.
	_ = e.daemon.Process.Signal(syscall.SIGTERM)
	_ = e.daemon.Wait()
	for _, c := range containers {
		if err := cl.SetState(context.Background(), c, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	next := exec.Command(e.daemon.Path, e.daemon.Args[1:]...)
	next.Stdout, next.Stderr = io.Discard, e.daemon.Stderr
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	e.daemon = next // startE2E's cleanup stops this one
	for _, c := range containers {
		testkit.Eventually(t, 60*time.Second, func() error {
			inst, _, err := cl.Instance(context.Background(), c)
			if err == nil && inst.Status != "Running" {
				err = fmt.Errorf("status %s", inst.Status)
			}
			return err
		}, "container %s running after the restart", c)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if r := e.run("", "project", "list"); r.code != 0 || strings.Count(r.stdout, "running") != 3 {
			return fmt.Errorf("%q %q", r.stdout, r.stderr)
		}
		return nil
	}, "stored status corrected")
}
