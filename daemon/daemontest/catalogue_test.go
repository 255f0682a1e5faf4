package daemontest_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"remote/api"
	"remote/daemon/daemontest"
	"remote/providers"
)

// catalogueProvider is a scripted Codex whose model catalogue (every
// capability request that is not Cached, as Codex's first model/list
// caller waits for the CLI) blocks, once armed, until released.
type catalogueProvider struct {
	*daemontest.Provider
	armed   atomic.Bool
	asked   chan struct{} // closed when a caller waits for the catalogue
	once    sync.Once
	release chan struct{}
}

func (p *catalogueProvider) Capabilities(ctx context.Context, req providers.CapabilityRequest) (providers.Capabilities, error) {
	if !req.Cached && p.armed.Load() {
		p.once.Do(func() { close(p.asked) })
		select {
		case <-p.release:
		case <-ctx.Done():
			return providers.Capabilities{}, ctx.Err()
		}
	}
	return p.Provider.Capabilities(ctx, req)
}

// A prompt is admitted while the provider's model catalogue is still
// being fetched: admission asks for the capabilities it has at hand
// (Cached) and never waits for the catalogue (a fresh daemon's first Codex
// prompt waited seconds for model/list).
func TestFrontendPromptAdmittedWhileCatalogueIsFetched(t *testing.T) {
	p := &catalogueProvider{Provider: daemontest.Codex(), asked: make(chan struct{}), release: make(chan struct{})}
	d := daemontest.New(t, daemontest.Options{Providers: []providers.Provider{p}})
	t.Cleanup(func() { close(p.release) })
	ctx := context.Background()
	chat, err := d.Client("alice").CreateChat(ctx, api.CreateChatRequest{Provider: "codex", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// A client lists the providers: the catalogue fetch is under way.
	p.armed.Store(true)
	go func() { _, _ = d.Client("alice").Providers(ctx) }()
	<-p.asked
	a := newTab(t, d, chat.ID, "tab A", "hello")
	settle(t, a)
	if _, _, rejected := a.counts(); rejected != 0 {
		t.Errorf("%d prompts rejected", rejected)
	}
	_, evs := userCounts(t, d, chat.ID)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type)
	}
	if want := []string{"user", "session", "assistant_text", "assistant_text", "complete"}; !slices.Equal(got, want) {
		t.Errorf("stored %v while the catalogue was fetched, want the run %v", got, want)
	}
}
