// Package envsetup owns a project's environment (issue "real work, part
// three"): its setup script run once in the container after the clone,
// kept as an LXD snapshot named after its cache key, and its maintenance
// script run at the start of each chat on a container already set up;
// their output as events and a project-level log; only the secrets the
// setup names in its exec environment, and the environment's own network
// (Manager.Proxy: a one-time credential of the egress proxy in that
// exec's proxy variables, revoked when it exits).
//
// It imports lxdexec, errdefs, the API wire types and the providers'
// contracts; provisioning, which imports it, hands it the container, the
// secrets and its lifecycle lock. It never imports provisioning, the
// daemon or config.
package envsetup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/errdefs"
	"remote/internal/keyed"
	"remote/lxdexec"
	"remote/providers"
)

// Container is the container an environment is set up in: its name, its
// LXD volatile.uuid and its config (volatile.base_image is the image's
// fingerprint).
type Container struct {
	Name   string
	UUID   string
	Config map[string]string
}

// Execer starts processes in containers; *lxdexec.Client satisfies it.
type Execer interface {
	Exec(ctx context.Context, instance string, req lxdexec.ExecRequest) (*lxdexec.Exec, error)
}

// Snapshotter takes, lists and deletes a container's snapshots.
type Snapshotter interface {
	CreateSnapshot(ctx context.Context, instance, name string, expires time.Time) error
	Snapshots(ctx context.Context, instance string) ([]lxdexec.Snapshot, error)
	DeleteSnapshot(ctx context.Context, instance, name string) error
}

// Manager sets projects' environments up. Its zero maps are made on use.
type Manager struct {
	X    Execer
	Snap Snapshotter // nil: no snapshot is kept
	// Lock takes the container's lifecycle lock around its snapshots.
	Lock func(ctx context.Context, container string) (func(), error)
	// UID and GID are the container user the scripts run as (0: root).
	UID, GID int
	// LogDir holds each project's log (<project id>.log); "": none.
	LogDir   string
	Logger   hclog.Logger
	Classify func(error) error // marks LXD being unreachable; nil: as is
	// Proxy gives one exec of proj's environment (setup or maintenance)
	// its own network, allow added to the project's: the proxy variables
	// to set in that exec's environment, the credential in them (to
	// redact) and revoke, called when the exec exits. env nil: nothing
	// to add (an open project). nil: environments have no network of
	// their own.
	Proxy func(proj api.Project, allow []string) (env map[string]string, credential string, revoke func())

	lock keyed.Lock // one run per project
	mu   sync.Mutex
	envs map[string]*envState // by project id
}

func (p *Manager) classify(err error) error {
	if p.Classify == nil {
		return err
	}
	return p.Classify(err)
}

func systemEvent(subtype string, data any) providers.Event {
	raw, _ := json.Marshal(data)
	return providers.Event{Type: providers.EventSystem, Subtype: subtype, Data: raw}
}

// tailBuffer keeps the last 4 KiB written.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) {
	t.b = append(t.b, p...)
	if len(t.b) > 4<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-4<<10:]...)
	}
}

func (t *tailBuffer) String() string { return string(t.b) }

// EnvironmentFile is where a repository names its environment when its
// project names none.
const EnvironmentFile = "/workspace/.remote/environment.toml"

// EnvSnapshotPrefix prefixes the LXD snapshot of a set-up environment:
// env-<the first 32 hex digits of its cache key>.
const EnvSnapshotPrefix = "env-"

// Bounds of the environment's scripts, output and events.
const (
	maxEnvAllow      = 64       // environment.network.allow entries
	maxEnvScript     = 64 << 10 // setup, maintenance, environment.toml
	maxEnvCacheFiles = 32
	maxEnvLineEvents = 200     // output lines sent as events per run
	maxEnvLine       = 1 << 10 // bytes of one line kept in an event
	maxEnvLog        = 1 << 20 // bytes of the project-level log of one run
)

// ErrEnvironmentFailed is a setup or maintenance that exited non-zero:
// the turn does not start.
var ErrEnvironmentFailed = errdefs.New(errdefs.ErrFailedPrecondition, "project environment failed")

// envState is what the daemon knows of one project's environment.
type envState struct {
	status     api.EnvironmentStatus
	maintained map[string]bool // container uuid \x00 key \x00 chat
}

func (p *Manager) envOf(projectID string) *envState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.envs == nil {
		p.envs = map[string]*envState{}
	}
	s := p.envs[projectID]
	if s == nil {
		s = &envState{status: api.EnvironmentStatus{State: api.EnvironmentNone}, maintained: map[string]bool{}}
		p.envs[projectID] = s
	}
	return s
}

func (p *Manager) setEnvStatus(projectID string, f func(*api.EnvironmentStatus)) {
	s := p.envOf(projectID)
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&s.status)
}

// Status is the state of proj's environment as this daemon
// last saw it.
func (p *Manager) Status(proj api.Project) api.EnvironmentStatus {
	s := p.envOf(proj.ID)
	p.mu.Lock()
	defer p.mu.Unlock()
	st := s.status
	if st.LastRun != nil {
		t := *st.LastRun
		st.LastRun = &t
	}
	return st
}

// Log is the project-level log of proj's last environment run
// (setup or maintenance); "" when there is none.
func (p *Manager) Log(proj api.Project) (string, error) {
	if p.LogDir == "" {
		return p.Status(proj).LogTail, nil
	}
	b, err := os.ReadFile(p.envLogPath(proj))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

func (p *Manager) envLogPath(proj api.Project) string {
	return filepath.Join(p.LogDir, proj.ID+".log")
}

// Check validates an environment of the project API; repoToken
// is the project's repository token secret, which setupSecrets may never
// name (it is given to git on the host only); checkAllow checks one
// network.allow entry (nil: only its shape; the egress proxy checks each
// again).
func Check(env api.ProjectEnvironment, validSecret func(string) bool, repoToken string, checkAllow func(string) error) error {
	if len(env.Setup) > maxEnvScript || len(env.Maintenance) > maxEnvScript {
		return errdefs.InvalidArgument("environment.setup and environment.maintenance: at most %d bytes each", maxEnvScript)
	}
	for _, s := range env.SetupSecrets {
		if !validSecret(s) {
			return errdefs.InvalidArgument("environment.setupSecrets: invalid secret name %q", s)
		}
		if repoToken != "" && s == repoToken {
			return errdefs.InvalidArgument("environment.setupSecrets: %q is the repository's tokenSecret: it is given to git on the host only, never to a script in the container", s)
		}
	}
	if len(env.CacheFiles) > maxEnvCacheFiles {
		return errdefs.InvalidArgument("environment.cacheFiles: at most %d files", maxEnvCacheFiles)
	}
	if env.Network != nil {
		if len(env.Network.Allow) > maxEnvAllow {
			return errdefs.InvalidArgument("environment.network.allow: at most %d entries", maxEnvAllow)
		}
		for _, h := range env.Network.Allow {
			if h == "" || len(h) > 260 || strings.ContainsAny(h, "\x00\n/@ ") {
				return errdefs.InvalidArgument("environment.network.allow: %q: want a host pattern (host, *.domain, either with :port or :*)", h)
			}
			if checkAllow != nil {
				if err := checkAllow(h); err != nil {
					return errdefs.InvalidArgument("environment.network.allow: %v", err)
				}
			}
		}
	}
	for _, f := range env.CacheFiles {
		if f == "" || len(f) > 1024 || strings.HasPrefix(f, "/") || strings.ContainsAny(f, "\x00\n") || slices.Contains(strings.Split(f, "/"), "..") {
			return errdefs.InvalidArgument("environment.cacheFiles: %q: want a path relative to /workspace, without ..", f)
		}
	}
	return nil
}

// Empty reports whether env sets nothing up.
func Empty(env *api.ProjectEnvironment) bool {
	return env == nil || (strings.TrimSpace(env.Setup) == "" && strings.TrimSpace(env.Maintenance) == "")
}

// environment is proj's environment: its own, else the repository's
// .remote/environment.toml (nil: none).
func (p *Manager) environment(ctx context.Context, c Container, proj api.Project) (*api.ProjectEnvironment, error) {
	if proj.Environment != nil && !Empty(proj.Environment) {
		return proj.Environment, nil
	}
	if proj.Repo == nil {
		return nil, nil // no repository: no .remote/environment.toml to read, no exec
	}
	code, out, err := p.envExec(ctx, c.Name, []string{"sh", "-c", `[ -f "$1" ] || exit 3; head -c ` + fmt.Sprint(maxEnvScript+1) + ` -- "$1"`, "sh", EnvironmentFile},
		nil, "/", nil, nil)
	if err != nil {
		return nil, err
	}
	if code == 3 {
		return nil, nil
	}
	if code != 0 {
		return nil, errdefs.FailedPrecondition("read %s: exited %d", EnvironmentFile, code)
	}
	if len(out) > maxEnvScript {
		return nil, errdefs.FailedPrecondition("%s: larger than %d bytes", EnvironmentFile, maxEnvScript)
	}
	var env api.ProjectEnvironment
	md, err := toml.Decode(string(out), &env)
	if err != nil {
		return nil, errdefs.FailedPrecondition("%s: %v", EnvironmentFile, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		return nil, errdefs.FailedPrecondition("%s: unknown key %q (want setup, maintenance, setup_secrets, cache_files, network.allow)", EnvironmentFile, un[0].String())
	}
	repoToken := ""
	if proj.Repo != nil {
		repoToken = proj.Repo.TokenSecret
	}
	if err := Check(env, func(s string) bool { return s != "" }, repoToken, nil); err != nil {
		return nil, errdefs.FailedPrecondition("%s: %v", EnvironmentFile, err)
	}
	if Empty(&env) {
		return nil, nil
	}
	return &env, nil
}

// envKey is the cache key of env in container c: sha256 of the setup and
// maintenance scripts, the image's fingerprint and the hashes of the
// files env names.
func (p *Manager) envKey(ctx context.Context, c Container, env *api.ProjectEnvironment) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "setup\x00%d\x00%s\x00maintenance\x00%d\x00%s\x00image\x00%s\x00", len(env.Setup), env.Setup,
		len(env.Maintenance), env.Maintenance, c.Config["volatile.base_image"])
	if len(env.CacheFiles) > 0 {
		const hashFiles = `cd /workspace || exit 0
for f; do printf '%s\t' "$f"; if [ -f "$f" ]; then sha256sum < "$f"; else echo missing; fi; done`
		code, out, err := p.envExec(ctx, c.Name, append([]string{"sh", "-c", hashFiles, "sh"}, env.CacheFiles...), nil, "/", nil, nil)
		if err != nil {
			return "", err
		}
		if code != 0 {
			return "", errdefs.FailedPrecondition("hash environment.cacheFiles: exited %d", code)
		}
		h.Write(out)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func envSnapshot(key string) string { return EnvSnapshotPrefix + key[:32] }

// KeyFile records, in the container, the cache key of the environment
// it was set up with (root's, outside /workspace). It is the container's
// own state: a checkpoint restored from before a setup, or a container
// replaced, has another key (or none) and is set up again; a fork's copy
// keeps it.
const KeyFile = "/var/lib/remote/environment-key"

// envCached reports whether container c was set up with key.
func (p *Manager) envCached(ctx context.Context, c Container, key string) (bool, error) {
	code, out, err := p.envExec(ctx, c.Name, []string{"sh", "-c", `cat -- "$1" 2>/dev/null || true`, "sh", KeyFile}, nil, "/", nil, nil)
	if err != nil {
		return false, err
	}
	return code == 0 && strings.TrimSpace(string(out)) == key, nil
}

// keepEnv records a set-up environment: key written to KeyFile, then
// the snapshot of key taken, the earlier environments' snapshots deleted.
func (p *Manager) keepEnv(ctx context.Context, c Container, key string) error {
	code, _, err := p.envExec(ctx, c.Name, []string{"sh", "-c", `mkdir -p "${1%/*}" && printf '%s\n' "$2" > "$1"`, "sh", KeyFile, key}, nil, "/", nil, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return errdefs.FailedPrecondition("record the environment's key in %s: exited %d", KeyFile, code)
	}
	snap := p.Snap
	if snap == nil {
		return nil
	}
	unlock, err := p.Lock(ctx, c.Name)
	if err != nil {
		return err
	}
	defer unlock()
	if list, err := snap.Snapshots(ctx, c.Name); err == nil {
		for _, s := range list {
			if strings.HasPrefix(s.Name, EnvSnapshotPrefix) && s.Name != envSnapshot(key) {
				_ = snap.DeleteSnapshot(ctx, c.Name, s.Name)
			}
		}
	}
	if err := snap.CreateSnapshot(ctx, c.Name, envSnapshot(key), time.Time{}); err != nil && !errors.Is(err, lxdexec.ErrConflict) {
		return fmt.Errorf("snapshot the environment of %q: %w", c.Name, p.classify(err))
	}
	return nil
}

// dropEnv forgets every set-up environment of c (rebuild).
func (p *Manager) dropEnv(ctx context.Context, c Container, projectID string) error {
	s := p.envOf(projectID)
	p.mu.Lock()
	clear(s.maintained)
	p.mu.Unlock()
	if _, _, err := p.envExec(ctx, c.Name, []string{"rm", "-f", KeyFile}, nil, "/", nil, nil); err != nil {
		return err
	}
	snap := p.Snap
	if snap == nil {
		return nil
	}
	list, err := snap.Snapshots(ctx, c.Name)
	if err != nil {
		return fmt.Errorf("list snapshots of %q: %w", c.Name, p.classify(err))
	}
	for _, s := range list {
		if strings.HasPrefix(s.Name, EnvSnapshotPrefix) {
			if err := snap.DeleteSnapshot(ctx, c.Name, s.Name); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
				return fmt.Errorf("delete environment snapshot %q: %w", s.Name, p.classify(err))
			}
		}
	}
	return nil
}

// Prepare sets proj's environment up in c when c does not record its
// cache key (KeyFile), or when force, else runs its maintenance once per
// chat. It returns the names of the secrets kept for the setup (to be
// left out of the run's environment). A setup or maintenance that fails
// is an error naming its exit status and its output's tail.
func (p *Manager) Prepare(ctx context.Context, c Container, proj api.Project, chat string, force bool,
	secrets []providers.Secret, emit func(providers.Event)) ([]string, error) {
	if emit == nil {
		emit = func(providers.Event) {}
	}
	unlock, err := p.lock.Lock(ctx, proj.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	env, err := p.environment(ctx, c, proj)
	if err != nil {
		p.setEnvStatus(proj.ID, func(s *api.EnvironmentStatus) { s.State, s.LogTail = api.EnvironmentFailed, err.Error() })
		return nil, err
	}
	if env == nil {
		p.setEnvStatus(proj.ID, func(s *api.EnvironmentStatus) { *s = api.EnvironmentStatus{State: api.EnvironmentNone} })
		return nil, nil
	}
	key, err := p.envKey(ctx, c, env)
	if err != nil {
		return env.SetupSecrets, err
	}
	if force {
		if err := p.dropEnv(ctx, c, proj.ID); err != nil {
			return env.SetupSecrets, err
		}
	}
	cached, err := p.envCached(ctx, c, key)
	if err != nil {
		return env.SetupSecrets, err
	}
	if cached {
		s := p.envOf(proj.ID)
		mk := c.UUID + "\x00" + key + "\x00" + chat
		p.mu.Lock()
		done := s.maintained[mk]
		if s.status.State != api.EnvironmentReady || s.status.CacheKey != key {
			s.status = api.EnvironmentStatus{State: api.EnvironmentReady, CacheKey: key}
		}
		p.mu.Unlock()
		if done || strings.TrimSpace(env.Maintenance) == "" {
			return env.SetupSecrets, nil
		}
		if err := p.runEnvScript(ctx, c, proj, "maintenance", env.Maintenance, key, nil, envAllow(env), emit); err != nil {
			return env.SetupSecrets, err
		}
		p.mu.Lock()
		s.maintained[mk] = true
		p.mu.Unlock()
		return env.SetupSecrets, nil
	}
	// Only the secrets the setup names reach its exec.
	var only []providers.Secret
	for _, name := range env.SetupSecrets {
		for _, s := range secrets {
			if s.Key == name {
				only = append(only, s)
			}
		}
	}
	// The container is no longer set up with any key until this setup
	// exits 0: a failed one leaves it half-set-up, never cached.
	if _, _, err := p.envExec(ctx, c.Name, []string{"rm", "-f", KeyFile}, nil, "/", nil, nil); err != nil {
		return env.SetupSecrets, err
	}
	if strings.TrimSpace(env.Setup) != "" {
		if err := p.runEnvScript(ctx, c, proj, "setup", env.Setup, key, only, envAllow(env), emit); err != nil {
			return env.SetupSecrets, err
		}
	}
	if err := p.keepEnv(ctx, c, key); err != nil {
		p.setEnvStatus(proj.ID, func(s *api.EnvironmentStatus) { s.State = api.EnvironmentFailed })
		return env.SetupSecrets, err
	}
	s := p.envOf(proj.ID)
	p.mu.Lock()
	s.maintained[c.UUID+"\x00"+key+"\x00"+chat] = true // this chat's start is the setup
	p.mu.Unlock()
	return env.SetupSecrets, nil
}

// envAllow is what env's scripts may reach beyond the project's network.
func envAllow(env *api.ProjectEnvironment) []string {
	if env.Network == nil {
		return nil
	}
	return env.Network.Allow
}

// runEnvScript runs script (phase setup or maintenance) in /workspace as
// the container user with only secrets in its environment (and, when
// allow names hosts, the proxy variables of a credential that reaches
// them, revoked when it exits), its output streamed as events (bounded,
// secret values redacted) and into the project-level log.
func (p *Manager) runEnvScript(ctx context.Context, c Container, proj api.Project, phase, script, key string,
	secrets []providers.Secret, allow []string, emit func(providers.Event)) error {
	var proxyEnv map[string]string
	if len(allow) > 0 && p.Proxy != nil {
		var cred string
		var revoke func()
		proxyEnv, cred, revoke = p.Proxy(proj, allow)
		defer revoke()
		if cred != "" {
			secrets = append(slices.Clip(secrets), providers.Secret{Key: "", Value: cred})
		}
	}
	start := time.Now().UTC()
	p.setEnvStatus(proj.ID, func(s *api.EnvironmentStatus) {
		*s = api.EnvironmentStatus{State: api.EnvironmentBuilding, CacheKey: key, LastRun: &start}
	})
	emit(systemEvent(api.SubtypeEnvironmentSetup, map[string]any{"phase": phase, "state": "started", "cacheKey": key}))
	logf := io.Writer(io.Discard)
	if p.LogDir != "" {
		if f, err := os.OpenFile(p.envLogPath(proj), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600); err == nil {
			defer f.Close()
			logf = &capWriter{w: f, n: maxEnvLog}
		} else {
			if p.Logger != nil {
				p.Logger.Warn("environment log not written", "project", proj.Name, "error", err)
			}
		}
	}
	fmt.Fprintf(logf, "# %s of project %s, cache key %s, %s\n", phase, proj.Name, key, start.Format(time.RFC3339))
	redact := func(s string) string {
		for _, sec := range secrets {
			if len(sec.Value) >= 4 {
				s = strings.ReplaceAll(s, sec.Value, "[redacted]")
			}
		}
		return s
	}
	var mu sync.Mutex
	var tail tailBuffer
	events := 0
	line := func(l string) {
		l = redact(l)
		mu.Lock()
		defer mu.Unlock()
		tail.Write([]byte(l + "\n"))
		fmt.Fprintln(logf, l)
		events++
		switch {
		case events <= maxEnvLineEvents:
			if len(l) > maxEnvLine {
				l = l[:maxEnvLine]
			}
			emit(systemEvent(api.SubtypeEnvironmentSetup, map[string]any{"phase": phase, "state": "output", "line": l}))
		case events == maxEnvLineEvents+1:
			emit(systemEvent(api.SubtypeEnvironmentSetup, map[string]any{"phase": phase, "state": "output",
				"line": fmt.Sprintf("[more output: see remotectl project env log %s]", proj.Name)}))
		}
	}
	env := map[string]string{}
	for _, s := range secrets {
		if s.Key != "" {
			env[s.Key] = s.Value
		}
	}
	maps.Copy(env, proxyEnv)
	if p.UID == 0 {
		env["HOME"] = "/root"
	}
	var uid *uint32
	if p.UID != 0 || p.GID != 0 {
		u := uint32(p.UID)
		uid = &u
	}
	code, _, err := p.envExec(ctx, c.Name, []string{"sh", "-c", script}, env, "/workspace", uid, line)
	dur := time.Since(start)
	mu.Lock()
	tailS := tail.String()
	mu.Unlock()
	if err == nil && code != 0 {
		err = fmt.Errorf("%w: %s of project %q exited %d: %s", ErrEnvironmentFailed, phase, proj.Name, code, lastBytes(tailS, 1024))
	}
	state, ready := api.EnvironmentReady, true
	if err != nil {
		state, ready = api.EnvironmentFailed, false
	}
	fmt.Fprintf(logf, "# exit %d after %s\n", code, dur.Round(time.Millisecond))
	p.setEnvStatus(proj.ID, func(s *api.EnvironmentStatus) {
		s.State, s.DurationMS, s.LogTail = state, dur.Milliseconds(), tailS
		s.ExitCode = &code
	})
	data := map[string]any{"phase": phase, "state": state, "exitCode": code, "cacheKey": key, "durationMs": dur.Milliseconds()}
	if !ready {
		data["error"] = err.Error()
	}
	emit(systemEvent(api.SubtypeEnvironmentSetup, data))
	return err
}

func lastBytes(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// capWriter writes at most n bytes to w, dropping the rest.
type capWriter struct {
	w io.Writer
	n int
}

func (c *capWriter) Write(b []byte) (int, error) {
	if c.n <= 0 {
		return len(b), nil
	}
	k := min(len(b), c.n)
	c.n -= k
	_, err := c.w.Write(b[:k])
	return len(b), err
}

// envExec runs argv in container with env (nothing else of the daemon's
// or the instance config's), cwd and user. With line set, its stdout and
// stderr go to line one line at a time; else its stdout (at most
// maxEnvScript+1 bytes) is returned.
func (p *Manager) envExec(ctx context.Context, container string, argv []string, env map[string]string, cwd string,
	uid *uint32, line func(string)) (int, []byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := lxdexec.ExecRequest{Command: argv, Env: env, Cwd: cwd, User: uid, Group: uid}
	if uid != nil {
		g := uint32(p.GID)
		req.Group = &g
	}
	ex, err := p.X.Exec(ctx, container, req)
	if err != nil {
		return 0, nil, fmt.Errorf("exec %s in %q: %w", argv[0], container, p.classify(err))
	}
	_ = ex.Stdin().Close()
	var out bytes.Buffer
	var wg sync.WaitGroup
	for i, r := range []io.Reader{ex.Stdout(), ex.Stderr()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if line == nil {
				if i == 0 {
					_, _ = io.Copy(&out, io.LimitReader(r, maxEnvScript+1))
				}
				_, _ = io.Copy(io.Discard, r)
				return
			}
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 64<<10)
			for sc.Scan() {
				line(strings.ToValidUTF8(sc.Text(), "?"))
			}
			_, _ = io.Copy(io.Discard, r)
		}()
	}
	wg.Wait()
	code, err := ex.Wait()
	if err != nil && !(errors.Is(err, lxdexec.ErrOperationFailed) && code > 0) {
		return code, nil, fmt.Errorf("exec %s in %q: %w", argv[0], container, p.classify(err))
	}
	return code, out.Bytes(), nil
}

// MarkBuilding sets proj's environment state to building
// (a rebuild was asked for and is about to start).
func (p *Manager) MarkBuilding(proj api.Project) bool {
	s := p.envOf(proj.ID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.status.State == api.EnvironmentBuilding {
		return false
	}
	now := time.Now().UTC()
	s.status = api.EnvironmentStatus{State: api.EnvironmentBuilding, CacheKey: s.status.CacheKey, LastRun: &now}
	return true
}

// Failed records that proj's environment could not be set up for a
// reason outside its scripts (its container not started): msg says why.
// A state other than building is left as it is.
func (p *Manager) Failed(proj api.Project, msg string) {
	p.setEnvStatus(proj.ID, func(s *api.EnvironmentStatus) {
		if s.State == api.EnvironmentBuilding {
			s.State, s.LogTail = api.EnvironmentFailed, msg
		}
	})
}
