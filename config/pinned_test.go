package config

import (
	"testing"
	"time"
)

// TestAgentDefaultsUsersRelyOn: the documented [agent] defaults, by value
// (S6: 24,000 bytes of visible history; S12: 30 s credential sync).
func TestAgentDefaultsUsersRelyOn(t *testing.T) {
	cfg, err := Parse("t.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.TranscriptBytes != 24000 {
		t.Errorf("default transcript_bytes %d, want 24000", cfg.Agent.TranscriptBytes)
	}
	if cfg.Agent.CredentialSyncTimeout.Duration != 30*time.Second {
		t.Errorf("default credential_sync_timeout %v, want 30s", cfg.Agent.CredentialSyncTimeout.Duration)
	}
}
