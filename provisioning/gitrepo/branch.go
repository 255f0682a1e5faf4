package gitrepo

import (
	"context"
	"strings"
	"unicode/utf8"

	"remote/internal/errdefs"
)

// WorktreeRoot holds the chats' own git worktrees, one directory per
// chat id: inside /workspace (the project's files stay in one place, the
// file routes reach them) and excluded from the main tree
// (.git/info/exclude), so the main tree's diff, tree and commit never
// take in another chat's files.
const WorktreeRoot = Workspace + "/.worktrees"

// ReservedBranchPrefix starts the branches the daemon names itself
// (remote/<chat id8>, the push of a chat without a branch of its own): a
// chat may not ask for one, so no chat takes over another's branch.
const ReservedBranchPrefix = "remote/"

// maxBranchBytes bounds a branch name (GitHub's limit: 255 bytes).
const maxBranchBytes = 255

// CheckBranch refuses a branch name git would not take for a branch
// (`git check-ref-format --branch`), and the names that only work as
// tricks: a leading "-" (an option), "HEAD", a name starting "refs/"
// (refs/heads/refs/heads/x), a full object id (ambiguous with a commit),
// and the daemon's own remote/ names. The error is invalid argument
// naming field.
func CheckBranch(field, name string) error {
	bad := func(why string) error {
		return errdefs.InvalidArgument("%s %q: %s", field, name, why)
	}
	switch {
	case name == "":
		return bad("must not be empty")
	case len(name) > maxBranchBytes:
		return errdefs.InvalidArgument("%s: longer than %d bytes", field, maxBranchBytes)
	case !utf8.ValidString(name):
		return errdefs.InvalidArgument("%s: not UTF-8", field)
	case strings.HasPrefix(name, "-"):
		return bad("must not start with '-'")
	case name == "HEAD" || name == "@":
		return bad("is not a branch name")
	case strings.HasPrefix(name, "refs/"):
		return bad("give the branch's short name, without refs/")
	case strings.HasPrefix(name, ReservedBranchPrefix):
		return bad("branches under " + ReservedBranchPrefix + " are the daemon's own (a chat's default push branch)")
	case shaRE.MatchString(name):
		return bad("a full object id is not a branch name")
	case strings.Contains(name, ".."):
		return bad("must not contain '..'")
	case strings.Contains(name, "@{"):
		return bad("must not contain '@{'")
	case strings.HasSuffix(name, "."):
		return bad("must not end with '.'")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return bad("must not contain spaces, control characters or any of ~^:?*[\\")
		}
	}
	for _, c := range strings.Split(name, "/") {
		switch {
		case c == "":
			return bad("must not start or end with '/' or contain '//'")
		case strings.HasPrefix(c, "."):
			return bad("no part between slashes may start with '.'")
		case strings.HasSuffix(c, ".lock"):
			return bad("no part between slashes may end with '.lock'")
		}
	}
	return nil
}

// Checkout is where a chat works in its project's repository.
type Checkout struct {
	Chat string // the chat's id
	// Branch is the chat's own branch; "" works in /workspace as it is.
	Branch string
	// Worktree gives the chat its own git worktree of Branch under
	// WorktreeRoot.
	Worktree bool
	// Busy: another chat of the project has a run active, so /workspace
	// must not be switched to another branch under it.
	Busy bool
}

// Dir is the chat's working directory: its worktree, else /workspace.
func (c Checkout) Dir() string {
	if c.Worktree && c.Branch != "" {
		return WorktreeRoot + "/" + c.Chat
	}
	return Workspace
}

// checkoutScript puts the chat's branch ($REMOTE_GIT_BRANCH, created at
// the clone's base when missing) where the chat works: its own worktree
// ($REMOTE_GIT_WORKTREE; switched back to the branch when the agent
// left it), else /workspace itself. A branch checked out in
// another worktree is never checked out again (exit 5), and /workspace
// is not switched to another branch while another chat of the project
// runs in it ($REMOTE_GIT_BUSY, exit 4).
const checkoutScript = `set -e
cd /workspace
test -d .git || { echo "/workspace holds no repository cloned by the daemon" >&2; exit 3; }
b="$REMOTE_GIT_BRANCH"; ref="refs/heads/$b"; wt="$REMOTE_GIT_WORKTREE"
mkdir -p .git/info
grep -qx '/.worktrees/' .git/info/exclude 2>/dev/null || printf '/.worktrees/\n' >> .git/info/exclude
git worktree prune
if ! git show-ref -q --verify "$ref"; then
  base=$(git rev-parse -q --verify "` + BaseRef + `^{commit}") || { echo "no base commit (` + BaseRef + `)" >&2; exit 3; }
  git update-ref -m "remote: branch of a chat" "$ref" "$base" ""
fi
here=/workspace
[ -n "$wt" ] && here="$wt"
at=$(git worktree list --porcelain | awk -v r="branch $ref" '/^worktree /{w=substr($0,10)} $0==r{print w}')
if [ -n "$at" ] && [ "$at" != "$here" ]; then echo "$at"; exit 5; fi
if [ -n "$wt" ]; then
  if [ -z "$at" ] && [ -e "$wt/.git" ]; then git -C "$wt" checkout -q "$b" --
  elif [ -z "$at" ]; then mkdir -p ` + WorktreeRoot + `; git worktree add -q -- "$wt" "$b"; fi
else
  if [ -z "$at" ]; then
    [ -z "$REMOTE_GIT_BUSY" ] || { git symbolic-ref -q --short HEAD || echo "a detached HEAD"; exit 4; }
    git checkout -q "$b" --
  fi
fi
echo "$here"
`

// CheckOut makes the chat's branch ready where the chat works and
// returns that directory (Checkout.Dir). A chat without a branch works in
// /workspace untouched. Refusals: the branch is checked out in another
// worktree, or /workspace would switch branch under another chat's run
// (conflict); no repository or git's own failure (failed precondition,
// git's message sanitized).
func CheckOut(ctx context.Context, x Execer, container string, co Checkout) (string, error) {
	if co.Branch == "" {
		return Workspace, nil
	}
	// The daemon's own remote/ names (a forge issue's chat) pass here;
	// CheckChatProject refuses them to users.
	if err := CheckBranch("branch", strings.TrimPrefix(co.Branch, ReservedBranchPrefix)); err != nil {
		return "", err
	}
	env := gitEnv()
	env["REMOTE_GIT_BRANCH"] = co.Branch
	if co.Worktree {
		env["REMOTE_GIT_WORKTREE"] = co.Dir()
	}
	if co.Busy {
		env["REMOTE_GIT_BUSY"] = "1"
	}
	res, err := run(ctx, x, container, []string{"sh", "-c", checkoutScript}, env, 4096)
	if err != nil {
		return "", err
	}
	out := strings.TrimSpace(string(res.out))
	switch res.code {
	case 0:
		if out != co.Dir() {
			return "", errdefs.FailedPrecondition("check out branch %q: git printed %q", co.Branch, sanitize(out, ""))
		}
		return out, nil
	case 4:
		return "", errdefs.Conflict("branch %q: /workspace is on %s and another chat of the project is running in it; "+
			"switch when it has ended, or create the chat with worktree: true", co.Branch, sanitize(out, ""))
	case 5:
		return "", errdefs.Conflict("branch %q is checked out in %s; a branch is checked out in one place at a time", co.Branch, sanitize(out, ""))
	}
	return "", errdefs.FailedPrecondition("check out branch %q: git exited %d: %s", co.Branch, res.code, sanitize(res.stderr, ""))
}
