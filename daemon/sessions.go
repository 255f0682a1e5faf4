package daemon

import (
	"strings"

	"remote/api"
	"remote/providers"
)

// normalizeSessions makes c.Sessions authoritative (S26): legacy fields
// fill providers missing from the map, values are trimmed, empty ones
// dropped, and the legacy mirrors are re-synced from the map.
func normalizeSessions(c *api.Chat) {
	legacy := map[providers.ProviderID]*string{
		providers.Claude:      &c.ClaudeSessionID,
		providers.Codex:       &c.CodexSessionID,
		providers.Kimi:        &c.KimiSessionID,
		providers.Antigravity: &c.AntigravitySessionID,
	}
	m := map[string]string{}
	for p, id := range c.Sessions {
		if id = strings.TrimSpace(id); id != "" {
			m[p] = id
		}
	}
	for p, f := range legacy {
		if _, ok := m[string(p)]; !ok {
			if id := strings.TrimSpace(*f); id != "" {
				m[string(p)] = id
			}
		}
	}
	for p, f := range legacy {
		*f = m[string(p)]
	}
	if len(m) == 0 {
		m = nil
	}
	c.Sessions = m
}

// sessionID returns the chat's saved session for provider.
func sessionID(c api.Chat, provider string) string {
	normalizeSessions(&c)
	return c.Sessions[provider]
}

// setSession saves (or, with id "", clears) provider's session on c and
// keeps the legacy mirrors in sync.
func setSession(c *api.Chat, provider, id string) {
	normalizeSessions(c)
	if c.Sessions == nil {
		c.Sessions = map[string]string{}
	}
	if id = strings.TrimSpace(id); id == "" {
		delete(c.Sessions, provider)
	} else {
		c.Sessions[provider] = id
	}
	switch providers.ProviderID(provider) {
	case providers.Claude:
		c.ClaudeSessionID = id
	case providers.Codex:
		c.CodexSessionID = id
	case providers.Kimi:
		c.KimiSessionID = id
	case providers.Antigravity:
		c.AntigravitySessionID = id
	}
	normalizeSessions(c)
}
