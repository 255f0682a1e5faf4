package minimax

import (
	"context"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
)

// Without MINIMAX_API_KEY, MiniMax is not ready, whatever the harness:
// the readiness line names the variable to set, and every run (host or
// container) is refused by its CredentialChecker. With the key and the
// pinned Codex CLI it is ready, authenticated by API key.
func TestReadinessNeedsKey(t *testing.T) {
	bin := testkit.CodexBinary(t)
	ctx := context.Background()
	p := New(providers.AdapterConfig{Binary: bin}, Options{})
	r := p.Readiness(ctx)
	if r.Ready || r.Auth != "none" || r.Action != "MiniMax has no API key: set MINIMAX_API_KEY in [providers.minimax] env of the daemon's config" {
		t.Fatalf("readiness without a key: %+v, want not ready, auth none, the line naming MINIMAX_API_KEY", r)
	}
	if !r.BinaryFound {
		t.Errorf("readiness without a key: %+v, want the harness still reported found", r)
	}
	if got := p.MissingCredential(); got != r.Action {
		t.Errorf("MissingCredential() = %q, want the readiness line", got)
	}

	p = New(providers.AdapterConfig{Binary: bin, Env: map[string]string{"MINIMAX_API_KEY": testKey}}, Options{})
	r = p.Readiness(ctx)
	if !r.Ready || r.Auth != "api-key" || !r.LoggedIn || p.MissingCredential() != "" {
		t.Fatalf("readiness with a key: %+v, want ready by api-key", r)
	}
}
