package shim

import "remote/internal/reaper"

// waitExited blocks until child pid has exited and returns its status,
// leaving it unreaped (internal/reaper).
func waitExited(pid int) (ExitStatus, error) {
	code, sig, err := reaper.WaitExited(pid)
	return ExitStatus{Code: code, Signal: sig}, err
}
