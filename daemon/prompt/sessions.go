package prompt

import (
	"strings"

	"remote/api"
	"remote/providers"
)

// NormalizeSessions makes c.Sessions authoritative (S26): legacy fields
// fill providers missing from the map, values are trimmed, empty ones
// dropped, and the legacy mirrors are re-synced from the map.
func NormalizeSessions(c *api.Chat) {
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

// SessionID returns the chat's saved session for provider.
func SessionID(c api.Chat, provider string) string {
	NormalizeSessions(&c)
	return c.Sessions[provider]
}

// SetSession saves (or, with id "", clears) provider's session on c and
// keeps the legacy mirrors in sync.
func SetSession(c *api.Chat, provider, id string) {
	NormalizeSessions(c)
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
	NormalizeSessions(c)
}
