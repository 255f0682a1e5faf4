package provisioning

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/clistore"
)

// CLIStore is the daemon's CLI store as provisioning uses it
// (*clistore.Store): the version of a CLI new runs get.
type CLIStore interface {
	Selected(p providers.ProviderID) (clistore.Version, bool)
}

var _ CLIStore = (*clistore.Store)(nil)

// Container paths the store's glibc is mounted at, for containers without
// their own (busybox): the ELF interpreter and the library directory the
// interpreter searches by default.
const (
	storeInterp = "/lib64/ld-linux-x86-64.so.2"
	storeLibDir = "/lib/x86_64-linux-gnu"
	// storeBinDir holds the link to the selected version's executable, on
	// the PATH of every LXD exec.
	storeBinDir = "/usr/local/bin"
)

// Device names of the store's mounts.
func storeDevice(v clistore.Version) string {
	return "remote-cli-" + string(v.Provider) + "-" + v.Version
}

const (
	storeLibDevice    = "remote-cli-glibc"
	storeInterpDevice = "remote-cli-ld"
)

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
	return true, s.install.do(c.Name+"/"+c.UUID+"/"+string(p), func() error {
		if s.cached(c, key, mark) {
			return nil
		}
		if !s.opts.CLIStorePush {
			start := time.Now()
			stale, err := s.mountStore(ctx, c, ver)
			if err == nil {
				s.log.Debug("cli store mounted", "container", c.Name, "provider", p, "version", ver.Version, "duration", time.Since(start))
				// Earlier versions' mounts go once no process runs from
				// them; until then every preparation looks again.
				if s.unmountStale(ctx, c, stale) {
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
		if err := s.pushStore(ctx, c, ver); err != nil {
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

// needsGlibc reports whether the version needs the store's glibc in c:
// the container has no ELF interpreter of its own at the standard path,
// or already has the store's mounted.
func (s *Steps) needsGlibc(ctx context.Context, c Container, inst *lxdexec.Instance, v clistore.Version) (bool, error) {
	if !v.Glibc {
		return false, nil
	}
	if inst != nil && inst.Devices[storeInterpDevice] != nil {
		return true, nil
	}
	rc, _, err := s.opts.LXD.PullFile(ctx, c.Name, storeInterp)
	if err == nil {
		rc.Close()
		return false, nil
	}
	if errors.Is(err, lxdexec.ErrNotFound) {
		return true, nil
	}
	return false, fmt.Errorf("look for %s in %q: %w", storeInterp, c.Name, classify(err))
}

// mountStore adds (or updates) the read-only disk devices in one update
// and links the executable.
// It returns the devices of the provider's other versions (stale).
func (s *Steps) mountStore(ctx context.Context, c Container, v clistore.Version) (stale map[string]string, err error) {
	inst, etag, err := s.opts.LXD.Instance(ctx, c.Name)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", c.Name, classify(err))
	}
	prefix := "remote-cli-" + string(v.Provider) + "-"
	for name, d := range inst.Devices {
		if strings.HasPrefix(name, prefix) && name != storeDevice(v) && d["path"] != "" {
			if stale == nil {
				stale = map[string]string{}
			}
			stale[name] = d["path"]
		}
	}
	want := map[string]map[string]string{
		storeDevice(v): disk(v.Dir, v.ContainerDir()),
	}
	glibc, err := s.needsGlibc(ctx, c, inst, v)
	if err != nil {
		return nil, err
	}
	if glibc {
		want[storeLibDevice] = disk(filepath.Join(v.Dir, "lib"), storeLibDir)
		want[storeInterpDevice] = disk(filepath.Join(v.Dir, "lib", path.Base(storeInterp)), storeInterp)
	}
	patch := map[string]map[string]string{}
	for name, d := range want {
		if !sameDevice(inst.Devices[name], d) {
			patch[name] = d
		}
	}
	if len(patch) > 0 {
		if err := s.opts.LXD.UpdateInstance(ctx, c.Name, lxdexec.InstancePatch{Devices: patch}, etag); err != nil {
			return nil, fmt.Errorf("mount cli store %s %s in %q: %w", v.Provider, v.Version, c.Name, classify(err))
		}
	}
	return stale, s.linkStore(ctx, c, v)
}

// deviceRemover is the LXD ability unmountStale needs (*lxdexec.Client,
// *Conn); without it stale mounts stay until the container is recreated.
type deviceRemover interface {
	RemoveDevices(ctx context.Context, name string, devices ...string) error
}

// unmountStale removes the stale version mounts (device → container path)
// no process in the container runs from (by /proc/<pid>/exe); a run that
// started on an earlier version keeps it. It reports whether none is
// left. Failures are logged, never fatal: a stale mount costs nothing.
func (s *Steps) unmountStale(ctx context.Context, c Container, stale map[string]string) bool {
	if len(stale) == 0 {
		return true
	}
	rm, ok := s.opts.LXD.(deviceRemover)
	if !ok {
		return true
	}
	code, out, err := s.run(ctx, c.Name, []string{"sh", "-c", `for e in /proc/[0-9]*/exe; do readlink "$e"; done 2>/dev/null; true`})
	if err != nil || code != 0 {
		s.log.Warn("cli store: cannot list the container's processes", "container", c.Name, "exit", code, "error", err)
		return false
	}
	var unused []string
	for name, dir := range stale {
		if !strings.Contains("\n"+out+"\n", "\n"+dir+"/") {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		if err := rm.RemoveDevices(ctx, c.Name, unused...); err != nil {
			s.log.Warn("cli store: removing earlier versions' mounts", "container", c.Name, "devices", unused, "error", err)
			return false
		}
		s.log.Info("cli store: earlier versions unmounted", "container", c.Name, "devices", unused)
	}
	return len(unused) == len(stale)
}

func disk(source, target string) map[string]string {
	return map[string]string{"type": "disk", "source": source, "path": target, "readonly": "true"}
}

func sameDevice(have, want map[string]string) bool {
	if have == nil {
		return false
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// linkStore points /usr/local/bin/<command> at the version's executable:
// the next run finds the new version on its PATH; a running one keeps the
// file it started (its version stays mounted).
func (s *Steps) linkStore(ctx context.Context, c Container, v clistore.Version) error {
	link := storeBinDir + "/" + v.Command
	target := v.ContainerDir() + "/" + v.Entry
	push := func() error {
		return s.opts.LXD.PushFile(ctx, c.Name, link, strings.NewReader(target),
			lxdexec.FileOptions{Type: lxdexec.FileTypeSymlink, MkdirParents: true})
	}
	if err := push(); err != nil {
		// Something is there already (a file of an older push install,
		// the previous link): replace it.
		if err := s.opts.LXD.DeleteFile(ctx, c.Name, link); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
			return fmt.Errorf("replace %s in %q: %w", link, c.Name, classify(err))
		}
		if err := push(); err != nil {
			return fmt.Errorf("link %s in %q: %w", link, c.Name, classify(err))
		}
	}
	return nil
}

// pushStore copies the version directory to the paths the devices would
// mount it at (the push path, for LXD servers that cannot see the store).
func (s *Steps) pushStore(ctx context.Context, c Container, v clistore.Version) error {
	glibc, err := s.needsGlibc(ctx, c, nil, v)
	if err != nil {
		return err
	}
	err = filepath.WalkDir(v.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(v.Dir, p)
		dst := path.Join(v.ContainerDir(), filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return s.opts.LXD.PushFile(ctx, c.Name, dst, strings.NewReader(l), lxdexec.FileOptions{Type: lxdexec.FileTypeSymlink, MkdirParents: true})
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return s.pushHostFile(ctx, c.Name, File{Host: p, Container: dst, Mode: fi.Mode().Perm()}, 0, 0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if glibc {
		libs, err := os.ReadDir(filepath.Join(v.Dir, "lib"))
		if err != nil {
			return err
		}
		for _, l := range libs {
			dst := storeLibDir + "/" + l.Name()
			if l.Name() == path.Base(storeInterp) {
				dst = storeInterp
			}
			if err := s.pushHostFile(ctx, c.Name, File{Host: filepath.Join(v.Dir, "lib", l.Name()), Container: dst, Mode: 0o755}, 0, 0); err != nil {
				return err
			}
		}
	}
	return s.linkStore(ctx, c, v)
}
