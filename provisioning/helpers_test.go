package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning/reconcile"
)

// memStore is an in-memory ProjectStore.
type memStore struct {
	mu       sync.Mutex
	projects map[string]api.Project
}

// newMemStore holds ps; a project without an id gets testProjectID(name),
// as the real store gives every project one.
func newMemStore(ps ...api.Project) *memStore {
	m := &memStore{projects: map[string]api.Project{}}
	for _, p := range ps {
		if p.ID == "" {
			p.ID = testProjectID(p.Name)
		}
		m.projects[p.Name] = p
	}
	return m
}

// testProjectID is a fixed id for project name (16 hex characters).
func testProjectID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:8])
}

// markContainer marks an existing container as project's (MarkerKey), as
// the preparer does for containers it creates.
func markContainer(t testing.TB, cl *lxdexec.Client, name string, proj api.Project) {
	t.Helper()
	err := cl.UpdateInstance(context.Background(), name, lxdexec.InstancePatch{Config: map[string]string{MarkerKey: proj.ID, NameKey: proj.Name}}, "")
	if err != nil {
		t.Fatalf("mark container %s: %v", name, err)
	}
}

var errNoProject = fmt.Errorf("no such project")

func (m *memStore) Project(name string) (api.Project, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.projects[name]
	if !ok {
		return api.Project{}, errNoProject
	}
	return p, nil
}

func (m *memStore) Projects() ([]api.Project, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]api.Project, 0, len(m.projects))
	for _, p := range m.projects {
		out = append(out, p)
	}
	return out, nil
}

func (m *memStore) UpdateProject(name string, fn func(*api.Project) error) (api.Project, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.projects[name]
	if !ok {
		return api.Project{}, errNoProject
	}
	if err := fn(&p); err != nil {
		return api.Project{}, err
	}
	m.projects[name] = p
	return p, nil
}

func (m *memStore) status(name string) string {
	p, _ := m.Project(name)
	return p.Status
}

// countingLXD wraps a real client, counts calls and lets a test replace
// single methods.
type countingLXD struct {
	*lxdexec.Client
	pushes, execs, deletes atomic.Int64
	pushed                 sync.Map // path → count
	pull                   atomic.Pointer[pullFunc]
}

func (c *countingLXD) PushFile(ctx context.Context, instance, path string, content io.Reader, opts lxdexec.FileOptions) error {
	c.pushes.Add(1)
	v, _ := c.pushed.LoadOrStore(path, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	return c.Client.PushFile(ctx, instance, path, content, opts)
}

func (c *countingLXD) pushCount(path string) int64 {
	v, ok := c.pushed.Load(path)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (c *countingLXD) Exec(ctx context.Context, instance string, req lxdexec.ExecRequest) (*lxdexec.Exec, error) {
	c.execs.Add(1)
	return c.Client.Exec(ctx, instance, req)
}

func (c *countingLXD) DeleteFile(ctx context.Context, instance, path string) error {
	c.deletes.Add(1)
	return c.Client.DeleteFile(ctx, instance, path)
}

func (c *countingLXD) PullFile(ctx context.Context, instance, path string) (io.ReadCloser, *lxdexec.FileInfo, error) {
	if f := c.pull.Load(); f != nil {
		return (*f)(ctx, instance, path)
	}
	return c.Client.PullFile(ctx, instance, path)
}

type pullFunc func(ctx context.Context, instance, path string) (io.ReadCloser, *lxdexec.FileInfo, error)

// sh runs a shell command in a container and returns stdout; it fails the
// test on a non-zero exit.
func sh(t testing.TB, cl *lxdexec.Client, container, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ex, err := cl.Exec(ctx, container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	_ = ex.Stdin().Close()
	var out, errb strings.Builder
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&out, ex.Stdout()) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&errb, ex.Stderr()) }()
	wg.Wait()
	code, err := ex.Wait()
	if err != nil || code != 0 {
		t.Fatalf("exec %q: exit %d, err %v, stderr %s", script, code, err, errb.String())
	}
	return out.String()
}

// newProjectContainer returns a fresh container name for a project and
// deletes the container when the test ends.
func newProjectContainer(t testing.TB, cl *lxdexec.Client, prefix string) string {
	t.Helper()
	name := testkit.ContainerName(prefix)
	testkit.CleanupContainer(t, cl, name)
	return name
}

// collect gathers emitted events.
type collect struct {
	mu  sync.Mutex
	evs []providers.Event
}

func (c *collect) emit(ev providers.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, ev)
}

func (c *collect) subtypes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ev := range c.evs {
		out = append(out, ev.Subtype)
	}
	return out
}

// newReconciler is reconcile.New for prep's projects, with the preparer's
// Start and container marker keys, as cmd/remoted wires it.
func newReconciler(prep *Preparer, o reconcile.Options) (*reconcile.Reconciler, error) {
	o.Start = func(ctx context.Context, p api.Project) error { _, err := prep.Start(ctx, p); return err }
	o.MarkerKey, o.NameKey = MarkerKey, NameKey
	return reconcile.New(o)
}
