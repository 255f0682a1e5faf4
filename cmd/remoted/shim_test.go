package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/internal/testkit"
)

func TestShimConfigFromAgentShimBinary(t *testing.T) {
	var cfg config.Config
	cfg.Daemon.StateDir = "/var/lib/remote"
	cfg.Agent.ShimBinary = testkit.ShimBinary(t)
	var logs bytes.Buffer
	sc := shimConfig(cfg, hclog.New(&hclog.LoggerOptions{Output: &logs}))
	if sc == nil || sc.Binary != cfg.Agent.ShimBinary || sc.RunsDir != "/var/lib/remote/runs" {
		t.Fatalf("shim config %+v", sc)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged %q", logs.String())
	}

	// Missing: runs go direct, and one warning says what that means.
	cfg.Agent.ShimBinary = filepath.Join(t.TempDir(), "remote-shim")
	logs.Reset()
	if sc := shimConfig(cfg, hclog.New(&hclog.LoggerOptions{Output: &logs})); sc != nil {
		t.Fatalf("a missing binary gave %+v", sc)
	}
	if n := strings.Count(logs.String(), "[WARN]"); n != 1 || !strings.Contains(logs.String(), "runs go direct and will not survive a restart of remoted") {
		t.Fatalf("logs %q", logs.String())
	}
}
