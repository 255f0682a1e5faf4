package main

import (
	"path/filepath"
	"testing"
	"time"

	"remote/config"
	"remote/daemon/store"
	"remote/internal/testkit"
	"remote/provisioning"
	"remote/provisioning/lxdconn"
)

// TestCredentialSyncTimeoutReachesProjects (S12): [agent]
// credential_sync_timeout is the project preparer's bound.
func TestCredentialSyncTimeoutReachesProjects(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte("[agent]\ncredential_sync_timeout = \"7s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Daemon.StateDir = t.TempDir()
	st, err := store.Open(filepath.Join(cfg.Daemon.StateDir, "remoted.db"), store.Options{Key: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := wireProjects(cfg, st, lxdconn.NewConn(nil), nil, testkit.Logger(t, "wire"))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Preparer.(*provisioning.Preparer).CredentialSyncTimeout(); got != 7*time.Second {
		t.Errorf("project preparer's sync timeout %v, want the configured 7s", got)
	}
}
