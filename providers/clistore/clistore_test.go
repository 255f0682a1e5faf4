package clistore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
)

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"2.1.328", "0.169.0", "1.0.0-beta.1", "0.170.0-alpha-2"} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	for _, v := range []string{"", "..", "../..", "../../etc", "1.2.3/../..", "1.2.3/x", "latest", ".1.2.3", "1.2", "1.2.3-", "1.2.3-../x", "1.2.3-..", "1.2.3\x00", " 1.2.3", "1.2.3\n"} {
		if err := CheckVersion(v); !errors.Is(err, ErrBadVersion) {
			t.Errorf("%q accepted (%v)", v, err)
		}
	}
}

// TestAttackStoreHostileVersion: every entry point refuses a version that
// is a path, before touching the disk.
func TestAttackStoreHostileVersion(t *testing.T) {
	root := t.TempDir()
	s := New(filepath.Join(root, "clis"))
	ctx := context.Background()
	for _, v := range []string{"../..", "../../../tmp/x", "1.2.3/../../x"} {
		if _, err := s.Install(ctx, providers.Claude, v, InstallOptions{Untested: true}); !errors.Is(err, ErrBadVersion) {
			t.Errorf("install %q: %v", v, err)
		}
		if _, err := s.Import(ctx, providers.Codex, v, root, InstallOptions{Untested: true}); !errors.Is(err, ErrBadVersion) {
			t.Errorf("import %q: %v", v, err)
		}
		if _, err := s.Select(providers.Claude, v); !errors.Is(err, ErrBadVersion) {
			t.Errorf("select %q: %v", v, err)
		}
	}
	// A "selected" file pointing outside is ignored, not followed.
	if err := os.MkdirAll(filepath.Join(root, "clis", "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(root, "clis", "claude", "selected"), []byte("../../..\n"), 0o644)
	if v, ok := s.Selected(providers.Claude); ok {
		t.Fatalf("selected %v", v)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "clis")); len(ents) != 1 {
		t.Fatalf("store dir: %v", ents)
	}
}

func TestUntestedNeedsFlag(t *testing.T) {
	s := New(t.TempDir())
	_, err := s.Install(context.Background(), providers.Claude, "2.0.1", InstallOptions{})
	if !errors.Is(err, ErrUntested) || err.Error() != "cli version is not the tested version: claude 2.0.1 (tested: 2.1.328; say -untested to install it anyway)" {
		t.Fatalf("%v", err)
	}
	if _, err := s.Install(context.Background(), providers.Kimi, "", InstallOptions{}); !errors.Is(err, ErrUnknownProvider) {
		t.Fatalf("kimi: %v", err)
	}
}

// TestImportFromNPMTree imports the pinned CLIs from build/npm: Claude
// with its glibc (interpreter + libraries by soname), Codex with its
// helper tree; both check their manifest's version, and the selection
// follows.
func TestImportFromNPMTree(t *testing.T) {
	testkit.ClaudeBinary(t)
	testkit.CodexBinary(t)
	nm := filepath.Join(testkit.Root(), "build", "npm", "node_modules")
	s := New(filepath.Join(t.TempDir(), "clis"))
	ctx := context.Background()
	c, err := s.Import(ctx, providers.Claude, "", nm, InstallOptions{Select: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "2.1.328" || c.ContainerDir() != "/opt/remote-cli/claude/2.1.328" || !c.Glibc {
		t.Fatalf("claude %+v", c)
	}
	for _, f := range []string{"claude", "lib/ld-linux-x86-64.so.2", "lib/libc.so.6", "lib/libm.so.6", "lib/librt.so.1", "lib/libpthread.so.0", "lib/libdl.so.2"} {
		fi, err := os.Stat(filepath.Join(c.Dir, f))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v", f, fi, err)
		}
	}
	x, err := s.Import(ctx, providers.Codex, "0.169.0", nm, InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bin/codex", "codex-path/rg", "codex-package.json"} {
		if _, err := os.Stat(filepath.Join(x.Dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, ok := s.Selected(providers.Codex); ok {
		t.Fatal("codex selected without Select")
	}
	vs, sel, err := s.Installed(providers.Claude)
	if err != nil || len(vs) != 1 || vs[0] != "2.1.328" || sel != "2.1.328" {
		t.Fatalf("installed %v %q %v", vs, sel, err)
	}
	// A tree whose manifest names another version is refused and leaves
	// nothing behind.
	if _, err := s.Import(ctx, providers.Codex, "0.170.0", nm, InstallOptions{Untested: true}); !errors.Is(err, ErrInstall) {
		t.Fatalf("wrong version imported: %v", err)
	}
	if vs, _, _ := s.Installed(providers.Codex); len(vs) != 1 {
		t.Fatalf("codex versions %v", vs)
	}
	if _, err := s.Select(providers.Codex, "0.170.0"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("select missing: %v", err)
	}
}
