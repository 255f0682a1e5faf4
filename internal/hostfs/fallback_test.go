package hostfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWithoutOpenat2 runs the refusals again with openat2 unavailable,
// as under systemd's RestrictSUIDSGID= (its seccomp filter answers
// ENOSYS): the component walk refuses what openat2 refuses.
func TestWithoutOpenat2(t *testing.T) {
	noOpenat2.Store(true)
	t.Cleanup(func() { noOpenat2.Store(false) })
	t.Run("read", TestReadFileRefusesWhatTheUserDidNotOwn)
	t.Run("write", TestWriteFileAsTheUser)
	t.Run("tree", TestReadTreeSkipsLinksAndRefusesForeignFiles)
	t.Run("walk", TestOpenBeneathRefusesLinksAndEscapes)
}

// TestOpenBeneathRefusesLinksAndEscapes: the hand walk answers ELOOP for
// a symlink on the way or at the end (O_PATH included) and for a magic
// link, EXDEV for ".." and an absolute path, and opens what is beneath.
func TestOpenBeneathRefusesLinksAndEscapes(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("x"), 0o644)
	os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "link"))
	os.Symlink("f", filepath.Join(dir, "a", "b", "flink"))
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	proc, err := unix.Open("/proc/self", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(proc)
	for _, c := range []struct {
		dirfd int
		rel   string
		flags int
		want  error
	}{
		{root, "a/b/f", unix.O_RDONLY, nil},
		{root, "./a//b/f", unix.O_RDONLY, nil},
		{root, "a/b", unix.O_RDONLY | unix.O_DIRECTORY, nil},
		{root, "link/b/f", unix.O_RDONLY, unix.ELOOP},
		{root, "a/b/flink", unix.O_RDONLY, unix.ELOOP},
		{root, "a/b/flink", unix.O_PATH, unix.ELOOP},
		{root, "link", unix.O_RDONLY | unix.O_DIRECTORY, unix.ELOOP},
		{root, "a/../a/b/f", unix.O_RDONLY, unix.EXDEV},
		{root, "/etc/passwd", unix.O_RDONLY, unix.EXDEV},
		{proc, "root/etc/passwd", unix.O_RDONLY, unix.ELOOP}, // a magic link
		{root, "a/b/f/x", unix.O_RDONLY, unix.ENOTDIR},
	} {
		fd, err := openBeneath(c.dirfd, c.rel, c.flags|unix.O_CLOEXEC, 0)
		if fd >= 0 {
			unix.Close(fd)
		}
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("openBeneath(%q): %v, want %v", c.rel, err, c.want)
		}
	}
}
