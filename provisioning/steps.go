package provisioning

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/internal/errdefs"
	"remote/internal/hostfs"
	"remote/internal/keyed"
	"remote/internal/revert"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/clistore"
	"remote/provisioning/clidevice"
)

//go:embed scheduled-tasks.md
var scheduleSkillDoc []byte

// StepsOptions configure the built-in provisioning steps.
type StepsOptions struct {
	LXD       LXD
	Providers map[providers.ProviderID]ProviderSetup
	// InstructionsDir holds the shared instructions (*.md, concatenated in
	// name order); empty publishes none.
	InstructionsDir string
	// SkillsDir holds one folder per skill; empty publishes none.
	SkillsDir string
	// ScheduleDir holds the scheduled-tasks skill and its helper; empty
	// publishes a built-in SKILL.md.
	ScheduleDir string
	// UID and GID own everything published for the container user.
	UID, GID int
	// HostUser is whose credential files are pushed and synced back; they
	// are read and written with that user's rights (the daemon's own when
	// zero) beneath HostHome, its home directory.
	HostUser hostfs.User
	HostHome string
	Logger   hclog.Logger
	// CLIStore, when set, gives containers the selected store version of
	// each provider whose setup names a StoreCLI (see ensureStoreCLI);
	// CLIStorePush pushes it instead of mounting it (LXD is remote).
	CLIStore     CLIStore
	CLIStorePush bool
}

// Steps is the built-in implementation of every provisioning dependency.
// Each step is idempotent and skipped when the content it would publish
// is already there (compared by hash, per container identity).
type Steps struct {
	opts StepsOptions
	log  hclog.Logger

	mu        sync.Mutex
	published map[string]string // uuid \x00 path → content hash
	install   *keyed.Flight
	store     *clidevice.Device // the CLI store's mounts and pushes
}

// NewDependencies returns the six provisioning dependencies, all backed by
// one Steps.
func NewDependencies(opts StepsOptions) (Dependencies, *Steps) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Steps{opts: opts, log: opts.Logger, published: map[string]string{}, install: keyed.NewFlight()}
	s.store = &clidevice.Device{LXD: opts.LXD, Log: opts.Logger, Classify: classify, Run: s.run,
		PushHostFile: func(ctx context.Context, container, host, dst string, mode fs.FileMode) error {
			return s.pushHostFile(ctx, container, File{Host: host, Container: dst, Mode: mode}, 0, 0)
		}}
	return Dependencies{CLI: s, Credentials: s, Workspace: s, Assets: s, Browser: s, Lifecycle: s}, s
}

var (
	_ CLIProvisioner        = (*Steps)(nil)
	_ CredentialProvisioner = (*Steps)(nil)
	_ WorkspacePublisher    = (*Steps)(nil)
	_ AssetPublisher        = (*Steps)(nil)
	_ BrowserPolicy         = (*Steps)(nil)
	_ Lifecycle             = (*Steps)(nil)
)

func (s *Steps) setup(p providers.ProviderID) (ProviderSetup, error) {
	st, ok := s.opts.Providers[p]
	if !ok {
		return ProviderSetup{}, fmt.Errorf("%w %q", ErrUnknownProvider, p)
	}
	return st, nil
}

// cached reports whether key was recorded with hash for container c.
func (s *Steps) cached(c Container, key, hash string) bool {
	if c.UUID == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published[c.UUID+"\x00"+key] == hash
}

func (s *Steps) remember(c Container, key, hash string) {
	if c.UUID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if hash == "" {
		delete(s.published, c.UUID+"\x00"+key)
		return
	}
	s.published[c.UUID+"\x00"+key] = hash
}

// EnsureCLI runs the provider's check command and installs the CLI when it
// fails. Concurrent calls for one container and provider install once.
func (s *Steps) EnsureCLI(ctx context.Context, c Container, p providers.ProviderID) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	if handled, err := s.ensureStoreCLI(ctx, c, p, st); handled {
		return err
	}
	if len(st.Check) == 0 || s.cached(c, "cli/"+string(p), "ok") {
		return nil
	}
	return s.install.Do(c.Name+"/"+c.UUID+"/"+string(p), func() error {
		if s.cached(c, "cli/"+string(p), "ok") {
			return nil
		}
		code, _, err := s.run(ctx, c.Name, st.Check)
		if err != nil {
			return err
		}
		if code == 0 {
			s.remember(c, "cli/"+string(p), "ok")
			return nil
		}
		s.log.Info("installing provider cli", "container", c.Name, "provider", p)
		if err := s.installCLI(ctx, c, st); err != nil {
			return fmt.Errorf("install %s cli in %q: %w", p, c.Name, err)
		}
		code, tail, err := s.run(ctx, c.Name, st.Check)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("%w: %s in %q: %q exited %d after install: %s", ErrCLIUnavailable, p, c.Name, strings.Join(st.Check, " "), code, tail)
		}
		s.remember(c, "cli/"+string(p), "ok")
		return nil
	})
}

func (s *Steps) installCLI(ctx context.Context, c Container, st ProviderSetup) error {
	if len(st.InstallFiles) > 0 {
		var rev revert.Reverter
		defer rev.Fail()
		for _, f := range st.InstallFiles {
			if err := s.pushHostFile(ctx, c.Name, f, 0, 0); err != nil {
				return err
			}
			target := f.Container
			rev.Add(func() { _ = s.opts.LXD.DeleteFile(context.WithoutCancel(ctx), c.Name, target) })
		}
		rev.Success()
		return nil
	}
	if len(st.InstallCommand) == 0 {
		return fmt.Errorf("%w: no install method configured", ErrCLIUnavailable)
	}
	code, tail, err := s.run(ctx, c.Name, st.InstallCommand)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%q exited %d: %s", strings.Join(st.InstallCommand, " "), code, tail)
	}
	return nil
}

// pushHostFile streams a host file (or inline content) into the container.
func (s *Steps) pushHostFile(ctx context.Context, container string, f File, uid, gid int) error {
	mode := f.Mode
	if mode == 0 {
		mode = 0o644
	}
	var r io.Reader = bytes.NewReader(f.Content)
	if f.Host != "" {
		fh, err := openRegular(f.Host)
		if err != nil {
			return fmt.Errorf("open host file for %q: %w", f.Container, err)
		}
		defer fh.Close()
		r = fh
	}
	err := s.opts.LXD.PushFile(ctx, container, f.Container, r, lxdexec.FileOptions{Mode: mode, UID: uid, GID: gid, MkdirParents: true})
	if err != nil {
		return fmt.Errorf("push %q into %q: %w", f.Container, container, classify(err))
	}
	return nil
}

// maxCapture bounds the output kept from a provisioning command.
const maxCapture = 4 << 10

// run executes argv in the container and returns its exit code and the
// tail of its combined output (bounded).
func (s *Steps) run(ctx context.Context, container string, argv []string) (int, string, error) {
	ex, err := s.opts.LXD.Exec(ctx, container, lxdexec.ExecRequest{Command: argv})
	if err != nil {
		return 0, "", fmt.Errorf("exec %q in %q: %w", argv[0], container, classify(err))
	}
	_ = ex.Stdin().Close()
	var out tailBuffer
	var wg sync.WaitGroup
	wg.Add(2)
	var mu sync.Mutex
	for _, r := range []io.Reader{ex.Stdout(), ex.Stderr()} {
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					mu.Lock()
					out.Write(buf[:n])
					mu.Unlock()
				}
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	code, err := ex.Wait()
	if err != nil && !(errors.Is(err, lxdexec.ErrOperationFailed) && code > 0) {
		// A failed operation with an exit code (127: command not found)
		// is an ordinary non-zero exit.
		return 0, "", fmt.Errorf("exec %q in %q: %w", argv[0], container, classify(err))
	}
	return code, strings.TrimSpace(out.String()), nil
}

// tailBuffer keeps the last maxCapture bytes written.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) {
	t.b = append(t.b, p...)
	if len(t.b) > maxCapture {
		t.b = append(t.b[:0], t.b[len(t.b)-maxCapture:]...)
	}
}

func (t *tailBuffer) String() string { return string(t.b) }

// publish pushes content to path unless the same content was already
// published into this container.
func (s *Steps) publish(ctx context.Context, c Container, p string, content []byte, mode os.FileMode) error {
	h := hashOf(content)
	if s.cached(c, p, h) {
		return nil
	}
	if err := s.pushHostFile(ctx, c.Name, File{Content: content, Container: p, Mode: mode}, s.opts.UID, s.opts.GID); err != nil {
		return err
	}
	s.remember(c, p, h)
	return nil
}

// PublishAssets pushes the provider profile's non-secret runtime files.
func (s *Steps) PublishAssets(ctx context.Context, c Container, p providers.ProviderID) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	return s.publishFiles(ctx, c, st.Assets)
}

func (s *Steps) publishFiles(ctx context.Context, c Container, files []File) error {
	for _, f := range files {
		content := f.Content
		if f.Host != "" {
			b, err := readBounded(f.Host, maxAssetBytes)
			if err != nil {
				return err
			}
			content = b
		}
		if err := s.publish(ctx, c, f.Container, content, f.Mode); err != nil {
			return err
		}
	}
	return nil
}

// ApplyBrowser publishes the browser tool's configuration when enabled
// and the provider has one, and removes it otherwise.
func (s *Steps) ApplyBrowser(ctx context.Context, c Container, p providers.ProviderID, enabled bool) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	if enabled {
		return s.publishFiles(ctx, c, st.BrowserAssets)
	}
	for _, f := range st.BrowserAssets {
		if s.cached(c, f.Container, "absent") {
			continue
		}
		if err := s.opts.LXD.DeleteFile(ctx, c.Name, f.Container); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
			return fmt.Errorf("remove browser config %q from %q: %w", f.Container, c.Name, classify(err))
		}
		s.remember(c, f.Container, "absent")
	}
	return nil
}

// EnableAutostart sets boot.autostart=true unless it already is.
func (s *Steps) EnableAutostart(ctx context.Context, c Container) error {
	if c.Config["boot.autostart"] == "true" {
		return nil
	}
	err := s.opts.LXD.UpdateInstance(ctx, c.Name, lxdexec.InstancePatch{Config: map[string]string{"boot.autostart": "true"}}, "")
	if err != nil {
		return fmt.Errorf("set boot.autostart on %q: %w", c.Name, classify(err))
	}
	return nil
}

// maxAssetBytes bounds one published instruction, asset or skill file.
const maxAssetBytes = 8 << 20

// openRegular opens an operator-configured host file (an install file or
// an asset: the path is the operator's, symlinks included) and refuses
// anything but a regular file, without blocking on a FIFO.
func openRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w: not a regular file", p, hostfs.ErrUnsafe)
	}
	return f, nil
}

// readBounded reads an operator-configured host file (see openRegular) of
// at most limit bytes.
func readBounded(p string, limit int64) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", p, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read %q: larger than %d bytes", p, limit)
	}
	return b, nil
}

// containerJoin joins container path elements.
func containerJoin(elem ...string) string { return path.Join(elem...) }

// CLIStore is the daemon's CLI store as provisioning uses it
// (*clistore.Store): the version of a CLI new runs get.
type CLIStore interface {
	Selected(p providers.ProviderID) (clistore.Version, bool)
}

var _ CLIStore = (*clistore.Store)(nil)

// ensureStoreCLI gives container c the selected store version of the
// provider's CLI, when the setup uses the store and a version is
// selected: as read-only LXD disk devices (the version directory at
// /opt/remote-cli/<provider>/<version>, plus the store's glibc when the
// container has none) and a link on the PATH. Where LXD cannot mount the
// host path (a remote LXD, a cluster member without it) the version
// directory is pushed to the same paths instead. handled is false when
// the store does not apply (the setup's own check/install then run).
func (s *Steps) ensureStoreCLI(ctx context.Context, c Container, p providers.ProviderID, st ProviderSetup) (handled bool, err error) {
	if st.StoreCLI == "" || s.opts.CLIStore == nil {
		return false, nil
	}
	ver, ok := s.opts.CLIStore.Selected(st.StoreCLI)
	if !ok {
		return false, nil
	}
	key, mark := "cli/"+string(p), "store:"+string(ver.Provider)+"/"+ver.Version
	if s.cached(c, key, mark) {
		return true, nil
	}
	return true, s.install.Do(c.Name+"/"+c.UUID+"/"+string(p), func() error {
		if s.cached(c, key, mark) {
			return nil
		}
		if !s.opts.CLIStorePush {
			start := time.Now()
			stale, err := s.store.Mount(ctx, clidevice.Container{Name: c.Name}, ver)
			if err == nil {
				s.log.Debug("cli store mounted", "container", c.Name, "provider", p, "version", ver.Version, "duration", time.Since(start))
				// Earlier versions' mounts go once no process runs from
				// them; until then every preparation looks again.
				if s.store.UnmountStale(ctx, clidevice.Container{Name: c.Name}, stale) {
					s.remember(c, key, mark)
				}
				return nil
			}
			if errdefs.IsUnavailable(err) || !isLXDError(err) {
				return err
			}
			// LXD answered: the host path is not usable there (remote
			// LXD, cluster member without it). Push instead.
			s.log.Warn("cli store not mountable, pushing the cli instead", "container", c.Name, "provider", p, "error", err)
		}
		if err := s.store.Push(ctx, clidevice.Container{Name: c.Name}, ver); err != nil {
			return fmt.Errorf("install %s cli %s in %q: %w", p, ver.Version, c.Name, err)
		}
		s.remember(c, key, mark)
		return nil
	})
}

func isLXDError(err error) bool {
	var lerr *lxdexec.Error
	return errors.As(err, &lerr)
}
