package testkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/lxdexec"
)

// TestImage is the alias of the busybox image scripts/lxd-setup imports.
const TestImage = "busybox"

var (
	lxdOnce   sync.Once
	lxdClient *lxdexec.Client
	lxdErr    error
)

// LXD returns a client for the local LXD (socket discovery), shared by the
// tests of a package. When LXD is not reachable or the test image is
// missing, the test is skipped locally and fails in CI (see Missing).
func LXD(t testing.TB) *lxdexec.Client {
	t.Helper()
	Short(t, "LXD")
	lxdOnce.Do(func() {
		// Generous: a busy LXD can take many seconds to answer even GET
		// /1.0 (its database waits on the disk).
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		lxdClient, lxdErr = lxdexec.Connect(ctx, lxdexec.Options{})
		if lxdErr != nil {
			return
		}
		if _, err := lxdClient.Query(ctx, "GET", "/1.0/images/aliases/"+TestImage, nil, ""); err != nil {
			lxdClient, lxdErr = nil, errors.Join(errors.New("image alias "+TestImage+" missing"), err)
		}
	})
	if lxdErr != nil {
		Missing(t, "LXD not usable: %v", lxdErr)
	}
	return lxdClient
}

// NewContainer creates and starts a container from the busybox test image
// with a short unique name ("t-<prefix>-<6 hex>"), and force-deletes it
// when the test ends. prefix is trimmed to keep the name within LXD's
// limits.
func NewContainer(t testing.TB, client *lxdexec.Client, prefix string) string {
	t.Helper()
	name := ContainerName(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	CleanupContainer(t, client, name)
	if err := client.CreateInstance(ctx, lxdexec.InstancesPost{
		Name:   name,
		Source: lxdexec.InstanceSource{Alias: TestImage},
	}); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	if err := client.SetState(ctx, name, lxdexec.StateRequest{Action: "start"}); err != nil {
		t.Fatalf("start container %s: %v", name, err)
	}
	return name
}

// CleanupContainer force-deletes the named container (if it exists) when
// the test ends. The deadline is generous: LXD can take well over its own
// 30 s to stop a container on a loaded machine (see lxdexec.SetState).
func CleanupContainer(t testing.TB, client *lxdexec.Client, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if err := client.ForceDeleteInstance(ctx, name); err != nil {
			t.Errorf("cleanup: delete container %s: %v", name, err)
		}
	})
}

// CleanupProjectContainers force-deletes, when the test ends, every
// container of a project named project: those named
// "remote-<project>-<id prefix>" (the daemon names a project's container
// after its name and its immutable id, which the test does not know
// before it creates the project).
func CleanupProjectContainers(t testing.TB, client *lxdexec.Client, project string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		for _, name := range ProjectContainers(t, client, project) {
			if err := client.ForceDeleteInstance(ctx, name); err != nil {
				t.Errorf("cleanup: delete container %s: %v", name, err)
			}
		}
	})
}

// ProjectContainers lists the containers LXD has for a project named
// project ("remote-<project>-<id prefix>").
func ProjectContainers(t testing.TB, client *lxdexec.Client, project string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all, err := client.Instances(ctx)
	if err != nil {
		t.Errorf("list containers: %v", err)
		return nil
	}
	prefix := "remote-" + project + "-"
	var out []string
	for _, inst := range all {
		if rest, ok := strings.CutPrefix(inst.Name, prefix); ok && !strings.Contains(rest, "-") {
			out = append(out, inst.Name)
		}
	}
	return out
}

// ContainerName returns a short unique container name "t-<prefix>-<6 hex>".
// prefix is lowercased, reduced to letters, digits and hyphens, and cut to
// 20 characters.
func ContainerName(prefix string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(prefix) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		}
		if b.Len() >= 20 {
			break
		}
	}
	p := strings.Trim(b.String(), "-")
	if p == "" {
		p = "x"
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	return "t-" + p + "-" + hex.EncodeToString(rnd[:])
}

// BehindTheBack runs run, a test's stop or delete of a container behind
// the daemon's back (tests use the lxc client for it; the product never
// does), and fails the test when it fails; what names it in messages.
// LXD 5.0 now and then fails a forced stop with "operation timed out after
// 30s" although the container stops right after (see lxdexec.SetState):
// such a command is run once more, and a second try that finds the
// instance already stopped has done its job.
func BehindTheBack(t testing.TB, what string, run func() ([]byte, error)) []byte {
	t.Helper()
	out, err := run()
	if err != nil && strings.Contains(string(out), "timed out") {
		t.Logf("%s: %s; once more", what, bytes.TrimSpace(out))
		out, err = run()
		if err != nil && strings.Contains(string(out), "already stopped") {
			err = nil
		}
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return out
}
