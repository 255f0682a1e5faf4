package prompt

import (
	"fmt"
	"slices"
	"sync"

	"remote/internal/errdefs"
	"remote/providers"
)

// Constructor builds one adapter from its config; each adapter package's
// New fits (e.g. func(c providers.AdapterConfig) providers.Provider {
// return claude.New(c) }).
type Constructor func(providers.AdapterConfig) providers.Provider

// ProviderSetting is one [providers.<id>] section as the registry needs it.
type ProviderSetting struct {
	Enabled bool
	Binary  string
	Args    []string
	Env     map[string]string
	// ProjectEnv: the keys of Env that reach credentials = "shared"
	// project containers too.
	ProjectEnv []string
}

// Registry maps provider ids to the adapters built from config. It can be
// rebuilt in place (SIGHUP); runs that already hold a provider keep it.
type Registry struct {
	mu        sync.RWMutex
	providers map[providers.ProviderID]providers.Provider
	disabled  map[providers.ProviderID]bool
	order     []providers.ProviderID
}

// NewRegistry returns an empty registry; Configure fills it.
func NewRegistry() *Registry {
	return &Registry{providers: map[providers.ProviderID]providers.Provider{}, disabled: map[providers.ProviderID]bool{}}
}

// Configure replaces the registry's contents: every constructor whose
// setting is enabled (a missing setting counts as enabled) is built with
// the setting's binary, args and env over ports (Host, Containers,
// Preparer, Logger). Disabled providers are listed but never run.
func (r *Registry) Configure(ctors map[providers.ProviderID]Constructor, settings map[providers.ProviderID]ProviderSetting, ports providers.AdapterConfig) {
	built := map[providers.ProviderID]providers.Provider{}
	disabled := map[providers.ProviderID]bool{}
	var order []providers.ProviderID
	for id, ctor := range ctors {
		order = append(order, id)
		set, ok := settings[id]
		if ok && !set.Enabled {
			disabled[id] = true
			continue
		}
		cfg := ports
		cfg.Binary, cfg.Args, cfg.Env, cfg.ProjectEnv = set.Binary, slices.Clone(set.Args), set.Env, slices.Clone(set.ProjectEnv)
		if ports.Logger != nil {
			cfg.Logger = ports.Logger.Named(string(id))
		}
		built[id] = ctor(cfg)
	}
	slices.Sort(order)
	r.Set(built, disabled, order)
}

// Set installs already-built providers (tests use it with fakes).
func (r *Registry) Set(ps map[providers.ProviderID]providers.Provider, disabled map[providers.ProviderID]bool, order []providers.ProviderID) {
	if order == nil {
		for id := range ps {
			order = append(order, id)
		}
		slices.Sort(order)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.providers, r.disabled, r.order = ps, disabled, order
}

// Get returns the enabled provider id, or an error naming it when it is
// unknown or disabled.
func (r *Registry) Get(id string) (providers.Provider, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if p, ok := r.providers[providers.ProviderID(id)]; ok {
		return p, nil
	}
	if r.disabled[providers.ProviderID(id)] {
		return nil, fmt.Errorf("provider %q is disabled in config: %w", id, errdefs.ErrUnavailable)
	}
	return nil, errdefs.InvalidArgument("provider: unknown provider %q", id)
}

// Entry is one provider as listed by the API.
type Entry struct {
	ID       providers.ProviderID
	Enabled  bool
	Provider providers.Provider // nil when disabled
}

// List returns every configured provider in id order.
func (r *Registry) List() []Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Entry, 0, len(r.order))
	for _, id := range r.order {
		p := r.providers[id]
		out = append(out, Entry{ID: id, Enabled: p != nil, Provider: p})
	}
	return out
}
