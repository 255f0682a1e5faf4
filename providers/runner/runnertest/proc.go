package runnertest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Cmdline returns the argv of process pid as /proc/PID/cmdline shows it to
// every local user, or nil when the process is gone.
func Cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	var args []string
	for _, a := range bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
		args = append(args, string(a))
	}
	return args
}

// PidsWithArgText returns the processes whose /proc/PID/cmdline contains
// text: what any local user running `ps -ef` or reading /proc would see.
func PidsWithArgText(text string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(text)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
