package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"remote/config"
	"remote/daemon"
	"remote/daemon/prompt"
	"remote/daemon/store"
	"remote/daemon/system"
	"remote/internal/testkit"
	"remote/providers/runner"
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
	log := testkit.Logger(t, "wire")
	o, err := systemOptions(cfg, st, &lxdLink{conn: lxdconn.NewConn(nil), metrics: daemon.NewMetrics()}, runner.HostUser{}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	o.Registry = prompt.NewRegistry()
	sys, err := system.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sys.Server.Shutdown(context.Background()) }()
	if got := sys.Preparer.CredentialSyncTimeout(); got != 7*time.Second {
		t.Errorf("project preparer's sync timeout %v, want the configured 7s", got)
	}
}
