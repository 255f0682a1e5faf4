package runner

import (
	"context"
	"testing"
	"time"

	"remote/providers"
	"remote/providers/runner/runnertest"
)

// TestDefaultCredentialSyncTimeoutIs30s (S12): the adapters' default
// bound on a credential sync is 30 s, as the preparer sees it.
func TestDefaultCredentialSyncTimeoutIs30s(t *testing.T) {
	var left time.Duration
	p := runnertest.Preparer{SyncFunc: func(ctx context.Context, _ providers.Target, _ providers.ProviderID) error {
		d, _ := ctx.Deadline()
		left = time.Until(d)
		return nil
	}}
	SyncCredentials(context.Background(), p, providers.Target{Container: "c1"}, providers.Claude, DefaultCredentialSyncTimeout, AdapterLogger(nil, "test"), nil)
	if left > 30*time.Second || left < 25*time.Second {
		t.Errorf("sync deadline %v away, want 30 s", left)
	}
}
