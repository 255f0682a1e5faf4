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
	if code := Serve([]string{"read", p}, nil, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	head, rest, _ := strings.Cut(out.String(), "\n")
	var r Reply
	if err := json.Unmarshal([]byte(head), &r); err != nil || r.Entry == nil || r.Entry.Size != 12 || rest != "line1\nline2\n" {
		t.Fatalf("%q: %+v %v", out.String(), r, err)
	}
	out.Reset()
	if code := Serve([]string{"read", "relative"}, nil, &out); code != 2 {
		t.Errorf("relative path: exit %d", code)
	}
}

// swapReader replaces p with a FIFO on its first read, then gives data.
type swapReader struct {
	t    *testing.T
	p    string
	data *strings.Reader
	done bool
}

func (s *swapReader) Read(b []byte) (int, error) {
	if !s.done {
		s.done = true
		os.Remove(s.p)
		if err := syscall.Mkfifo(s.p, 0o644); err != nil {
			s.t.Error(err)
		}
	}
	return s.data.Read(b)
}

// TestAttackWriteOntoFIFO: an upload onto a FIFO is refused before
// anything is read, and one whose target becomes a FIFO while it is
// written is refused at the end: the FIFO is never opened (an open for
// writing would wait for a reader for good), stays as it is, and no
// temporary file is left.
func TestAttackWriteOntoFIFO(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "target")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Write(p, 1, os.Getuid(), os.Getgid(), strings.NewReader("x"), nil)
	wantWrongType(t, err, TypeFIFO)

	q := filepath.Join(dir, "later")
	if err := os.WriteFile(q, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Write(q, 3, os.Getuid(), os.Getgid(), &swapReader{t: t, p: q, data: strings.NewReader("new")}, nil)
	wantWrongType(t, err, TypeFIFO)
	if fi, err := os.Lstat(q); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi, err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 2 {
		t.Errorf("left behind: %v", es)
	}
}

// TestWriteReplaces: a write replaces the file whole, with its owner and
// mode, and a short body leaves the old file as it was.
func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(p, 10, os.Getuid(), os.Getgid(), strings.NewReader("short"), nil); err == nil {
		t.Fatal("a short body was written")
	}
	if b, _ := os.ReadFile(p); string(b) != "old content" {
		t.Fatalf("after a short body: %q", b)
	}
	e, err := Write(p, 3, os.Getuid(), os.Getgid(), strings.NewReader("new"), nil)
	if err != nil || e.Type != TypeFile || e.Size != 3 || e.Mode != 0o644 {
		t.Fatalf("%+v %v", e, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("after the write: %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left behind: %v", es)
	}
}

// TestPrune: other copies for the file routes go (a FIFO among them,
// unlinked, never opened); the running one and anything else stay.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "remote-shim-aaaa.files-me")
	for _, n := range []string{"remote-shim-aaaa.files-me", "remote-shim-bbbb.files-old", "remote-shim-aaaa", "other.files-x"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "remote-shim-cccc.files-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := Prune(self); err != nil || n != 2 {
		t.Fatalf("Prune: %d %v", n, err)
	}
	var left []string
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "other.files-x remote-shim-aaaa remote-shim-aaaa.files-me" {
		t.Errorf("left: %v", left)
	}
}
