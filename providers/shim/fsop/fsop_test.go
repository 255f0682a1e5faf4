package fsop

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func wantWrongType(t *testing.T, err error, typ string) {
	t.Helper()
	var e *Err
	if !errors.As(err, &e) || e.Kind != KindWrongType || e.Type != typ {
		t.Fatalf("got %v, want a %s refused", err, typ)
	}
}

// TestAttackOpenSwappedForFIFO: the path is a regular file at the lstat
// and a FIFO (with no writer, ever) at the open. The open does not wait
// for a writer (O_NONBLOCK) and the fstat refuses it: without that, this
// test hangs until go test's -timeout.
func TestAttackOpenSwappedForFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "later")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	afterLstat = func(string) {
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Error(err)
		}
	}
	defer func() { afterLstat = nil }()
	f, _, err := Open(p)
	if f != nil {
		f.Close()
	}
	wantWrongType(t, err, TypeFIFO)
}

// TestAttackOpenSwappedForSymlink: a symlink swapped in after the lstat
// is not followed (O_NOFOLLOW).
func TestAttackOpenSwappedForSymlink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "later")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	afterLstat = func(string) {
		os.Remove(p)
		if err := os.Symlink("target", p); err != nil {
			t.Error(err)
		}
	}
	defer func() { afterLstat = nil }()
	f, _, err := Open(p)
	if f != nil {
		f.Close()
	}
	wantWrongType(t, err, TypeSymlink)
}

// TestTypes: list and stat name every kind of entry by lstat; read
// refuses all but regular files, before opening them.
func TestTypes(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "file"), []byte("hello"), 0o640))
	must(os.Mkdir(filepath.Join(dir, "dir"), 0o755))
	must(os.Symlink("file", filepath.Join(dir, "link")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	must(err)
	defer l.Close()
	must(os.Symlink("/dev/null", filepath.Join(dir, "devlink")))

	es, truncated, err := List(dir, 100)
	must(err)
	got := map[string]Entry{}
	for _, e := range es {
		got[e.Name] = e
	}
	for name, typ := range map[string]string{"file": TypeFile, "dir": TypeDirectory, "link": TypeSymlink, "fifo": TypeFIFO, "sock": TypeSocket, "devlink": TypeSymlink} {
		if got[name].Type != typ {
			t.Errorf("%s: %+v, want %s", name, got[name], typ)
		}
	}
	if truncated || got["file"].Size != 5 || got["file"].Mode != 0o640 || got["fifo"].Size != 0 {
		t.Errorf("entries %+v truncated %v", es, truncated)
	}
	if es, truncated, err := List(dir, 2); err != nil || !truncated || len(es) != 2 || es[0].Name != "devlink" {
		t.Errorf("List(2): %+v %v %v", es, truncated, err)
	}
	for name, typ := range map[string]string{"dir": TypeDirectory, "link": TypeSymlink, "fifo": TypeFIFO, "sock": TypeSocket, "devlink": TypeSymlink} {
		f, _, err := Open(filepath.Join(dir, name))
		if f != nil {
			f.Close()
		}
		wantWrongType(t, err, typ)
	}
	f, _, err := Open("/dev/null")
	if f != nil {
		f.Close()
	}
	wantWrongType(t, err, TypeDevice)
	if _, _, err := List(filepath.Join(dir, "link"), 10); err == nil {
		t.Error("List of a symlink to a directory... of a file: no error")
	}
	var e *Err
	if _, err := Stat(filepath.Join(dir, "nope")); !errors.As(err, &e) || e.Kind != KindNotFound {
		t.Errorf("Stat of a missing path: %v", err)
	}
}

// TestServeRead: the reply line, then exactly the announced bytes.
func TestServeRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("line1\nline2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := Serve([]string{"read", p}, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	head, rest, _ := strings.Cut(out.String(), "\n")
	var r Reply
	if err := json.Unmarshal([]byte(head), &r); err != nil || r.Entry == nil || r.Entry.Size != 12 || rest != "line1\nline2\n" {
		t.Fatalf("%q: %+v %v", out.String(), r, err)
	}
	out.Reset()
	if code := Serve([]string{"read", "relative"}, &out); code != 2 {
		t.Errorf("relative path: exit %d", code)
	}
}
