package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"remote/internal/testkit"
)

// need returns the path of a command the test cannot do without.
func need(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testkit.Missing(t, "%s (Debian's dpkg / dpkg-dev)", name)
	}
	return p
}

// run runs a command in the repository root and returns its stdout.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = testkit.Root()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestDebVersion pins the mapping of git describe to Debian versions
// (docs/releasing.md) and that dpkg orders them the way releases go: a
// snapshot before the release, the release, a snapshot after it, the next
// release candidate, the next release.
func TestDebVersion(t *testing.T) {
	for describe, want := range map[string]string{
		"v0.2.0":                   "0.2.0",
		"v0.2.0-dirty":             "0.2.0+dirty",
		"v0.2.0-rc.1":              "0.2.0~rc1",
		"v0.2.0-5-gabc1234":        "0.2.0+git5.abc1234",
		"v0.2.0-5-gabc1234-dirty":  "0.2.0+git5.abc1234.dirty",
		"v1.10.3-rc.2-7-g0123abcd": "1.10.3~rc2+git7.0123abcd",
		"4987ac0":                  "0.1.0~git846.4987ac0",
		"4987ac0-dirty":            "0.1.0~git846.4987ac0.dirty",
		"nightly-3-gfeedbee":       "0.1.0~git846.feedbee",
	} {
		got := strings.TrimSpace(run(t, "scripts/release", "debversion", describe, "846"))
		if got != want {
			t.Errorf("debversion %q = %q, want %q", describe, got, want)
		}
	}

	dpkg := need(t, "dpkg")
	order := []string{"0.1.0~git845.aaaaaaa", "0.1.0~git846.0000000", "0.1.0", "0.1.0+git1.fffffff",
		"0.1.0+git12.0000000", "0.1.1~rc1", "0.1.1~rc1+git3.abc1234", "0.1.1", "0.2.0", "1.0.0"}
	for i := 1; i < len(order); i++ {
		if err := exec.Command(dpkg, "--compare-versions", order[i-1], "lt", order[i]).Run(); err != nil {
			t.Errorf("dpkg does not order %s before %s", order[i-1], order[i])
		}
	}
}

var (
	built    sync.Once
	debPath  string
	buildErr string
)

// deb builds the package once per test binary (make release into a
// directory of its own, not build/release) and returns its path. When
// REMOTE_RELEASE_DEB names a package (scripts/test sets it to the one its
// make release step just built), that one is checked instead.
func deb(t *testing.T) string {
	t.Helper()
	need(t, "dpkg-deb")
	if p := os.Getenv("REMOTE_RELEASE_DEB"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("REMOTE_RELEASE_DEB: %v", err)
		}
		return p
	}
	if testing.Short() {
		t.Skip("builds every binary and the package")
	}
	need(t, "dpkg-shlibdeps")
	need(t, "make")
	built.Do(func() {
		dir, err := os.MkdirTemp("", "remote-release-test")
		if err != nil {
			buildErr = err.Error()
			return
		}
		cmd := exec.Command("make", "--no-print-directory", "release", "RELEASE_DIR="+dir)
		cmd.Dir = testkit.Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = "make release: " + err.Error() + "\n" + string(out)
			return
		}
		debs, _ := filepath.Glob(filepath.Join(dir, "remote_*_amd64.deb"))
		if len(debs) != 1 {
			buildErr = "make release left " + strings.Join(debs, ", ") + " in " + dir
			return
		}
		debPath = debs[0]
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return debPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if debPath != "" {
		_ = os.RemoveAll(filepath.Dir(debPath))
	}
	os.Exit(code)
}

// entry is one line of dpkg-deb -c.
type entry struct{ mode, owner string }

// contents lists the package's files: path (without the leading ".") to
// mode string and owner.
func contents(t *testing.T, deb string) map[string]entry {
	t.Helper()
	files := map[string]entry{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line: %q", line)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")] = entry{f[0], f[1]}
	}
	return files
}

// TestReleasePackage builds the package and checks what an operator gets:
// the binaries, units, snippets, completion, documentation, the
// configuration as a conffile, the control fields, the maintainer scripts,
// and (where lintian is installed) a clean lintian run.
func TestReleasePackage(t *testing.T) {
	deb := deb(t)

	describe := strings.TrimSpace(run(t, "git", "describe", "--always", "--dirty", "--tags"))
	count := strings.TrimSpace(run(t, "git", "rev-list", "--count", "HEAD"))
	version := strings.TrimSpace(run(t, "scripts/release", "debversion", describe, count))
	if filepath.Base(deb) != "remote_"+version+"_amd64.deb" {
		t.Errorf("package %s, want remote_%s_amd64.deb", filepath.Base(deb), version)
	}

	info := run(t, "dpkg-deb", "-f", deb)
	for _, re := range []string{
		`(?m)^Package: remote$`,
		`(?m)^Version: ` + regexp.QuoteMeta(version) + `$`,
		`(?m)^Architecture: amd64$`,
		`(?m)^Depends: libc6 \(>= [0-9.]+\), systemd$`,
		`(?m)^Suggests: lxd, git$`,
		`(?m)^Installed-Size: [1-9][0-9]+$`,
	} {
		if !regexp.MustCompile(re).MatchString(info) {
			t.Errorf("control does not match %s:\n%s", re, info)
		}
	}

	files := contents(t, deb)
	want := map[string]string{
		"/usr/bin/remoted":                                 "-rwxr-xr-x",
		"/usr/bin/remotectl":                               "-rwxr-xr-x",
		"/usr/bin/remote-web":                              "-rwxr-xr-x",
		"/usr/bin/remote-shim":                             "-rwxr-xr-x",
		"/lib/systemd/system/remoted.service":              "-rw-r--r--",
		"/lib/systemd/system/remoted.socket":               "-rw-r--r--",
		"/usr/lib/sysusers.d/remote.conf":                  "-rw-r--r--",
		"/usr/lib/tmpfiles.d/remote.conf":                  "-rw-r--r--",
		"/usr/share/bash-completion/completions/remotectl": "-rw-r--r--",
		"/usr/share/doc/remote/remoted.example.toml":       "-rw-r--r--",
		"/usr/share/doc/remote/remoted.txt":                "-rw-r--r--",
		"/usr/share/doc/remote/remotectl.txt":              "-rw-r--r--",
		"/usr/share/doc/remote/remote-web.txt":             "-rw-r--r--",
		"/usr/share/doc/remote/remote-shim.txt":            "-rw-r--r--",
		"/usr/share/doc/remote/changelog.gz":               "-rw-r--r--",
		"/usr/share/doc/remote/CHANGELOG.md.gz":            "-rw-r--r--",
		"/usr/share/doc/remote/copyright":                  "-rw-r--r--",
		"/usr/share/lintian/overrides/remote":              "-rw-r--r--",
		"/etc/remote/remoted.toml":                         "-rw-r-----",
	}
	regular := 0
	for path, e := range files {
		if e.mode[0] != 'd' {
			regular++
			if _, ok := want[path]; !ok {
				t.Errorf("unexpected file in the package: %s", path)
			}
		}
	}
	for path, mode := range want {
		if e, ok := files[path]; !ok {
			t.Errorf("not in the package: %s", path)
		} else if e.mode != mode || e.owner != "root/root" {
			t.Errorf("%s: %s %s, want %s root/root", path, e.mode, e.owner, mode)
		}
	}
	if regular != len(want) {
		t.Errorf("%d files in the package, want %d", regular, len(want))
	}

	// Unpacked: what the files say.
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", deb, root)
	ctl := t.TempDir()
	run(t, "dpkg-deb", "-e", deb, ctl)
	read := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got, want := read(filepath.Join(root, "etc/remote/remoted.toml")), read(filepath.Join(testkit.Root(), "config/remoted.example.toml")); got != want {
		t.Errorf("/etc/remote/remoted.toml is not config/remoted.example.toml")
	}
	if got := read(filepath.Join(ctl, "conffiles")); got != "/etc/remote/remoted.toml\n" {
		t.Errorf("conffiles = %q, want /etc/remote/remoted.toml alone", got)
	}
	if unit := read(filepath.Join(root, "lib/systemd/system/remoted.service")); !strings.Contains(unit, "\nExecStart=/usr/bin/remoted -config /etc/remote/remoted.toml\n") {
		t.Errorf("the packaged unit does not start /usr/bin/remoted")
	}
	if txt := read(filepath.Join(root, "usr/share/doc/remote/remoted.txt")); !strings.Contains(txt, "-init-secrets-key") {
		t.Errorf("remoted.txt is not remoted -h:\n%s", txt)
	}
	// The packaged remoted accepts the packaged configuration as it is.
	run(t, filepath.Join(root, "usr/bin/remoted"), "-config", filepath.Join(root, "etc/remote/remoted.toml"), "-check-config")
	if out := run(t, filepath.Join(root, "usr/bin/remoted"), "-version"); !strings.Contains(out, describe) {
		t.Errorf("remoted -version = %q, want the build's %s", out, describe)
	}

	// The maintainer scripts: valid sh, executable, and the upgrade path
	// restarts rather than stops (runs re-attach; prerm stops on remove only).
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(ctl, s)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("no %s: %v", s, err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755", s, fi.Mode().Perm())
		}
		run(t, "sh", "-n", p)
	}
	postinst, prerm, postrm := read(filepath.Join(ctl, "postinst")), read(filepath.Join(ctl, "prerm")), read(filepath.Join(ctl, "postrm"))
	for _, s := range []string{"systemd-sysusers remote.conf", "systemd-tmpfiles --create remote.conf",
		"remoted -init-secrets-key /etc/remote/secrets.key", "systemctl daemon-reload",
		"systemctl enable remoted.socket remoted.service", "systemctl try-restart remoted.service"} {
		if !strings.Contains(postinst, s) {
			t.Errorf("postinst does not run %q", s)
		}
	}
	if !regexp.MustCompile(`(?s)remove\)\s*\n\s*if [^\n]*\n\s*systemctl disable --now remoted.service remoted.socket`).MatchString(prerm) ||
		regexp.MustCompile(`(?s)upgrade[^)]*\)[^;]*systemctl`).MatchString(prerm) {
		t.Errorf("prerm must stop the service on remove and leave it running on upgrade:\n%s", prerm)
	}
	if !regexp.MustCompile(`(?s)purge\)\s*\n\s*rm -rf /etc/remote /var/lib/remote`).MatchString(postrm) ||
		regexp.MustCompile(`(?s)remove\)[^;]*rm `).MatchString(postrm) {
		t.Errorf("postrm must delete /etc/remote and /var/lib/remote on purge only:\n%s", postrm)
	}

	if lintian, err := exec.LookPath("lintian"); err == nil {
		out, err := exec.Command(lintian, "--tag-display-limit", "0", deb).CombinedOutput()
		var tags []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
				tags = append(tags, l)
			}
		}
		if err != nil || len(tags) > 0 {
			t.Errorf("lintian: %v\n%s", err, out)
		}
	} else {
		t.Log("lintian not installed: not linted")
	}
}

// TestAttackReleasePackageExposesConfig: a local user who is not root
// reads /etc/remote/remoted.toml after the package installs it (it may
// name key files and hold [web] password hashes), or finds a secrets key
// the package shipped, which every installation of it would then share,
// or a file in the package they can write. The package ships the
// configuration 0640 root:root, no secrets key (postinst creates one per
// host), nothing writable by others and nothing setuid.
func TestAttackReleasePackageExposesConfig(t *testing.T) {
	files := contents(t, deb(t))
	if e := files["/etc/remote/remoted.toml"]; e.mode != "-rw-r-----" || e.owner != "root/root" {
		t.Errorf("/etc/remote/remoted.toml is %s %s: readable by local users (want -rw-r----- root/root)", e.mode, e.owner)
	}
	for path, e := range files {
		if strings.HasPrefix(path, "/etc/remote/") && path != "/etc/remote/remoted.toml" {
			t.Errorf("the package ships %s: every host installing it would share it", path)
		}
		if e.mode[8] == 'w' && e.mode[0] != 'l' {
			t.Errorf("%s is writable by every user: %s", path, e.mode)
		}
		if strings.ContainsAny(e.mode[1:], "sSt") {
			t.Errorf("%s is setuid, setgid or sticky: %s", path, e.mode)
		}
		if e.owner != "root/root" {
			t.Errorf("%s is owned by %s, want root/root", path, e.owner)
		}
	}
}
