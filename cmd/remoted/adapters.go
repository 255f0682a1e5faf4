package main

import (
	"remote/daemon"
	"remote/providers"
	"remote/providers/claude"
)

// adapters lists the provider adapters built into this remoted; each is
// wired through its package's New over the shared AdapterConfig.
func adapters() map[providers.ProviderID]daemon.Constructor {
	return map[providers.ProviderID]daemon.Constructor{
		providers.Claude: func(c providers.AdapterConfig) providers.Provider { return claude.New(c) },
	}
}
