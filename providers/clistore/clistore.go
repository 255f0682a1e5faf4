// Package clistore keeps provider CLIs (Claude Code, Codex) per provider
// and version under the daemon's state directory, each version a
// self-contained directory that a project container gets as a read-only
// LXD disk device:
//
//	<dir>/<provider>/<version>/   the CLI and whatever it needs to run
//	<dir>/<provider>/selected     the version new runs use
//
// Claude Code's version directory holds the native binary and the glibc
// libraries it loads (lib/), so it runs from a busybox image; Codex is a
// static musl binary with its helper tree (bin/, codex-path/,
// codex-resources/). Versions come from the npm registry (Install, which
// runs the host's npm) or from an npm tree already on disk (Import).
// Version directories are written once (built aside, then renamed) and
// never changed, so a container keeps running the version it mounted.
package clistore

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"remote/internal/lazyre"
	"remote/providers"
)

// ContainerRoot is where a version directory is mounted in a container:
// ContainerRoot/<provider>/<version>.
const ContainerRoot = "/opt/remote-cli"

// Errors of this package, tested with errors.Is.
var (
	// ErrBadVersion: the version is not a plain semantic version
	// (e.g. "2.1.328"); anything else ("../..", "latest") is refused.
	ErrBadVersion = errors.New("invalid cli version")
	// ErrUnknownProvider: the store keeps only Claude Code and Codex.
	ErrUnknownProvider = errors.New("provider has no cli in the store")
	// ErrUntested: the version is not the tested one and the caller did
	// not say it accepts that.
	ErrUntested = errors.New("cli version is not the tested version")
	// ErrNotInstalled: the version is not in the store.
	ErrNotInstalled = errors.New("cli version not installed")
	// ErrInstall: npm or the checks after it failed.
	ErrInstall = errors.New("cli install failed")
)

// versionRE is what a version must look like: digits, dots, and an
// optional pre-release of letters, digits, dots and dashes. No slash, no
// "..", no leading dot.
var versionRE = lazyre.New(`^[0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6}(-[0-9A-Za-z][0-9A-Za-z.-]{0,40})?$`)

// CheckVersion returns nil when v is a version the store accepts as a
// directory name.
func CheckVersion(v string) error {
	if !versionRE.MatchString(v) || strings.Contains(v, "..") {
		return fmt.Errorf("%w %q: want a version such as 2.1.328", ErrBadVersion, v)
	}
	return nil
}

// Spec is how one provider's CLI is found in an npm tree and laid out in
// its version directory.
type Spec struct {
	Provider providers.ProviderID
	Package  string // the npm package, e.g. @anthropic-ai/claude-code
	Tested   string // the tested version (providers.Tested*)
	// Entry is the executable's path inside the version directory.
	Entry string
	// Command is the name the CLI is run by (linked on the container's
	// PATH).
	Command string
	// tree is the directory of the npm tree copied into the version
	// directory, relative to node_modules; binary is the executable in
	// it, copied to Entry when tree is empty.
	tree, binary string
	// glibc: copy the ELF interpreter and the libraries the binary needs
	// into lib/.
	glibc bool
	// manifest is the JSON file (relative to node_modules) whose
	// "version" must be the version installed: checked without running
	// the downloaded binary (the daemon is root).
	manifest string
}

// Specs are the CLIs the store keeps.
var Specs = map[providers.ProviderID]Spec{
	providers.Claude: {
		Provider: providers.Claude, Package: "@anthropic-ai/claude-code", Tested: providers.TestedClaudeVersion,
		Entry: "claude", Command: "claude",
		binary: "@anthropic-ai/claude-code-linux-x64/claude", glibc: true,
		manifest: "@anthropic-ai/claude-code-linux-x64/package.json",
	},
	providers.Codex: {
		Provider: providers.Codex, Package: "@openai/codex", Tested: providers.TestedCodexVersion,
		Entry: "bin/codex", Command: "codex",
		tree:     "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl",
		manifest: "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-package.json",
	},
}

// SpecOf returns the spec of provider p.
func SpecOf(p providers.ProviderID) (Spec, error) {
	s, ok := Specs[p]
	if !ok {
		return Spec{}, fmt.Errorf("%w: %q (the store keeps claude and codex)", ErrUnknownProvider, p)
	}
	return s, nil
}

// Version is one installed version.
type Version struct {
	Provider providers.ProviderID
	Version  string
	// Dir is the version directory on the host.
	Dir string
	// Entry is the executable inside Dir (Spec.Entry); Command the name it
	// is run by.
	Entry, Command string
	// Glibc: Dir/lib holds the ELF interpreter and libraries the binary
	// needs, for containers without their own glibc.
	Glibc bool
}

// ContainerDir is where the version directory is mounted in a container.
func (v Version) ContainerDir() string {
	return ContainerRoot + "/" + string(v.Provider) + "/" + v.Version
}

// Store is the CLI store rooted at a directory.
type Store struct {
	dir string
	// NPM is the npm binary Install runs ("npm" on PATH when empty).
	NPM string
	// Registry, when set, is passed to npm as --registry.
	Registry string
	mu       sync.Mutex // serialises writers
}

// New returns the store rooted at dir (created on first install).
func New(dir string) *Store { return &Store{dir: dir} }

// Dir is the store's root directory.
func (s *Store) Dir() string { return s.dir }

// Installed returns provider p's versions, newest name last (sorted as
// strings), and the selected one ("" when none).
func (s *Store) Installed(p providers.ProviderID) (versions []string, selected string, err error) {
	spec, err := SpecOf(p)
	if err != nil {
		return nil, "", err
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, string(spec.Provider)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	for _, e := range ents {
		if e.IsDir() && CheckVersion(e.Name()) == nil {
			versions = append(versions, e.Name())
		}
	}
	slices.Sort(versions)
	if v, ok := s.Selected(p); ok {
		selected = v.Version
	}
	return versions, selected, nil
}

// Selected returns the version new runs of provider p use, if one is
// selected and installed.
func (s *Store) Selected(p providers.ProviderID) (Version, bool) {
	spec, err := SpecOf(p)
	if err != nil {
		return Version{}, false
	}
	b, err := os.ReadFile(filepath.Join(s.dir, string(p), "selected"))
	if err != nil {
		return Version{}, false
	}
	v, err := s.version(spec, strings.TrimSpace(string(b)))
	if err != nil {
		return Version{}, false
	}
	return v, true
}

// Get returns installed version v of provider p.
func (s *Store) Get(p providers.ProviderID, v string) (Version, error) {
	spec, err := SpecOf(p)
	if err != nil {
		return Version{}, err
	}
	return s.version(spec, v)
}

func (s *Store) version(spec Spec, v string) (Version, error) {
	if err := CheckVersion(v); err != nil {
		return Version{}, err
	}
	dir := filepath.Join(s.dir, string(spec.Provider), v)
	if fi, err := os.Lstat(filepath.Join(dir, spec.Entry)); err != nil || !fi.Mode().IsRegular() {
		return Version{}, fmt.Errorf("%w: %s %s", ErrNotInstalled, spec.Provider, v)
	}
	return Version{Provider: spec.Provider, Version: v, Dir: dir, Entry: spec.Entry, Command: spec.Command, Glibc: spec.glibc}, nil
}

// Select makes installed version v the one new runs of provider p use.
func (s *Store) Select(p providers.ProviderID, v string) (Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ver, err := s.Get(p, v)
	if err != nil {
		return Version{}, err
	}
	return ver, writeAtomic(filepath.Join(s.dir, string(p), "selected"), []byte(v+"\n"))
}

// InstallOptions tune Install and Import.
type InstallOptions struct {
	// Untested allows a version other than the tested one.
	Untested bool
	// Select makes the version the selected one once installed.
	Select bool
}

// Install fetches provider p's CLI version v (the tested version when v
// is empty) from the npm registry with the host's npm (scripts not run),
// checks that the fetched package's manifest names version v (nothing
// downloaded is executed on the host), and adds it to the store. An installed version is
// not fetched again.
func (s *Store) Install(ctx context.Context, p providers.ProviderID, v string, opts InstallOptions) (Version, error) {
	spec, v, err := s.check(p, v, opts)
	if err != nil {
		return Version{}, err
	}
	if ver, err := s.version(spec, v); err == nil {
		return s.finish(ver, opts)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, string(p)), 0o755); err != nil {
		return Version{}, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, string(p)), ".npm-")
	if err != nil {
		return Version{}, err
	}
	defer os.RemoveAll(tmp)
	npm := s.NPM
	if npm == "" {
		npm = "npm"
	}
	args := []string{"install", "--no-audit", "--no-fund", "--ignore-scripts", "--no-save", "--prefer-offline", "--prefix", tmp}
	if s.Registry != "" {
		args = append(args, "--registry", s.Registry)
	}
	args = append(args, spec.Package+"@"+v)
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Version{}, fmt.Errorf("%w: npm install %s@%s: %v: %s", ErrInstall, spec.Package, v, err, lastLines(out, 5))
	}
	return s.importTree(ctx, spec, v, filepath.Join(tmp, "node_modules"), opts)
}

// Import adds provider p's CLI version v from an npm tree already on disk
// (a node_modules directory, e.g. build/npm/node_modules), checking that
// its manifest names version v.
func (s *Store) Import(ctx context.Context, p providers.ProviderID, v, nodeModules string, opts InstallOptions) (Version, error) {
	spec, v, err := s.check(p, v, opts)
	if err != nil {
		return Version{}, err
	}
	if ver, err := s.version(spec, v); err == nil {
		return s.finish(ver, opts)
	}
	return s.importTree(ctx, spec, v, nodeModules, opts)
}

func (s *Store) check(p providers.ProviderID, v string, opts InstallOptions) (Spec, string, error) {
	spec, err := SpecOf(p)
	if err != nil {
		return Spec{}, "", err
	}
	if v == "" {
		v = spec.Tested
	}
	if err := CheckVersion(v); err != nil {
		return Spec{}, "", err
	}
	if v != spec.Tested && !opts.Untested {
		return Spec{}, "", fmt.Errorf("%w: %s %s (tested: %s; say -untested to install it anyway)", ErrUntested, p, v, spec.Tested)
	}
	return spec, v, nil
}

func (s *Store) finish(ver Version, opts InstallOptions) (Version, error) {
	if opts.Select {
		return s.Select(ver.Provider, ver.Version)
	}
	return ver, nil
}

// importTree builds the version directory aside, checks it, and renames
// it into place.
func (s *Store) importTree(ctx context.Context, spec Spec, v, nodeModules string, opts InstallOptions) (Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pdir := filepath.Join(s.dir, string(spec.Provider))
	if ver, err := s.version(spec, v); err == nil { // installed meanwhile
		if opts.Select {
			return ver, writeAtomic(filepath.Join(pdir, "selected"), []byte(v+"\n"))
		}
		return ver, nil
	}
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return Version{}, err
	}
	// The store's directories must be traversable for the mount's owner
	// mapping; the state dir itself stays private.
	_ = os.Chmod(s.dir, 0o755)
	_ = os.Chmod(pdir, 0o755)
	if got, err := manifestVersion(filepath.Join(nodeModules, filepath.FromSlash(spec.manifest))); err != nil || got != v {
		return Version{}, fmt.Errorf("%w: %s %s: the npm tree holds version %q (%v)", ErrInstall, spec.Provider, v, got, err)
	}
	tmp, err := os.MkdirTemp(pdir, ".build-")
	if err != nil {
		return Version{}, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Version{}, err
	}
	if spec.tree != "" {
		if err := copyTree(filepath.Join(nodeModules, filepath.FromSlash(spec.tree)), tmp); err != nil {
			return Version{}, fmt.Errorf("%w: %s %s: %v", ErrInstall, spec.Provider, v, err)
		}
	} else {
		if err := copyFile(filepath.Join(nodeModules, filepath.FromSlash(spec.binary)), filepath.Join(tmp, spec.Entry), 0o755); err != nil {
			return Version{}, fmt.Errorf("%w: %s %s: %v", ErrInstall, spec.Provider, v, err)
		}
	}
	entry := filepath.Join(tmp, spec.Entry)
	if spec.glibc {
		if err := copyGlibc(entry, filepath.Join(tmp, "lib")); err != nil {
			return Version{}, fmt.Errorf("%w: %s %s: libraries: %v", ErrInstall, spec.Provider, v, err)
		}
	}
	final := filepath.Join(pdir, v)
	if err := os.Rename(tmp, final); err != nil {
		return Version{}, err
	}
	ver, err := s.version(spec, v)
	if err != nil {
		return Version{}, err
	}
	if opts.Select {
		return ver, writeAtomic(filepath.Join(pdir, "selected"), []byte(v+"\n"))
	}
	return ver, nil
}

// manifestVersion reads the "version" of a package manifest.
func manifestVersion(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	var m struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Base(p), err)
	}
	return m.Version, nil
}

// libDirs are where the host's libraries are looked up.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// copyGlibc copies the ELF interpreter of bin and the shared libraries it
// needs (transitively, by soname) from the host into lib.
func copyGlibc(bin, lib string) error {
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(lib, 0o755); err != nil {
		return err
	}
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				f.Close()
				return err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	f.Close()
	if interp == "" {
		return errors.New("not a dynamically linked binary")
	}
	if err := copyFile(interp, filepath.Join(lib, filepath.Base(interp)), 0o755); err != nil {
		return err
	}
	seen := map[string]bool{filepath.Base(interp): true}
	queue := []string{bin}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		ef, err := elf.Open(cur)
		if err != nil {
			return err
		}
		needed, err := ef.ImportedLibraries()
		ef.Close()
		if err != nil {
			return err
		}
		for _, n := range needed {
			if seen[n] || strings.ContainsRune(n, '/') {
				continue
			}
			seen[n] = true
			src := ""
			for _, d := range libDirs {
				if _, err := os.Stat(filepath.Join(d, n)); err == nil {
					src = filepath.Join(d, n)
					break
				}
			}
			if src == "" {
				return fmt.Errorf("library %s not found on the host", n)
			}
			dst := filepath.Join(lib, n)
			if err := copyFile(src, dst, 0o755); err != nil {
				return err
			}
			queue = append(queue, dst)
		}
	}
	return nil
}

// copyTree copies the regular files, directories and relative symlinks
// of src into dst (which exists).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case rel == ".":
			return nil
		case d.IsDir():
			if err := os.Mkdir(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, 0o755) // whatever the umask
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if filepath.IsAbs(l) {
				return fmt.Errorf("%s: absolute symlink", p)
			}
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			return copyFile(p, target, mode)
		}
		return nil // devices, sockets: never in an npm tree
	})
}

// copyFile copies src (following symlinks) to a new file dst with mode.
func copyFile(src, dst string, mode os.FileMode) error {
	if real, err := filepath.EvalSymlinks(src); err == nil {
		src = real
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeAtomic(p string, b []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// lastLines returns the last n non-empty lines of out, for errors.
func lastLines(out []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
