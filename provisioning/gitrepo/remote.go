package gitrepo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"remote/internal/errdefs"
	"remote/internal/keyed"
)

// Remote runs, on the daemon's host, every git command that talks to a
// project's repository server: the ls-remote, the fetch a clone starts
// from and the push. The token is given to these host processes only
// (through a credential helper in their environment, answering only the
// repository's own scheme and host); a project's container never sees it,
// nor a credential helper, nor a remote it could rewrite: the container
// receives what was fetched as a git bundle on an exec's stdin, and gives
// a push back as a bundle on an exec's stdout, which the host checks
// (fsck) into a bare mirror of its own before pushing exactly the chat's
// branch. The container's .git/config, hooks and binaries are never read
// by the git that holds the token.
//
// Its zero value works with a temporary mirror per operation; Dir keeps
// one bare mirror per project (a push then sends only what the clone did
// not already hold). One operation per mirror at a time.
type Remote struct {
	// Dir holds the mirrors ("" = a temporary directory per operation).
	Dir string
	// Git is the git binary ("" = "git" on PATH).
	Git   string
	locks keyed.Lock
}

// maxBundleBytes bounds a push's bundle read from a container.
const maxBundleBytes = 2 << 30

// hostEnv is the environment of a host git: no system or global config,
// no prompt, hooks off, every object received checked, only the given
// transports. With token, the credential helper (replacing any other)
// answers only repoURL's scheme and host.
func hostEnv(token, repoURL, protocols string) []string {
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "SSH_ASKPASS=true", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_ALLOW_PROTOCOL=" + protocols, "HOME=/nonexistent", "LC_ALL=C"}
	for _, k := range []string{"PATH", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	cfg := [][2]string{{"core.hooksPath", "/dev/null"}, {"core.fsmonitor", "false"}, {"transfer.fsckObjects", "true"},
		{"protocol.allow", "never"}, {"credential.helper", ""}}
	for _, p := range strings.Split(protocols, ":") {
		cfg = append(cfg, [2]string{"protocol." + p + ".allow", "always"})
	}
	if token != "" {
		if u, err := url.Parse(repoURL); err == nil {
			env = append(env, "REMOTE_GIT_PROTOCOL="+u.Scheme, "REMOTE_GIT_HOST="+u.Host)
		}
		env = append(env, "REMOTE_GIT_TOKEN="+token)
		cfg = append(cfg, [2]string{"credential.helper", credentialHelper})
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
	for i, kv := range cfg {
		env = append(env, "GIT_CONFIG_KEY_"+strconv.Itoa(i)+"="+kv[0], "GIT_CONFIG_VALUE_"+strconv.Itoa(i)+"="+kv[1])
	}
	return env
}

// credentialHelper is given to the host's git: it answers only "get", and
// only for the repository's own scheme and host (a redirect elsewhere
// gets nothing), printing the token to git's pipe, never to argv or a
// file.
const credentialHelper = `!f(){ test "$1" = get || exit 0; p=; h=; ` +
	`while read -r l; do case "$l" in protocol=*) p="${l#protocol=}";; host=*) h="${l#host=}";; esac; done; ` +
	`test "$p" = "$REMOTE_GIT_PROTOCOL" && test "$h" = "$REMOTE_GIT_HOST" || exit 0; ` +
	`echo username=x-access-token; echo "password=$REMOTE_GIT_TOKEN"; }; f`

// git runs the host's git in dir; its error carries git's stderr,
// sanitized (never the token).
func (g *Remote) git(ctx context.Context, dir string, env []string, token string, args ...string) ([]byte, error) {
	bin := g.Git
	if bin == "" {
		bin = "git"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > maxErrTail {
			msg = msg[len(msg)-maxErrTail:]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("git %s exited %d: %s", args[0], ee.ExitCode(), sanitize(msg, token))
		}
		return out, fmt.Errorf("git %s: %w", args[0], err)
	}
	return out, nil
}

// mirror locks and returns key's bare mirror, made when missing, and its
// release (which removes a temporary one).
func (g *Remote) mirror(ctx context.Context, key string) (string, func(), error) {
	if g.Dir == "" {
		dir, err := os.MkdirTemp("", "remote-git-")
		if err != nil {
			return "", nil, err
		}
		if _, err := g.git(ctx, dir, hostEnv("", "", "file"), "", "init", "-q", "--bare", dir); err != nil {
			_ = os.RemoveAll(dir)
			return "", nil, err
		}
		return dir, func() { _ = os.RemoveAll(dir) }, nil
	}
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(g.Dir, hex.EncodeToString(sum[:12])+".git")
	unlock, err := g.locks.Lock(ctx, dir)
	if err != nil {
		return "", nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		if err := os.MkdirAll(g.Dir, 0o700); err != nil {
			unlock()
			return "", nil, err
		}
		_ = os.RemoveAll(dir)
		if _, err := g.git(ctx, g.Dir, hostEnv("", "", "file"), "", "init", "-q", "--bare", dir); err != nil {
			unlock()
			return "", nil, err
		}
	}
	return dir, unlock, nil
}

// Fetched is a commit fetched from a repository, ready for a clone: the
// bundle holding it (refs/remote/clone) and the branch it is the tip of
// ("" for a tag).
type Fetched struct {
	SHA, Branch string
	Bundle      []byte
}

// Fetch fetches ref (a branch or a tag; "" = the branch the repository's
// HEAD names) of repoURL into key's mirror with token and returns it as a
// bundle. Git's own failure (authentication, no such ref, no route)
// is a failed precondition with git's message, sanitized.
func (g *Remote) Fetch(ctx context.Context, key, repoURL, ref, token string) (Fetched, error) {
	env := hostEnv(token, repoURL, "http:https")
	dir, release, err := g.mirror(ctx, key)
	if err != nil {
		return Fetched{}, err
	}
	defer release()
	args := []string{"ls-remote", "--symref", "--", repoURL, "HEAD"}
	if ref != "" {
		args = append(args, "refs/heads/"+ref, "refs/tags/"+ref)
	}
	out, err := g.git(ctx, dir, env, token, args...)
	if err != nil {
		return Fetched{}, errdefs.FailedPrecondition("%s", err.Error())
	}
	var f Fetched
	src := ""
	switch def, _ := parseSymref(string(out)); {
	case ref == "" && def == "":
		return Fetched{}, errdefs.FailedPrecondition("the repository's HEAD names no branch: give the project's repo.ref")
	case ref == "":
		f.Branch, src = def, "refs/heads/"+def
	case hasRef(string(out), "refs/heads/"+ref):
		f.Branch, src = ref, "refs/heads/"+ref
	case hasRef(string(out), "refs/tags/"+ref):
		src = "refs/tags/" + ref
	default:
		return Fetched{}, errdefs.FailedPrecondition("the repository has no branch or tag %q", ref)
	}
	if _, err := g.git(ctx, dir, env, token, "fetch", "-q", "--no-tags", "--", repoURL, "+"+src+":refs/remote/clone"); err != nil {
		return Fetched{}, errdefs.FailedPrecondition("%s", err.Error())
	}
	local := hostEnv("", "", "file")
	sha, err := g.git(ctx, dir, local, "", "rev-parse", "--verify", "refs/remote/clone^{commit}")
	if err != nil {
		return Fetched{}, err
	}
	f.SHA = strings.TrimSpace(string(sha))
	if f.Bundle, err = g.git(ctx, dir, local, "", "bundle", "create", "-q", "-", "refs/remote/clone"); err != nil {
		return Fetched{}, err
	}
	return f, nil
}

// hasRef reports whether ls-remote output lists ref.
func hasRef(out, ref string) bool {
	for _, l := range strings.Split(out, "\n") {
		if _, name, ok := strings.Cut(l, "\t"); ok && name == ref && !strings.HasPrefix(l, "ref: ") {
			return true
		}
	}
	return false
}

// DefaultBranch asks repoURL for its default branch (the branch its HEAD
// names) with token, from the host.
func (g *Remote) DefaultBranch(ctx context.Context, repoURL, token string) (string, error) {
	out, err := g.git(ctx, "/", hostEnv(token, repoURL, "http:https"), token, "ls-remote", "--symref", "--", repoURL, "HEAD")
	if err != nil {
		return "", errdefs.FailedPrecondition("ask the repository for its default branch: %s", err.Error())
	}
	if b, ok := parseSymref(string(out)); ok {
		return b, nil
	}
	return "", errdefs.FailedPrecondition("the repository's HEAD names no branch: give the pull request's base")
}

// haves lists the commits key's mirror holds at its refs: what a push
// bundle may leave out.
func (g *Remote) haves(ctx context.Context, dir string) []string {
	out, err := g.git(ctx, dir, hostEnv("", "", "file"), "", "for-each-ref", "--format=%(objectname)", "refs/remote/")
	if err != nil {
		return nil
	}
	var hs []string
	for _, h := range strings.Fields(string(out)) {
		if shaRE.MatchString(h) {
			hs = append(hs, h)
		}
	}
	return hs
}

// push takes the bundle of refs/heads/branch (at sha) that bundle
// writes, given the mirror's haves it may leave out, checks it into the
// mirror and pushes exactly that commit to refs/heads/branch of repoURL
// with token. A bundle whose prerequisites the mirror lacks is asked for
// again whole.
func (g *Remote) push(ctx context.Context, key, repoURL, branch, sha, token string,
	bundle func(haves []string, w io.Writer) error) error {
	dir, release, err := g.mirror(ctx, key)
	if err != nil {
		return err
	}
	defer release()
	local := hostEnv("", "", "file")
	if _, err := g.git(ctx, dir, local, "", "cat-file", "-e", sha+"^{commit}"); err != nil {
		haves := g.haves(ctx, dir)
		if err := g.takeBundle(ctx, dir, branch, haves, bundle); err != nil {
			if len(haves) == 0 {
				return err
			}
			if err := g.takeBundle(ctx, dir, branch, nil, bundle); err != nil {
				return err
			}
		}
	}
	if _, err := g.git(ctx, dir, local, "", "cat-file", "-e", sha+"^{commit}"); err != nil {
		return fmt.Errorf("the container's bundle of %s does not hold %s", branch, sha)
	}
	if _, err := g.git(ctx, dir, local, "", "update-ref", "refs/remote/pushed/"+branch, sha); err != nil {
		return err
	}
	if _, err := g.git(ctx, dir, hostEnv(token, repoURL, "http:https"), token,
		"push", "-q", "--no-verify", "--", repoURL, sha+":refs/heads/"+branch); err != nil {
		return errdefs.FailedPrecondition("push %s: %s", branch, err.Error())
	}
	return nil
}

// takeBundle reads the container's bundle of branch into a file beside
// the mirror, verifies it and fetches it into refs/remote/pushed/branch.
func (g *Remote) takeBundle(ctx context.Context, dir, branch string, haves []string, bundle func([]string, io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(dir), ".push-*.bundle")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	w := &capWriter{w: f, left: maxBundleBytes}
	berr := bundle(haves, w)
	if cerr := f.Close(); berr == nil {
		berr = cerr
	}
	if berr != nil {
		return berr
	}
	if w.over {
		return errdefs.ResourceExhausted("push %s: the branch's bundle is larger than %d bytes", branch, maxBundleBytes)
	}
	local := hostEnv("", "", "file")
	if _, err := g.git(ctx, dir, local, "", "bundle", "verify", "-q", f.Name()); err != nil {
		return fmt.Errorf("the container's bundle of %s: %w", branch, err)
	}
	if _, err := g.git(ctx, dir, local, "", "fetch", "-q", "--no-tags", "--", f.Name(),
		"+refs/heads/"+branch+":refs/remote/pushed/"+branch); err != nil {
		return fmt.Errorf("take the container's bundle of %s: %w", branch, err)
	}
	return nil
}

// capWriter writes at most left bytes, then fails.
type capWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, errors.New("bundle too large")
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}
