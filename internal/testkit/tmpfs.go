package testkit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes (mode 0700) on a new temporary
// directory and returns the directory; the test's cleanup unmounts and
// removes it. Mounting needs root (CAP_SYS_ADMIN); where that fails the
// test is Missing: skipped on a developer machine, failed in CI.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	Short(t, "root (to mount a tmpfs)")
	dir, err := os.MkdirTemp("", "tmpfs")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		os.Remove(dir)
		Missing(t, "mount a %d-byte tmpfs on %s (needs root): %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
			return
		}
		os.Remove(dir)
	})
	return dir
}

// FillDisk writes the file path until its filesystem has no space left
// (ENOSPC) and returns how many bytes it wrote; any other write error
// fails the test. Removing the file frees the space again.
func FillDisk(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{64 << 10, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if err == nil {
				continue
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
	return n
}

// FreeBytes returns the bytes an unprivileged writer may still use on
// the filesystem holding path.
func FreeBytes(t testing.TB, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return int64(st.Bavail) * st.Bsize
}
