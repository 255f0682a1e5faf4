package socket

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestListen(t *testing.T) {
	dir, err := os.MkdirTemp("", "rdl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sub", "remoted.sock")

	ln, err := Listen(path, strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o660 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %v (%v), want 0660 socket", fi.Mode(), err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; int(gid) != os.Getgid() {
		t.Errorf("socket group %d, want %d", gid, os.Getgid())
	}

	t.Run("live socket is not taken over", func(t *testing.T) {
		if _, err := Listen(path, ""); !errors.Is(err, ErrInUse) {
			t.Fatalf("second Listen = %v, want ErrInUse", err)
		}
	})
	t.Run("stale socket is replaced", func(t *testing.T) {
		ln.(*net.UnixListener).SetUnlinkOnClose(false) // as after a crash
		ln.Close()
		if _, err := os.Stat(path); err != nil {
			t.Fatal("stale socket file should remain for this test")
		}
		ln2, err := Listen(path, "")
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		ln2.Close()
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("socket not removed on close: %v", err)
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		file := filepath.Join(dir, "file")
		os.WriteFile(file, nil, 0o600)
		if _, err := Listen(file, ""); err == nil {
			t.Fatal("Listen over a regular file succeeded")
		}
	})
	t.Run("unknown group", func(t *testing.T) {
		if _, err := Listen(filepath.Join(dir, "g.sock"), "no-such-group-xyz"); err == nil {
			t.Fatal("unknown group accepted")
		}
	})
}
