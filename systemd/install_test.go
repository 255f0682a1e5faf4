package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"remote/internal/testkit"
)

// makeTarget runs make in the repository root with the given variables.
func makeTarget(t *testing.T, args ...string) string {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		testkit.Missing(t, "make")
	}
	cmd := exec.Command(mk, append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = testkit.Root()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestMakeInstall installs into a scratch DESTDIR and checks the tree,
// that a second install keeps an edited remoted.toml, and that uninstall
// removes everything but the operator's configuration.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every binary")
	}
	dest := t.TempDir()
	vars := []string{"DESTDIR=" + dest, "PREFIX=/usr"}
	makeTarget(t, append([]string{"install"}, vars...)...)

	want := map[string]os.FileMode{
		"/usr/bin/remoted":                                 0o755,
		"/usr/bin/remotectl":                               0o755,
		"/usr/bin/remote-web":                              0o755,
		"/usr/bin/remote-shim":                             0o755,
		"/lib/systemd/system/remoted.service":              0o644,
		"/lib/systemd/system/remoted.socket":               0o644,
		"/usr/lib/sysusers.d/remote.conf":                  0o644,
		"/usr/lib/tmpfiles.d/remote.conf":                  0o644,
		"/usr/share/bash-completion/completions/remotectl": 0o644,
		"/usr/share/doc/remote/remoted.example.toml":       0o644,
		"/etc/remote/remoted.toml":                         0o640,
	}
	var got []string
	err := filepath.WalkDir(dest, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, strings.TrimPrefix(path, dest))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("installed %d files, want %d: %q", len(got), len(want), got)
	}
	for path, mode := range want {
		fi, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("not installed: %s", path)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}

	unit, err := os.ReadFile(filepath.Join(dest, "/lib/systemd/system/remoted.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/bin/remoted -config /etc/remote/remoted.toml\n") ||
		strings.Contains(string(unit), "/usr/local/bin") {
		t.Errorf("installed unit's ExecStart does not follow PREFIX=/usr:\n%s", unit)
	}

	// A second install keeps the operator's edited configuration.
	conf := filepath.Join(dest, "/etc/remote/remoted.toml")
	if err := os.WriteFile(conf, []byte("# edited\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if out := makeTarget(t, append([]string{"install"}, vars...)...); !strings.Contains(out, "keeping existing") {
		t.Errorf("second install did not say it keeps remoted.toml:\n%s", out)
	}
	if data, _ := os.ReadFile(conf); string(data) != "# edited\n" {
		t.Errorf("second install overwrote remoted.toml: %q", data)
	}

	// Staged (DESTDIR), uninstall cannot stop a service: it says to.
	if out := makeTarget(t, append([]string{"uninstall"}, vars...)...); !strings.Contains(out, "stop and disable remoted first: systemctl disable --now remoted.service remoted.socket") {
		t.Errorf("uninstall did not say to stop and disable the service:\n%s", out)
	}
	for path := range want {
		_, err := os.Stat(filepath.Join(dest, path))
		if path == "/etc/remote/remoted.toml" {
			if err != nil {
				t.Errorf("uninstall removed the operator's %s", path)
			}
		} else if err == nil {
			t.Errorf("uninstall left %s", path)
		}
	}
}
