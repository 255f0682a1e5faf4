package codex

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
)

// TestModelsFromCLI: Capabilities declares the real CLI's model/list
// (run over the app-server as the host user), not a hard-coded list: the
// pinned Codex 0.169 lists gpt-6.1-sol as its default, efforts up to
// "ultra", and no "minimal" (which no model offers). The answer is cached
// for ModelsTTL; after it the cached answer is served while the CLI is
// asked again in the background.
func TestModelsFromCLI(t *testing.T) {
	e := newEnv(t)
	e.p.opts.ModelsTTL = 200 * time.Millisecond
	caps, err := e.p.Capabilities(context.Background(), providers.CapabilityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(caps.Models, caps.DefaultModel) || (testkit.PinnedCLIs() &&
		(caps.DefaultModel != "gpt-6.1-sol" || !slices.Contains(caps.Models, "gpt-6-sol") || !slices.Contains(caps.Models, "gpt-5.5"))) {
		t.Errorf("models %v default %q", caps.Models, caps.DefaultModel)
	}
	if want := []string{"low", "medium", "high", "xhigh", "max", "ultra"}; !slices.Equal(caps.Efforts, want) {
		t.Errorf("efforts %v, want %v", caps.Efforts, want)
	}
	for _, r := range e.srv.Requests() {
		t.Logf("fake server saw %s %s", r.Method, r.Path)
	}
	first := e.p.modelsNext
	if _, err := e.p.Capabilities(context.Background(), providers.CapabilityRequest{}); err != nil || e.p.modelsNext != first {
		t.Errorf("a second call within the TTL asked the CLI again")
	}
	time.Sleep(250 * time.Millisecond) //nolint:forbidigo // the subject: the models cache's TTL passes (the CLI is a real subprocess, out of synctest's reach)
	// After the TTL the cached list is served while model/list runs again
	// in the background.
	caps2, err := e.p.Capabilities(context.Background(), providers.CapabilityRequest{})
	if err != nil || !slices.Equal(caps2.Models, caps.Models) {
		t.Errorf("a call after the TTL answered %v, %v; want the cached %v", caps2.Models, err, caps.Models)
	}
	e.p.modelsMu.Lock()
	done := e.p.modelsDone
	e.p.modelsMu.Unlock()
	if done == nil {
		t.Fatal("a call after the TTL started no refresh")
	}
	<-done
	if e.p.modelsMu.Lock(); !e.p.modelsNext.After(first) {
		t.Errorf("the refresh after the TTL kept the old deadline")
	}
	e.p.modelsMu.Unlock()
}

// Without a runnable CLI the fallback catalog is declared.
func TestModelsFallback(t *testing.T) {
	p := New(providers.AdapterConfig{Binary: "codex-not-installed-here", Host: &runner.HostLauncher{},
		Env: map[string]string{"CODEX_HOME": t.TempDir()}})
	caps, _ := p.Capabilities(context.Background(), providers.CapabilityRequest{})
	if !slices.Equal(caps.Models, Models) || !slices.Equal(caps.Efforts, Efforts) {
		t.Errorf("caps %+v", caps)
	}
}

// blockingLauncher stands in for the host: every start (model/list's
// app-server) waits until release, then fails.
type blockingLauncher struct {
	started  chan struct{}
	once     sync.Once
	release  chan struct{}
	returned atomic.Bool // a start ended (released, or model/list timed out)
}

func (l *blockingLauncher) Start(ctx context.Context, _ providers.Command) (providers.Process, error) {
	l.once.Do(func() { close(l.started) })
	select {
	case <-l.release:
	case <-ctx.Done():
	}
	l.returned.Store(true)
	return nil, errors.New("no app-server here")
}

// A Cached capability request (a prompt's admission) never waits for the
// model/list under way, even the very first one on a fresh daemon: it
// answers the fallback catalogue while the CLI is asked in the background;
// an uncached one (the first caller) still waits for the answer.
func TestCachedCapabilitiesDoNotWaitForModelList(t *testing.T) {
	l := &blockingLauncher{started: make(chan struct{}), release: make(chan struct{})}
	p := New(providers.AdapterConfig{Binary: "codex", Host: l, Env: map[string]string{"CODEX_HOME": t.TempDir()}})
	answered := make(chan providers.Capabilities, 1)
	go func() {
		caps, _ := p.Capabilities(context.Background(), providers.CapabilityRequest{Cached: true})
		answered <- caps
	}()
	<-l.started // model/list is under way, and blocked
	select {
	case caps := <-answered:
		if l.returned.Load() {
			t.Fatal("a Cached capability request waited for model/list to end")
		}
		if !slices.Equal(caps.Models, Models) {
			t.Errorf("models %v while model/list runs, want the fallback %v", caps.Models, Models)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a Cached capability request waited for model/list")
	}
	p.modelsMu.Lock()
	done := p.modelsDone
	p.modelsMu.Unlock()
	if done == nil {
		t.Fatal("no model/list under way after the first request")
	}
	close(l.release)
	<-done
}
