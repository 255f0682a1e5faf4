package main

import (
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/providers/runner"
)

// shimConfig finds remote-shim ([agent] shim_binary, or remote-shim next
// to the remoted executable) so that runs outlive the daemon. Without it
// runs go direct, and the daemon says once that they will not survive a
// restart.
func shimConfig(cfg config.Config, log hclog.Logger) *runner.ShimConfig {
	bin := cfg.Agent.ShimBinary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			log.Warn("remote-shim not found (cannot locate remoted's own executable): runs go direct and will not survive a restart of remoted", "error", err)
			return nil
		}
		bin = filepath.Join(filepath.Dir(exe), "remote-shim")
	}
	fi, err := os.Stat(bin)
	if err == nil && (!fi.Mode().IsRegular() || fi.Mode()&0o111 == 0) {
		err = os.ErrPermission
	}
	if err != nil {
		log.Warn("remote-shim not found: runs go direct and will not survive a restart of remoted; install it next to remoted or set [agent] shim_binary", "shim_binary", bin, "error", err)
		return nil
	}
	return &runner.ShimConfig{Binary: bin, RunsDir: filepath.Join(cfg.Daemon.StateDir, "runs"), Nice: cfg.Agent.Nice, Logger: log.Named("shim")}
}
