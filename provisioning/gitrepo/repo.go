package gitrepo

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"remote/api"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/providers"
)

var (
	refRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)
	shaRE = lazyre.New(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
)

// ValidateRepo checks a project's repository: an http(s) URL with a host
// and no credentials (an ssh URL is refused by name), a plain branch or
// tag, and the secret's name. Errors name the field (repo.url, repo.ref,
// repo.tokenSecret) and never echo a URL holding credentials.
func ValidateRepo(r api.ProjectRepo, validSecret func(string) bool) error {
	raw := r.URL
	switch {
	case raw == "":
		return errdefs.InvalidArgument("repo.url: a repository URL is required")
	case len(raw) > 2048:
		return errdefs.InvalidArgument("repo.url: longer than 2048 bytes")
	case strings.ContainsAny(raw, " \t\r\n\x00\x7f"):
		return errdefs.InvalidArgument("repo.url: contains whitespace or control characters")
	case strings.HasPrefix(raw, "git@") || strings.HasPrefix(raw, "ssh://") || strings.HasPrefix(raw, "git://"):
		return errdefs.InvalidArgument("repo.url: ssh and git:// URLs are not supported; use the repository's https URL and a token in tokenSecret")
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil {
		if u != nil && u.User != nil || strings.Contains(raw, "@") {
			return errdefs.InvalidArgument("repo.url: credentials in the URL are refused; store the token as a project secret and name it in repo.tokenSecret")
		}
		return errdefs.InvalidArgument("repo.url %q: not a URL", raw)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.Opaque != "" {
		return errdefs.InvalidArgument("repo.url %q: want an http(s) URL with a host", raw)
	}
	if r.Ref != "" && !ValidRef(r.Ref) {
		return errdefs.InvalidArgument("repo.ref %q: want a branch or tag name", r.Ref)
	}
	if r.TokenSecret != "" && !validSecret(r.TokenSecret) {
		return errdefs.InvalidArgument("repo.tokenSecret %q: must match ^[A-Za-z_][A-Za-z0-9_]*$", r.TokenSecret)
	}
	if r.WebhookSecret != "" && !validSecret(r.WebhookSecret) {
		return errdefs.InvalidArgument("repo.webhookSecret %q: must match ^[A-Za-z_][A-Za-z0-9_]*$", r.WebhookSecret)
	}
	if len(r.TriggerLabel) > 100 || strings.ContainsAny(r.TriggerLabel, "\r\n\x00") {
		return errdefs.InvalidArgument("repo.triggerLabel: at most 100 bytes on one line")
	}
	if len(r.TriggerPhrase) > 100 || strings.ContainsAny(r.TriggerPhrase, "\r\n\x00") {
		return errdefs.InvalidArgument("repo.triggerPhrase: at most 100 bytes on one line")
	}
	if len(r.TriggerUsers) > 100 {
		return errdefs.InvalidArgument("repo.triggerUsers: at most 100 users")
	}
	for _, u := range r.TriggerUsers {
		if u == "" || len(u) > 255 || strings.ContainsAny(u, " /\t\r\n\x00") {
			return errdefs.InvalidArgument("repo.triggerUsers: %q is not a forge user name", u)
		}
	}
	return nil
}

// ValidRef reports whether ref is a plain branch or tag name: letters,
// digits and "._/-", starting with a letter or digit, no "..", "//", and
// no trailing "/", "." or ".lock" (so never an option or a revision
// expression).
func ValidRef(ref string) bool {
	return refRE.MatchString(ref) && !strings.Contains(ref, "..") && !strings.Contains(ref, "//") &&
		!strings.HasSuffix(ref, ".lock") && !strings.HasSuffix(ref, "/") && !strings.HasSuffix(ref, ".")
}

// TakeToken returns secrets without the one named key, and its value
// ("" when key is "" or not set).
func TakeToken(secrets []providers.Secret, key string) ([]providers.Secret, string) {
	if key == "" {
		return secrets, ""
	}
	var token string
	out := make([]providers.Secret, 0, len(secrets))
	for _, s := range secrets {
		if s.Key == key {
			token = s.Value
			continue
		}
		out = append(out, s)
	}
	return out, token
}

// existsScript tells whether /workspace holds a repository already.
const existsScript = `test -e /workspace/.git && echo exists || true`

// cloneScript makes /workspace, which may already hold files (published
// skills), a clone of the bundle the host fetched (Remote.Fetch), read
// from stdin: no network, no token, no remote to talk to. The bundle's
// refs/remote/clone becomes BaseRef and, for a branch
// ($REMOTE_GIT_BRANCH), that branch checked out with origin's
// tracking ref; a tag leaves HEAD detached at it. A /workspace that
// already has a .git is left as it is ("exists"). What the daemon
// publishes (/.agents/) and the chats' worktrees are excluded from the
// repository.
const cloneScript = `set -e
mkdir -p /workspace
cd /workspace
if [ -e .git ]; then cat >/dev/null; echo exists; exit 0; fi
tmp=$(mktemp -d /workspace/.remote-clone.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/clone.bundle"
git init -q "$tmp/r"
git -C "$tmp/r" fetch -q --no-tags "$tmp/clone.bundle" "refs/remote/clone:` + BaseRef + `"
mv "$tmp/r/.git" .git
b="$REMOTE_GIT_BRANCH"
if [ -n "$b" ]; then
  git update-ref "refs/heads/$b" ` + BaseRef + `
  git symbolic-ref HEAD "refs/heads/$b"
  git remote add origin "$REMOTE_GIT_URL"
  git update-ref "refs/remotes/origin/$b" ` + BaseRef + `
  git config "branch.$b.remote" origin
  git config "branch.$b.merge" "refs/heads/$b"
else
  git remote add origin "$REMOTE_GIT_URL"
  git update-ref --no-deref HEAD ` + BaseRef + `
fi
git reset -q --hard
printf '/.agents/\n/.remote-clone.*\n/.worktrees/\n' >> .git/info/exclude
git rev-parse HEAD
`

// Cloner clones each container's repository once: a container whose
// /workspace holds a .git is never cloned into again (its own state is
// the record, asked at each preparation: it survives restarts and forks).
// The repository's server is reached from the host only (Remote): the
// container gets the fetched commits as a bundle, never the token.
type Cloner struct {
	X Execer
	// Remote fetches from the repository on the host; nil: a zero Remote
	// (a temporary mirror per clone).
	Remote *Remote
	// Chats returns where a chat works (its branch, its worktree, whether
	// another chat of its project runs); nil: every chat works in
	// /workspace as it is.
	Chats func(chatID string) (Checkout, error)
	zero  Remote
}

// remote is c.Remote, else its own zero Remote.
func (c *Cloner) remote() *Remote {
	if c.Remote != nil {
		return c.Remote
	}
	return &c.zero
}

// Ensure clones repo into container's /workspace unless it has a .git
// already. It returns the event to store: repo_cloned {url, ref, sha},
// repo_clone_failed {url, error} with git's message (sanitized: never the
// token), or "" when there was nothing to do. A failed clone is tried
// again by the next preparation. key names the project's mirror on the
// host (Remote).
//
// Then chat's branch is made ready (CheckOut) and its directory returned:
// the chat's cwd. An error there (a refusal of CheckOut) fails the turn.
// tree, when not nil, is then called with the chat's working tree
// recorded as a git tree (WriteTree), or the error recording it.
func (c *Cloner) Ensure(ctx context.Context, container, key, chat string, repo api.ProjectRepo, token string,
	tree func(string, error)) (string, map[string]string, string, error) {
	sub, data := c.ensure(ctx, container, key, repo, token)
	co := Checkout{Chat: chat}
	if c.Chats != nil && chat != "" {
		var err error
		if co, err = c.Chats(chat); err != nil {
			return sub, data, "", err
		}
	}
	dir, err := CheckOut(ctx, c.X, container, co)
	if err != nil {
		if sub == api.SubtypeRepoCloneFailed && errdefs.IsFailedPrecondition(err) {
			return sub, data, "", errdefs.FailedPrecondition("the project's repository could not be cloned: %s", data["error"])
		}
		return sub, data, "", err
	}
	if tree != nil {
		tree(WriteTree(ctx, c.X, container, dir))
	}
	return sub, data, dir, nil
}

func (c *Cloner) ensure(ctx context.Context, container, key string, repo api.ProjectRepo, token string) (string, map[string]string) {
	failed := func(msg string) (string, map[string]string) {
		if repo.TokenSecret != "" && token == "" {
			msg += fmt.Sprintf(" (project secret %q is not set)", repo.TokenSecret)
		}
		return api.SubtypeRepoCloneFailed, map[string]string{"url": repo.URL, "error": sanitize(msg, token)}
	}
	// A clone already there is never fetched again: nothing from the
	// repository's server is needed.
	res, err := run(ctx, c.X, container, []string{"sh", "-c", existsScript}, gitEnv(), 64)
	if err != nil {
		return failed(err.Error())
	}
	if strings.TrimSpace(string(res.out)) == "exists" {
		return "", nil
	}
	f, err := c.remote().Fetch(ctx, key, repo.URL, repo.Ref, token)
	if err != nil {
		return failed(err.Error())
	}
	env := gitEnv()
	env["REMOTE_GIT_URL"], env["REMOTE_GIT_BRANCH"] = repo.URL, f.Branch
	res, err = runIO(ctx, c.X, container, []string{"sh", "-c", cloneScript}, env, f.Bundle, nil, 4096)
	switch {
	case err != nil:
		return failed(err.Error())
	case res.code != 0:
		return failed(fmt.Sprintf("git clone exited %d: %s", res.code, res.stderr))
	}
	out := strings.TrimSpace(string(res.out))
	if out == "exists" {
		return "", nil
	}
	return api.SubtypeRepoCloned, map[string]string{"url": repo.URL, "ref": repo.Ref, "sha": out}
}

// treeSteps write the working tree of the current directory (/workspace
// or a chat's worktree) as a git tree and print its id, through the
// daemon's own index (remote-tree-index in that working tree's git dir,
// seeded from the user's index the first time): the user's index and
// files are untouched; ignored files are left out, as git add leaves
// them. Each run works on a copy (cp -p keeps the index's time, so git
// still re-reads the racily clean entries) and moves it back whole, so
// the next run finds the stat data fresh and concurrent runs never share
// a file.
const treeSteps = `keep=$(git rev-parse --git-path remote-tree-index)
idx=$(mktemp "$keep.XXXXXX")
trap 'rm -f "$idx"' EXIT
cp -p "$keep" "$idx" 2>/dev/null || cp -p "$(git rev-parse --git-path index)" "$idx" 2>/dev/null || rm -f "$idx"
GIT_INDEX_FILE="$idx" git add -A
GIT_INDEX_FILE="$idx" git write-tree
mv -f "$idx" "$keep"
`

const writeTreeScript = "set -e\ncd \"$REMOTE_GIT_DIR\" 2>/dev/null || exit 3\n" + treeSteps

// WriteTree records the working tree at dir (/workspace or a chat's
// worktree) in container as a git tree and returns its id; an error when
// dir is not a git working tree.
func WriteTree(ctx context.Context, x Execer, container, dir string) (string, error) {
	env := gitEnv()
	env["REMOTE_GIT_DIR"] = dir
	res, err := run(ctx, x, container, []string{"sh", "-c", writeTreeScript}, env, 4096)
	if err != nil {
		return "", err
	}
	tree := strings.TrimSpace(string(res.out))
	if res.code == 3 {
		return "", errdefs.FailedPrecondition("%s does not exist yet: a chat's worktree is made at its first turn", dir)
	}
	if res.code != 0 || !shaRE.MatchString(tree) {
		return "", fmt.Errorf("record the working tree: git exited %d: %s", res.code, sanitize(res.stderr, ""))
	}
	return tree, nil
}

// diffArgs are git diff's options in Diff: no renames, no external diff
// or textconv drivers the repository may configure, no color.
var diffArgs = []string{"diff", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color"}

// filesScript prints "<base> <head>\n" and the raw and numstat records of
// the diff between them: base "" is BaseRef (exit 3 when there is none),
// head "" the working tree at $REMOTE_GIT_DIR now (treeSteps; exit 5 when
// that directory does not exist). One exec, where a base, a tree and the
// file list would each take one.
var filesScript = `set -e
cd /workspace 2>/dev/null || exit 3
base=$REMOTE_DIFF_BASE head=$REMOTE_DIFF_HEAD
if [ -z "$base" ]; then base=$(git rev-parse --verify -q "` + BaseRef + `^{commit}") || exit 3; fi
if [ -z "$head" ]; then
	cd "$REMOTE_GIT_DIR" 2>/dev/null || exit 5
	head=$(` + treeSteps + `)
	cd /workspace
fi
printf '%s %s\n' "$base" "$head"
git ` + strings.Join(diffArgs, " ") + ` --raw --numstat -z "$base" "$head"
`

// DiffLimits bound one Diff: MaxPatch the bytes of its patch (cut
// beyond), MaxFiles the files it may list (0: DefaultMaxDiffFiles).
type DiffLimits struct {
	MaxPatch, MaxFiles int
}

// DiffMemory is the most memory one Diff under l and the JSON encoding of
// its answer hold at once, worst case: git's listing read (up to twice
// MaxDiffListBytes while it grows) and its paths kept, the patch read
// (twice MaxPatch while it grows) and kept as a string, and the encoded
// answer (JSON escapes a control character or an invalid byte in six).
func DiffMemory(l DiffLimits) int64 {
	return 6*MaxDiffListBytes + 10*int64(l.MaxPatch) + 1<<20
}

// Diff is what changed from base to head (commits or trees): base "" is
// the commit the clone checked out (BaseRef; a failed precondition when
// /workspace has none), head "" the working tree at dir (/workspace or a
// chat's worktree) now. The patch is cut after l.MaxPatch bytes. Renames
// show as a deletion and an addition. A diff beyond l.MaxFiles files, a
// path longer than MaxDiffPathBytes or a listing longer than
// MaxDiffListBytes is a *TooLargeError (git is stopped there).
func Diff(ctx context.Context, x Execer, container, dir, base, head string, l DiffLimits) (api.Diff, error) {
	if base != "" && !shaRE.MatchString(base) || head != "" && !shaRE.MatchString(head) {
		return api.Diff{}, fmt.Errorf("diff %q..%q: not object ids", base, head)
	}
	env := gitEnv()
	env["REMOTE_DIFF_BASE"], env["REMOTE_DIFF_HEAD"], env["REMOTE_GIT_DIR"] = base, head, dir
	// The two ids and their line come first.
	res, err := run(ctx, x, container, []string{"sh", "-c", filesScript}, env, MaxDiffListBytes+2*65+1)
	if err != nil {
		return api.Diff{}, err
	}
	if res.truncated {
		return api.Diff{}, &TooLargeError{What: "list", Limit: MaxDiffListBytes}
	}
	switch res.code {
	case 3:
		return api.Diff{}, errdefs.FailedPrecondition("/workspace holds no repository cloned by the daemon")
	case 5:
		return api.Diff{}, errdefs.FailedPrecondition("%s does not exist yet: a chat's worktree is made at its first turn", dir)
	}
	if res.code != 0 {
		return api.Diff{}, fmt.Errorf("git diff exited %d: %s", res.code, sanitize(res.stderr, ""))
	}
	nl := bytes.IndexByte(res.out, '\n')
	if nl < 0 || nl > 2*65 {
		return api.Diff{}, fmt.Errorf("diff: git printed %q, not two object ids", res.out[:min(len(res.out), 2*65)])
	}
	base, head, _ = strings.Cut(string(res.out[:nl]), " ")
	if !shaRE.MatchString(base) || !shaRE.MatchString(head) {
		return api.Diff{}, fmt.Errorf("diff: git printed %q, not two object ids", res.out[:nl])
	}
	files, err := ParseDiff(res.out[nl+1:], l.MaxFiles)
	if err != nil {
		return api.Diff{}, err
	}
	res, err = run(ctx, x, container, append(append([]string{"git", "-C", Workspace}, diffArgs...), base, head), gitEnv(), l.MaxPatch)
	if err != nil {
		return api.Diff{}, err
	}
	if res.code != 0 && !res.truncated {
		return api.Diff{}, fmt.Errorf("git diff exited %d: %s", res.code, sanitize(res.stderr, ""))
	}
	return api.Diff{Base: base, Head: head, Files: files, Patch: string(res.out), Truncated: res.truncated}, nil
}

// Push describes a push of a chat's branch.
type Push struct {
	URL, Branch, Message string
	AuthorName           string
	AuthorEmail          string
	Token                string // given to the host's git only (Remote), never to the container
	// Dir is the chat's working tree ("": /workspace); Busy: another
	// chat of the project runs, so /workspace must not switch branch.
	Dir  string
	Busy bool
	// What the commit takes (the index is reset first: what was staged
	// before does not count). By default the tracked files' changes and
	// the untracked files .gitignore does not ignore, except BuildOutput;
	// All: also BuildOutput; Paths (CheckPaths): only these paths of
	// Dir (files or directories, their untracked files that .gitignore
	// does not ignore included).
	All   bool
	Paths []string
}

// BuildOutput are the untracked files a default push leaves out although
// .gitignore does not ignore them: build output and caches of common
// toolchains, as git glob patterns at any depth. A tracked file among them
// is committed like any other; push with All takes them too.
var BuildOutput = []string{"__pycache__/", "*.pyc", ".pytest_cache/", ".mypy_cache/", "node_modules/", "*.o"}

// buildOutputExcludes are BuildOutput as exclude pathspecs of git add.
func buildOutputExcludes() []string {
	out := make([]string, 0, len(BuildOutput))
	for _, b := range BuildOutput {
		if d, ok := strings.CutSuffix(b, "/"); ok {
			out = append(out, ":(exclude,glob)**/"+d+"/**")
		} else {
			out = append(out, ":(exclude,glob)**/"+b)
		}
	}
	return out
}

// Bounds of a push's Paths.
const (
	MaxPushPaths      = 256
	maxPushPathBytes  = 4096
	maxPushPathsBytes = 64 << 10
)

// CheckPaths refuses push paths that are not plain paths inside the
// chat's working tree: empty, absolute, with a ".." or ".git" part,
// starting with "-" (an option), holding a control character (NUL
// included) or not UTF-8, and more than MaxPushPaths paths, one over 4096
// bytes or all over 65536. The error is invalid argument naming the path.
// The paths reach git as literal pathspecs after "--" (no magic, no
// globs).
func CheckPaths(paths []string) error {
	if len(paths) > MaxPushPaths {
		return errdefs.InvalidArgument("paths: %d paths, at most %d", len(paths), MaxPushPaths)
	}
	total := 0
	for i, p := range paths {
		bad := func(why string) error {
			return errdefs.InvalidArgument("paths[%d] %q: %s", i, p, why)
		}
		total += len(p)
		switch {
		case p == "":
			return bad("must not be empty")
		case len(p) > maxPushPathBytes:
			return errdefs.InvalidArgument("paths[%d]: longer than %d bytes", i, maxPushPathBytes)
		case total > maxPushPathsBytes:
			return errdefs.InvalidArgument("paths: longer than %d bytes together", maxPushPathsBytes)
		case !utf8.ValidString(p):
			return errdefs.InvalidArgument("paths[%d]: not UTF-8", i)
		case strings.HasPrefix(p, "-"):
			return bad("must not start with '-'")
		case strings.HasPrefix(p, "/"):
			return bad("must be relative to the chat's working tree (" + Workspace + " or its worktree), not absolute")
		}
		for _, r := range p {
			if r < 0x20 || r == 0x7f {
				return bad("must not contain control characters")
			}
		}
		for _, c := range strings.Split(p, "/") {
			switch c {
			case "..":
				return bad("must not contain '..': a path stays inside the chat's working tree")
			case ".git":
				return bad("must not name .git")
			}
		}
	}
	return nil
}

// commitScript moves the chat's working tree onto the branch (created at
// HEAD when it is new; switched to, carrying the uncommitted changes,
// when it exists) and commits what $REMOTE_GIT_STAGE says, ignored files
// aside: "all" everything, "paths" only the paths in "$@" (literal
// pathspecs; each must exist, be tracked or be in HEAD: exit 6, and not be
// ignored: exit 7, checked before anything changes; check-ignore takes
// no pathspec magic, literal included, and reads p as a path), else the tracked
// files' changes and the untracked files but the exclude pathspecs in
// "$@" (BuildOutput). A switch under another chat's run is refused (exit
// 4).
const commitScript = `set -e
cd "$REMOTE_GIT_DIR"
if [ "$REMOTE_GIT_STAGE" = paths ]; then
  for p in "$@"; do
    if [ -e "$p" ] || [ -L "$p" ]; then
      if (unset GIT_LITERAL_PATHSPECS; git check-ignore -q -- "$p"); then printf '%s' "$p"; exit 7; fi
    elif ! git ls-files --error-unmatch -- "$p" >/dev/null 2>&1 && ! git cat-file -e "HEAD:$p" 2>/dev/null; then
      printf '%s' "$p"; exit 6
    fi
  done
fi
cur=$(git symbolic-ref -q --short HEAD || true)
if [ "$cur" != "$REMOTE_GIT_BRANCH" ]; then
  [ -z "$REMOTE_GIT_BUSY" ] || { echo "${cur:-a detached HEAD}"; exit 4; }
  if git show-ref -q --verify "refs/heads/$REMOTE_GIT_BRANCH"; then git checkout -q "$REMOTE_GIT_BRANCH" --
  else git checkout -q -b "$REMOTE_GIT_BRANCH"; fi
fi
git reset -q
case "$REMOTE_GIT_STAGE" in
all) git add -A ;;
paths) git add -A -- "$@" ;;
*) git add -u && git add -A -- . "$@" ;;
esac
git diff --cached --quiet || git commit -q -m "$REMOTE_GIT_MESSAGE"
git rev-parse HEAD
`

// bundleScript writes to stdout a bundle of $REMOTE_GIT_BRANCH in
// $REMOTE_GIT_DIR, leaving out the commits the host's mirror has
// ($REMOTE_GIT_HAVE, those the container knows too).
const bundleScript = `set -e
cd "$REMOTE_GIT_DIR"
set -- "refs/heads/$REMOTE_GIT_BRANCH"
for h in $REMOTE_GIT_HAVE; do
  if git cat-file -e "$h^{commit}" 2>/dev/null; then set -- "$@" "^$h"; fi
done
git bundle create -q - "$@"
`

// CommitAndPush commits what is uncommitted in container's /workspace
// (what p.All and p.Paths say) on p.Branch and pushes the branch to p.URL; it returns the pushed commit.
// Only the commit runs in the container (git add may run the
// repository's filters), with no token; the branch then leaves the
// container as a bundle and g pushes it from the host (Remote), to
// refs/heads/p.Branch of p.URL and nothing else, whatever the
// container's git config says. key names the project's mirror.
func CommitAndPush(ctx context.Context, x Execer, g *Remote, key, container string, p Push) (string, error) {
	if err := CheckBranch("branch", strings.TrimPrefix(p.Branch, ReservedBranchPrefix)); err != nil {
		return "", err
	}
	p.Dir = cmp.Or(p.Dir, Workspace)
	env := gitEnv()
	env["REMOTE_GIT_BRANCH"], env["REMOTE_GIT_MESSAGE"], env["REMOTE_GIT_DIR"] = p.Branch, p.Message, p.Dir
	if p.Busy {
		env["REMOTE_GIT_BUSY"] = "1"
	}
	env["GIT_AUTHOR_NAME"], env["GIT_AUTHOR_EMAIL"] = p.AuthorName, p.AuthorEmail
	env["GIT_COMMITTER_NAME"], env["GIT_COMMITTER_EMAIL"] = p.AuthorName, p.AuthorEmail
	argv := []string{"sh", "-c", commitScript, "sh"}
	switch {
	case p.All && len(p.Paths) > 0:
		return "", errdefs.InvalidArgument("all and paths: give one of them")
	case p.All:
		env["REMOTE_GIT_STAGE"] = "all"
	case len(p.Paths) > 0:
		if err := CheckPaths(p.Paths); err != nil {
			return "", err
		}
		env["REMOTE_GIT_STAGE"], env["GIT_LITERAL_PATHSPECS"] = "paths", "1"
		argv = append(argv, p.Paths...)
	default:
		argv = append(argv, buildOutputExcludes()...)
	}
	res, err := run(ctx, x, container, argv, env, 4096)
	if err != nil {
		return "", err
	}
	sha := strings.TrimSpace(string(res.out))
	switch res.code {
	case 4:
		return "", errdefs.Conflict("push %s: /workspace is on %s and another chat of the project is running in it; push when it has ended",
			p.Branch, sanitize(sha, ""))
	case 6, 7:
		// Named only when it is one of the request's (the container's
		// output is the agent's to forge).
		if i := slices.Index(p.Paths, string(res.out)); i >= 0 && res.code == 6 {
			return "", errdefs.InvalidArgument("paths[%d] %q: matches no file in the chat's working tree (%s)", i, p.Paths[i], p.Dir)
		} else if i >= 0 {
			return "", errdefs.InvalidArgument("paths[%d] %q: is ignored (.gitignore or .git/info/exclude); a push never commits ignored files", i, p.Paths[i])
		}
	}
	if res.code != 0 || !shaRE.MatchString(sha) {
		return "", errdefs.FailedPrecondition("commit on %s: git exited %d: %s", p.Branch, res.code, sanitize(res.stderr, ""))
	}
	bundle := func(haves []string, w io.Writer) error {
		env := gitEnv()
		env["REMOTE_GIT_BRANCH"], env["REMOTE_GIT_DIR"], env["REMOTE_GIT_HAVE"] = p.Branch, p.Dir, strings.Join(haves, " ")
		res, err := runIO(ctx, x, container, []string{"sh", "-c", bundleScript}, env, nil, w, 0)
		if err != nil {
			return err
		}
		if res.code != 0 {
			return errdefs.FailedPrecondition("bundle %s for the push: git exited %d: %s", p.Branch, res.code, sanitize(res.stderr, ""))
		}
		return nil
	}
	if g == nil {
		g = &Remote{}
	}
	if err := g.push(ctx, key, p.URL, p.Branch, sha, p.Token, bundle); err != nil {
		return "", err
	}
	return sha, nil
}

// parseSymref finds "ref: refs/heads/BRANCH\tHEAD" in ls-remote --symref
// output.
func parseSymref(out string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		ref, name, ok := strings.Cut(strings.TrimPrefix(l, "ref: "), "\t")
		if !ok || !strings.HasPrefix(l, "ref: ") || name != "HEAD" {
			continue
		}
		b, ok := strings.CutPrefix(ref, "refs/heads/")
		if ok && ValidRef(b) {
			return b, true
		}
	}
	return "", false
}
