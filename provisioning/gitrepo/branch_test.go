package gitrepo

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"remote/internal/errdefs"
)

var goodBranches = []string{"main", "feature/login", "fix-42", "release/1.2.x", "user.name/topic", "Ünïcode", "a", "v1.0_rc"}

var badBranches = []string{
	"",
	"--upload-pack=touch /tmp/x", // an option
	"-b",
	"../..",            // a path out of refs/heads
	"a/../b",           // a path inside
	"refs/heads/x",     // refs/heads/refs/heads/x
	"refs/remote/base", // the clone's base, by its full name
	"remote/0123abcd",  // another chat's default push branch
	"remote/x",         // the daemon's names
	"HEAD", "@",        // not branches
	"x@{-1}", "main@{upstream}", // reflog expressions
	"a b", "a\tb", "a\nb", "a\x00b", "a\x7fb", // spaces, control characters
	"a~1", "a^", "a:b", "a?", "a*", "a[b", `a\b`, // revision and glob syntax
	"x.lock", "a/x.lock/b", // lock files
	".hidden", "a/.b", // components starting with a dot
	"a.", "a/", "/a", "a//b", // trailing dot, slashes
	"0123456789abcdef0123456789abcdef01234567", // an object id
	strings.Repeat("a", 256),
	"\xff\xfe",
}

// TestCheckBranch: git's branch rules and the tricks, each refused as
// invalid argument naming the field; good names pass, and git itself
// takes every name accepted here (git check-ref-format --branch, when
// git is on the host).
func TestCheckBranch(t *testing.T) {
	for _, b := range goodBranches {
		if err := CheckBranch("branch", b); err != nil {
			t.Errorf("%q: %v", b, err)
		}
		gitAccepts(t, b)
	}
	for _, b := range badBranches {
		err := CheckBranch("branch", b)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "branch") {
			t.Errorf("%q: %v, want invalid argument naming branch", b, err)
		}
	}
}

// gitAccepts fails t when git on the host refuses branch b.
func gitAccepts(t testing.TB, b string) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		return
	}
	if out, err := exec.Command(git, "check-ref-format", "--branch", b).CombinedOutput(); err != nil {
		t.Errorf("CheckBranch accepted %q, git check-ref-format --branch refuses it: %v %s", b, err, out)
	}
}

// FuzzCheckBranch: a name CheckBranch accepts is one git accepts as a
// branch, is no option, path trick, ref path, revision expression or
// daemon name, and is at most 255 bytes.
func FuzzCheckBranch(f *testing.F) {
	for _, b := range append(append([]string{}, goodBranches...), badBranches...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b string) {
		if CheckBranch("branch", b) != nil {
			return
		}
		for _, bad := range []string{"..", "@{", " ", "~", "^", ":", "?", "*", "[", `\`, "//", "/."} {
			if strings.Contains(b, bad) {
				t.Fatalf("accepted %q holding %q", b, bad)
			}
		}
		if strings.HasPrefix(b, "-") || strings.HasPrefix(b, ".") || strings.HasPrefix(b, "/") || strings.HasPrefix(b, "refs/") ||
			strings.HasPrefix(b, "remote/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") || b == "HEAD" || len(b) > 255 {
			t.Fatalf("accepted %q", b)
		}
		gitAccepts(t, b)
	})
}
