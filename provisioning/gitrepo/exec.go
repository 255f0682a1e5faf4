package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"remote/internal/errdefs"
	"remote/lxdexec"
)

// Workspace is where the repository lives in the container.
const Workspace = "/workspace"

// BaseRef is the ref the clone leaves at the commit it checked out: the
// base the whole-chat diff is taken against.
const BaseRef = "refs/remote/base"

// Execer starts processes in containers; *lxdexec.Client satisfies it.
type Execer interface {
	Exec(ctx context.Context, instance string, req lxdexec.ExecRequest) (*lxdexec.Exec, error)
}

// maxErrTail bounds the part of git's stderr kept for an error.
const maxErrTail = 2 << 10

// gitEnv is the environment of every git the daemon runs in a project's
// container: no system or global config (the container's root may have
// planted helpers there), no hooks, no fsmonitor, no prompt, the workspace
// trusted whoever owns it, and no transport but reading a local bundle
// (GIT_ALLOW_PROTOCOL, which a repository's protocol.*.allow cannot
// widen). No token, credential helper or remote ever reaches the
// container: everything that talks to the repository's server runs on
// the host (Remote).
func gitEnv() map[string]string {
	env := map[string]string{
		"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true",
		"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ALLOW_PROTOCOL": "file",
	}
	cfg := [][2]string{{"core.hooksPath", "/dev/null"}, {"core.fsmonitor", "false"}, {"safe.directory", Workspace},
		{"protocol.allow", "never"}, {"protocol.file.allow", "always"}, {"credential.helper", ""}}
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(len(cfg))
	for i, kv := range cfg {
		env["GIT_CONFIG_KEY_"+strconv.Itoa(i)] = kv[0]
		env["GIT_CONFIG_VALUE_"+strconv.Itoa(i)] = kv[1]
	}
	return env
}

// result is a finished exec: its exit code, its stdout (at most the
// bound asked for; truncated when there was more) and the tail of its
// stderr.
type result struct {
	code      int
	out       []byte
	truncated bool
	stderr    string
}

// run executes argv in container with env, keeping at most maxOut bytes
// of stdout; more ends the command (truncated).
func run(ctx context.Context, x Execer, container string, argv []string, env map[string]string, maxOut int) (result, error) {
	return runIO(ctx, x, container, argv, env, nil, nil, maxOut)
}

// runIO is run with stdin written to the command (then closed), and its
// stdout copied to out when out is not nil (maxOut then bounds nothing).
func runIO(ctx context.Context, x Execer, container string, argv []string, env map[string]string,
	stdin []byte, out io.Writer, maxOut int) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ex, err := x.Exec(ctx, container, lxdexec.ExecRequest{Command: argv, Env: env, Cwd: "/"})
	if err != nil {
		if notRunning(err) { // stopped behind the daemon's back: its record still says running
			return result{}, errdefs.Unavailable("container %q is not running: start its project", container)
		}
		return result{}, fmt.Errorf("exec %s in %q: %w", argv[0], container, err)
	}
	go func() {
		if len(stdin) > 0 {
			_, _ = ex.Stdin().Write(stdin)
		}
		_ = ex.Stdin().Close()
	}()
	var res result
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b, _ := io.ReadAll(ex.Stderr())
		if len(b) > maxErrTail {
			b = b[len(b)-maxErrTail:]
		}
		res.stderr = strings.TrimSpace(string(b))
	}()
	var copyErr error
	if out != nil {
		if _, copyErr = io.Copy(out, ex.Stdout()); copyErr != nil {
			cancel() // the rest is not wanted: end the command
			_, _ = io.Copy(io.Discard, ex.Stdout())
		}
	} else {
		b, _ := io.ReadAll(io.LimitReader(ex.Stdout(), int64(maxOut)+1))
		if len(b) > maxOut {
			res.out, res.truncated = b[:maxOut], true
			cancel() // the rest is not read: end the command
		} else {
			res.out = b
		}
	}
	wg.Wait()
	code, err := ex.Wait()
	res.code = code
	if copyErr != nil {
		return res, copyErr
	}
	if res.truncated {
		return res, nil
	}
	if err != nil && !(errors.Is(err, lxdexec.ErrOperationFailed) && code > 0) {
		return result{}, fmt.Errorf("exec %s in %q: %w", argv[0], container, err)
	}
	return res, nil
}

// notRunning reports whether LXD refused an exec because the instance is
// not running (400 "Instance is not running") or does not exist.
func notRunning(err error) bool {
	var le *lxdexec.Error
	return errors.Is(err, lxdexec.ErrNotFound) ||
		errors.As(err, &le) && errors.Is(err, lxdexec.ErrBadRequest) && lxdexec.MsgNotRunning.In(le.Message)
}

// sanitize makes git's message safe to show: the token and any
// credentials of a URL are replaced, control characters dropped, the
// length bounded.
func sanitize(msg, token string) string {
	if token != "" {
		msg = strings.ReplaceAll(msg, token, "[redacted]")
	}
	var b strings.Builder
	for _, f := range strings.Fields(msg) {
		if i := strings.Index(f, "://"); i >= 0 {
			if j := strings.IndexByte(f[i+3:], '@'); j >= 0 && !strings.ContainsAny(f[i+3:i+3+j], "/") {
				f = f[:i+3] + "[redacted]@" + f[i+3+j+1:]
			}
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, f))
	}
	s := b.String()
	if len(s) > 1024 {
		s = s[len(s)-1024:]
	}
	return s
}
