package gitrepo

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"remote/internal/errdefs"
	"remote/internal/testkit/gitserver"
)

// localGit runs git in dir for the test (a stand-in for the container's
// working copy).
func localGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ALLOW_PROTOCOL=file",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// cloneFrom makes a working copy from f's bundle as the container's
// cloneScript does.
func cloneFrom(t *testing.T, f Fetched) string {
	t.Helper()
	dir := t.TempDir()
	b := filepath.Join(t.TempDir(), "clone.bundle")
	if err := os.WriteFile(b, f.Bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	localGit(t, dir, "init", "-q")
	localGit(t, dir, "fetch", "-q", b, "refs/remote/clone:"+BaseRef)
	localGit(t, dir, "update-ref", "refs/heads/"+f.Branch, BaseRef)
	localGit(t, dir, "symbolic-ref", "HEAD", "refs/heads/"+f.Branch)
	localGit(t, dir, "reset", "-q", "--hard")
	return dir
}

// bundleOf is a push's bundle source over a local working copy, as
// bundleScript makes it in the container; calls counts its calls.
func bundleOf(t *testing.T, dir, branch string, calls *int) func([]string, io.Writer) error {
	return func(haves []string, w io.Writer) error {
		*calls++
		args := []string{"bundle", "create", "-q", "-", "refs/heads/" + branch}
		for _, h := range haves {
			if exec.Command("git", "-C", dir, "cat-file", "-e", h+"^{commit}").Run() == nil {
				args = append(args, "^"+h)
			}
		}
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Stdout = dir, w
		return cmd.Run()
	}
}

// TestRemoteFetchPush: the host fetches the default branch with the
// token into a bundle the working copy clones from; a commit there goes
// back as a bundle holding only what the mirror lacks and lands on
// exactly the chat's branch; a mirror that lost the base is sent the
// whole branch; the token never shows in an error.
func TestRemoteFetchPush(t *testing.T) {
	const token = "tok_remote_0123456789abcdef"
	srv := gitserver.New(t, token)
	url := srv.NewRepo(t, "acme/calc", map[string]string{"calc.py": "x = 1\n"})
	ctx := context.Background()
	g := &Remote{Dir: t.TempDir()}

	f, err := g.Fetch(ctx, "p1", url, "", token)
	if err != nil {
		t.Fatal(err)
	}
	if f.Branch == "" || !shaRE.MatchString(f.SHA) || len(f.Bundle) == 0 {
		t.Fatalf("fetched = %+v", f)
	}
	if def, err := g.DefaultBranch(ctx, url, token); err != nil || def != f.Branch {
		t.Fatalf("default branch = %q, %v; fetched %q", def, err, f.Branch)
	}
	wc := cloneFrom(t, f)
	localGit(t, wc, "checkout", "-q", "-b", "fix")
	if err := os.WriteFile(filepath.Join(wc, "calc.py"), []byte("x = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	localGit(t, wc, "commit", "-q", "-am", "fix")
	sha := localGit(t, wc, "rev-parse", "HEAD")
	var calls int
	if err := g.push(ctx, "p1", url, "fix", sha, token, bundleOf(t, wc, "fix", &calls)); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("bundles asked for: %d, want 1 (incremental, prerequisites present)", calls)
	}
	if ls := srv.LsRemote(t, "acme/calc"); !strings.Contains(ls, sha+"\trefs/heads/fix") {
		t.Errorf("ls-remote after push:\n%s", ls)
	}

	// A fresh mirror (state lost): the incremental bundle is refused, the
	// whole branch is asked for and lands.
	localGit(t, wc, "commit", "-q", "--allow-empty", "-m", "two")
	sha2 := localGit(t, wc, "rev-parse", "HEAD")
	calls = 0
	fresh := &Remote{Dir: t.TempDir()}
	if _, err := fresh.Fetch(ctx, "p1", url, f.Branch, token); err != nil {
		t.Fatal(err)
	}
	if err := fresh.push(ctx, "p1", url, "fix", sha2, token, bundleOf(t, wc, "fix", &calls)); err != nil {
		t.Fatal(err)
	}
	if ls := srv.LsRemote(t, "acme/calc"); !strings.Contains(ls, sha2+"\trefs/heads/fix") {
		t.Errorf("ls-remote after the second push:\n%s", ls)
	}

	// A wrong token: git's failure, without the token.
	_, err = g.Fetch(ctx, "p2", url, "", "tok_wrong_0123456789")
	if !errdefs.IsFailedPrecondition(err) || strings.Contains(err.Error(), "tok_wrong") {
		t.Errorf("fetch with a wrong token: %v", err)
	}
	// No such ref.
	if _, err := g.Fetch(ctx, "p1", url, "nosuch", token); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("fetch of a missing ref: %v", err)
	}
}

// TestAttackPushBundle: what the container hands back is data the host
// checks: garbage is refused, and a bundle whose tip is not the commit
// the container named pushes nothing; a bundle with another ref can
// never move a branch but the chat's.
func TestAttackPushBundle(t *testing.T) {
	const token = "tok_bundle_0123456789abcdef"
	srv := gitserver.New(t, token)
	url := srv.NewRepo(t, "calc", map[string]string{"a": "1\n"})
	ctx := context.Background()
	g := &Remote{Dir: t.TempDir()}
	f, err := g.Fetch(ctx, "p", url, "", token)
	if err != nil {
		t.Fatal(err)
	}
	before := srv.LsRemote(t, "calc")
	garbage := func([]string, io.Writer) error { return nil }
	if err := g.push(ctx, "p", url, "x", strings.Repeat("ab", 20), token, garbage); err == nil {
		t.Error("an empty bundle was taken")
	}
	junk := func(_ []string, w io.Writer) error {
		_, err := io.WriteString(w, "# v2 git bundle\n"+f.SHA+" refs/heads/x\n\nPACKjunk")
		return err
	}
	if err := g.push(ctx, "p", url, "x", strings.Repeat("cd", 20), token, junk); err == nil {
		t.Error("a junk bundle was taken")
	}
	// The container's bundle names another branch (main) only: nothing
	// is fetched for "x", so nothing is pushed.
	wc := cloneFrom(t, f)
	localGit(t, wc, "commit", "-q", "--allow-empty", "-m", "evil")
	evil := localGit(t, wc, "rev-parse", "HEAD")
	var calls int
	other := bundleOf(t, wc, f.Branch, &calls)
	if err := g.push(ctx, "p", url, "x", evil, token, other); err == nil {
		t.Error("a bundle of another branch was pushed as x")
	}
	if after := srv.LsRemote(t, "calc"); after != before {
		t.Errorf("the server's refs changed:\n%s\nwas\n%s", after, before)
	}
}
