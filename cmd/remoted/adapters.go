package main

import (
	"remote/daemon/prompt"
	"remote/providers"
	"remote/providers/antigravity"
	"remote/providers/claude"
	"remote/providers/codex"
	"remote/providers/kimi"
	"remote/providers/minimax"
)

// adapters lists the provider adapters built into this remoted; each is
// wired through its package's New over the shared AdapterConfig.
func adapters() map[providers.ProviderID]prompt.Constructor {
	return map[providers.ProviderID]prompt.Constructor{
		providers.Claude: func(c providers.AdapterConfig) providers.Provider { return claude.New(c) },
		providers.Codex:  func(c providers.AdapterConfig) providers.Provider { return codex.New(c) },
		// MiniMax's endpoint comes from [providers.minimax] env
		// MINIMAX_BASE_URL (default api.minimax.io); its key from
		// MINIMAX_API_KEY there, which reaches only the CLI's environment
		// (in a project container only as project_env allows).
		providers.MiniMax: func(c providers.AdapterConfig) providers.Provider {
			return minimax.New(c, minimax.Options{BaseURL: c.Env["MINIMAX_BASE_URL"]})
		},
		providers.Kimi:        func(c providers.AdapterConfig) providers.Provider { return kimi.New(c) },
		providers.Antigravity: func(c providers.AdapterConfig) providers.Provider { return antigravity.New(c) },
	}
}
