package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"remote/internal/testkit"
)

func TestFromBuildInfo(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "dev"},
		{"go install at a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, true, "v1.2.3"},
		{"module version wins over the revision",
			&debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261203125131-d6cdcc3abcde+dirty"}, Settings: settings("vcs.revision", "d6cdcc3abcdef0123456789")}, true,
			"v0.0.0-20261203125131-d6cdcc3abcde+dirty"},
		{"devel with a clean revision",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings("vcs.revision", "d6cdcc3abcdef0123456789", "vcs.modified", "false")}, true,
			"d6cdcc3abcde"},
		{"devel with local changes",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings("vcs.revision", "d6cdcc3abcdef0123456789", "vcs.modified", "true")}, true,
			"d6cdcc3abcde-dirty"},
		{"devel without VCS information", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev"},
	} {
		if got := fromBuildInfo(tc.bi, tc.ok); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// goBuild builds the three commands into a temporary directory with extra
// go build arguments and returns the directory.
func goBuild(t *testing.T, args ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds remoted, remotectl and remote-web (make test runs it)")
	}
	dir := t.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not in PATH (go test puts it there): %v", err)
	}
	argv := append([]string{"build", "-o", dir + "/"}, args...)
	argv = append(argv, "remote/cmd/remoted", "remote/cmd/remotectl", "remote/cmd/remote-web")
	cmd := exec.Command(goBin, argv...)
	cmd.Dir = testkit.Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return dir
}

// versionOf runs "bin -version" and returns its standard output.
func versionOf(t *testing.T, dir, bin string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, bin), "-version")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -version: %v\n%s", bin, err, stderr.String())
	}
	return string(out)
}

// TestBinariesPrintStampedVersion builds remoted, remotectl and remote-web
// the way make build does (-ldflags -X with the git describe string) and
// checks that each prints it for -version, without reading a config or
// reaching a socket.
func TestBinariesPrintStampedVersion(t *testing.T) {
	const stamp = "v0.9.1-14-gd6cdcc3-dirty"
	dir := goBuild(t, "-ldflags", "-X remote/internal/version.stamped="+stamp)
	for _, bin := range []string{"remoted", "remotectl", "remote-web"} {
		if got, want := versionOf(t, dir, bin), bin+" "+stamp+"\n"; got != want {
			t.Errorf("%s -version printed %q, want %q", bin, got, want)
		}
	}
}

// TestUnstampedBinaryReportsRevision builds without the stamp but with VCS
// information (go build's default in a git checkout): -version then names
// the checked-out revision instead of a meaningless "dev".
func TestUnstampedBinaryReportsRevision(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	cmd := exec.Command(git, "rev-parse", "--short=12", "HEAD")
	cmd.Dir = testkit.Root()
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	rev := strings.TrimSpace(string(out))
	if fi, err := os.Stat(filepath.Join(testkit.Root(), ".git")); err != nil || !fi.IsDir() {
		// go build looks for a .git directory; a git worktree has a .git
		// file, and its binaries carry no VCS information at all.
		t.Skip("a git worktree: go build records VCS information only where .git is a directory")
	}
	dir := goBuild(t, "-buildvcs=true")
	if got := versionOf(t, dir, "remoted"); !strings.HasPrefix(got, "remoted ") || !strings.Contains(got, rev) {
		t.Errorf("unstamped remoted -version printed %q, want the revision %s in it", got, rev)
	}
}
