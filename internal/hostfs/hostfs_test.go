package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
)

var nobody = User{UID: 65534, GID: 65534}

// userHome makes a home directory owned by nobody, reachable by it.
func userHome(t *testing.T) string {
	t.Helper()
	testkit.NeedsRoot(t, "acting for another user")
	base, err := os.MkdirTemp("", "hostfs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o700)
	os.Chown(home, 65534, 65534)
	return home
}

func TestReadFileRefusesWhatTheUserDidNotOwn(t *testing.T) {
	home := userHome(t)
	r := Root{Dir: home, User: nobody, Owner: 65534}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("root only"), 0o600)
	os.WriteFile(filepath.Join(home, "own"), []byte("mine"), 0o600)
	os.Chown(filepath.Join(home, "own"), 65534, 65534)
	os.Symlink(secret, filepath.Join(home, "link"))
	os.WriteFile(filepath.Join(home, "rootfile"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(home, "dir"), 0o755)
	syscall.Mkfifo(filepath.Join(home, "fifo"), 0o666)
	os.Chown(filepath.Join(home, "fifo"), 65534, 65534)

	if b, err := r.ReadFile("own", 10); err != nil || string(b) != "mine" {
		t.Fatalf("own file: %q %v", b, err)
	}
	for rel, want := range map[string]string{
		"link":     "a symbolic link on the way",
		"rootfile": "owned by uid 0, not uid 65534",
		"dir":      "not a regular file",
		"fifo":     "not a regular file",
		"../x":     "leaves " + home,
	} {
		_, err := r.ReadFile(rel, 10)
		if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want ErrUnsafe %q", rel, err, want)
		}
	}
	if _, err := r.ReadFile("own", 3); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "larger than 3 bytes") {
		t.Errorf("bound: %v", err)
	}
	if _, err := r.ReadFile("missing", 3); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want ErrNotExist", err)
	}
}

func TestWriteFileAsTheUser(t *testing.T) {
	home := userHome(t)
	r := Root{Dir: home, User: nobody, Owner: 65534}
	future := time.Now().Add(100 * 365 * 24 * time.Hour)
	if err := r.WriteFile("a/b/new.json", []byte("one"), future); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, "a/b/new.json")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 65534 || fi.Mode().Perm() != 0o600 || fi.ModTime().After(time.Now()) {
		t.Fatalf("new file uid %d mode %v mtime %v", st.Uid, fi.Mode().Perm(), fi.ModTime())
	}
	os.Chmod(p, 0o640)
	if err := r.WriteFile("a/b/new.json", []byte("two"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != "two" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("replaced: %q mode %v", b, fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Join(home, "a/b"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	// A directory the user swapped for a symlink to a root-only one.
	rootOnly := t.TempDir()
	os.RemoveAll(filepath.Join(home, "a"))
	os.Symlink(rootOnly, filepath.Join(home, "a"))
	if err := r.WriteFile("a/new.json", []byte("x"), time.Time{}); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("through a symlink: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(rootOnly, "new.json")); err == nil {
		t.Fatal("written through the symlink")
	}
}

func TestEnterDirAnswersAsTheUser(t *testing.T) {
	home := userHome(t)
	secret := t.TempDir() // 0700 root
	os.Mkdir(filepath.Join(secret, "exists"), 0o755)
	if real, err := nobody.EnterDir(home); err != nil || real != home {
		t.Fatalf("own home: %q %v", real, err)
	}
	_, e1 := nobody.EnterDir(filepath.Join(secret, "exists"))
	_, e2 := nobody.EnterDir(filepath.Join(secret, "missing"))
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
		t.Fatalf("root-only existing %v, missing %v: want the same error", e1, e2)
	}
	if _, err := (User{}).EnterDir(filepath.Join(secret, "exists")); err != nil {
		t.Fatalf("as root: %v", err)
	}
}

func TestReadTreeSkipsLinksAndRefusesForeignFiles(t *testing.T) {
	home := userHome(t) // a tree owned by nobody, read by a root daemon
	r := Root{Dir: home, Owner: OwnerOfDir}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("root only"), 0o600)
	os.MkdirAll(filepath.Join(home, "skill/sub"), 0o755)
	os.WriteFile(filepath.Join(home, "skill/SKILL.md"), []byte("doc"), 0o644)
	os.WriteFile(filepath.Join(home, "skill/sub/run.sh"), []byte("sh"), 0o755)
	for _, p := range []string{"skill", "skill/sub", "skill/SKILL.md", "skill/sub/run.sh"} {
		os.Chown(filepath.Join(home, p), 65534, 65534)
	}
	os.Symlink(secret, filepath.Join(home, "skill/leak"))
	os.Symlink(filepath.Dir(secret), filepath.Join(home, "skill/leakdir"))
	got, err := r.ReadTree("skill", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Rel != "SKILL.md" || got[1].Rel != "sub/run.sh" || got[1].Mode != 0o755 || string(got[1].Content) != "sh" {
		t.Fatalf("tree %+v", got)
	}
	if err := os.Link(secret, filepath.Join(home, "skill/hard")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadTree("skill", 100); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "owned by uid 0, not uid 65534") {
		t.Fatalf("hard link to a root file: %v", err)
	}
	// The daemon's own rights are back after acting for nobody.
	if _, err := os.ReadFile(secret); err != nil {
		t.Fatalf("root lost its rights: %v", err)
	}
}
