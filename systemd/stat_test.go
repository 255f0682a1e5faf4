package systemd

import (
	"os"
	"syscall"
	"testing"
)

type devIno struct{ dev, ino uint64 }

func statOf(t *testing.T, fi os.FileInfo) devIno {
	t.Helper()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no syscall.Stat_t on this platform")
	}
	return devIno{uint64(st.Dev), st.Ino}
}
