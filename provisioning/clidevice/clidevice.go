package clidevice

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"remote/lxdexec"
	"remote/providers/clistore"
)

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

// needsGlibc reports whether the version needs the store's glibc in c:
// the container has no ELF interpreter of its own at the standard path,
// or already has the store's mounted.
func (s *Device) needsGlibc(ctx context.Context, c Container, inst *lxdexec.Instance, v clistore.Version) (bool, error) {
	if !v.Glibc {
		return false, nil
	}
	if inst != nil && inst.Devices[storeInterpDevice] != nil {
		return true, nil
	}
	rc, _, err := s.LXD.PullFile(ctx, c.Name, storeInterp)
	if err == nil {
		rc.Close()
		return false, nil
	}
	if errors.Is(err, lxdexec.ErrNotFound) {
		return true, nil
	}
	return false, fmt.Errorf("look for %s in %q: %w", storeInterp, c.Name, s.Classify(err))
}

// Mount adds (or updates) the read-only disk devices in one update
// and links the executable.
// It returns the devices of the provider's other versions (stale).
func (s *Device) Mount(ctx context.Context, c Container, v clistore.Version) (stale map[string]string, err error) {
	inst, etag, err := s.LXD.Instance(ctx, c.Name)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", c.Name, s.Classify(err))
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
		if err := s.LXD.UpdateInstance(ctx, c.Name, lxdexec.InstancePatch{Devices: patch}, etag); err != nil {
			return nil, fmt.Errorf("mount cli store %s %s in %q: %w", v.Provider, v.Version, c.Name, s.Classify(err))
		}
	}
	return stale, s.linkStore(ctx, c, v)
}

// Remover is the LXD ability UnmountStale needs (*lxdexec.Client,
// *lxdconn.Conn); without it stale mounts stay until the container is
// recreated.
type Remover interface {
	RemoveDevices(ctx context.Context, name string, devices ...string) error
}

// UnmountStale removes the stale version mounts (device → container path)
// no process in the container runs from (by /proc/<pid>/exe); a run that
// started on an earlier version keeps it. It reports whether none is
// left. Failures are logged, never fatal: a stale mount costs nothing.
func (s *Device) UnmountStale(ctx context.Context, c Container, stale map[string]string) bool {
	if len(stale) == 0 {
		return true
	}
	rm, ok := s.LXD.(Remover)
	if !ok {
		return true
	}
	code, out, err := s.Run(ctx, c.Name, []string{"sh", "-c", `for e in /proc/[0-9]*/exe; do readlink "$e"; done 2>/dev/null; true`})
	if err != nil || code != 0 {
		s.Log.Warn("cli store: cannot list the container's processes", "container", c.Name, "exit", code, "error", err)
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
			s.Log.Warn("cli store: removing earlier versions' mounts", "container", c.Name, "devices", unused, "error", err)
			return false
		}
		s.Log.Info("cli store: earlier versions unmounted", "container", c.Name, "devices", unused)
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
func (s *Device) linkStore(ctx context.Context, c Container, v clistore.Version) error {
	link := storeBinDir + "/" + v.Command
	target := v.ContainerDir() + "/" + v.Entry
	push := func() error {
		return s.LXD.PushFile(ctx, c.Name, link, strings.NewReader(target),
			lxdexec.FileOptions{Type: lxdexec.FileTypeSymlink, MkdirParents: true})
	}
	if err := push(); err != nil {
		// Something is there already (a file of an older push install,
		// the previous link): replace it.
		if err := s.LXD.DeleteFile(ctx, c.Name, link); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
			return fmt.Errorf("replace %s in %q: %w", link, c.Name, s.Classify(err))
		}
		if err := push(); err != nil {
			return fmt.Errorf("link %s in %q: %w", link, c.Name, s.Classify(err))
		}
	}
	return nil
}

// Push copies the version directory to the paths the devices would
// mount it at (the push path, for LXD servers that cannot see the store).
func (s *Device) Push(ctx context.Context, c Container, v clistore.Version) error {
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
			return s.LXD.PushFile(ctx, c.Name, dst, strings.NewReader(l), lxdexec.FileOptions{Type: lxdexec.FileTypeSymlink, MkdirParents: true})
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return s.PushHostFile(ctx, c.Name, p, dst, fi.Mode().Perm())
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
			if err := s.PushHostFile(ctx, c.Name, filepath.Join(v.Dir, "lib", l.Name()), dst, 0o755); err != nil {
				return err
			}
		}
	}
	return s.linkStore(ctx, c, v)
}
