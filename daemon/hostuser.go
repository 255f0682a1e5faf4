package daemon

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// LookupHostUser resolves the [agent] host_user name; "" is the daemon's
// own user.
func LookupHostUser(name string) (HostUser, error) {
	var u *user.User
	var err error
	if name == "" {
		u, err = user.LookupId(strconv.Itoa(os.Getuid()))
	} else {
		u, err = user.Lookup(name)
	}
	if err != nil {
		return HostUser{}, fmt.Errorf("look up host user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return HostUser{}, fmt.Errorf("host user %q has a non-numeric uid %q or gid %q", u.Username, u.Uid, u.Gid)
	}
	return HostUser{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}, nil
}

// Roots is the set of directories loose chats may work in ([agent]
// allowed_roots), held as cleaned, symlink-resolved absolute paths.
type Roots struct {
	dirs []string
}

// NewRoots resolves dirs; an empty list means the host user's home and
// /tmp. Roots that do not exist are kept as cleaned paths so they still
// match once created.
func NewRoots(dirs []string, hostHome string) Roots {
	if len(dirs) == 0 {
		dirs = []string{hostHome, os.TempDir()}
	}
	var r Roots
	for _, d := range dirs {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		r.dirs = append(r.dirs, resolvePath(d))
	}
	return r
}

// Dirs lists the resolved roots.
func (r Roots) Dirs() []string { return append([]string(nil), r.dirs...) }

func resolvePath(p string) string {
	p = filepath.Clean(p)
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

// Check returns the resolved cwd when it is an existing directory inside
// one of the roots, or a bad_request error naming it.
func (r Roots) Check(cwd string) (string, error) {
	if !filepath.IsAbs(cwd) {
		return "", BadRequest("cwd: %q is not an absolute path", cwd)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(cwd))
	if err != nil {
		return "", BadRequest("cwd: %q does not exist", cwd)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", BadRequest("cwd: %q is not a directory", cwd)
	}
	for _, root := range r.dirs {
		if real == root || strings.HasPrefix(real, strings.TrimSuffix(root, "/")+"/") {
			return real, nil
		}
	}
	return "", BadRequest("cwd: %q is outside the allowed roots (%s)", cwd, strings.Join(r.dirs, ", "))
}

// uidString formats an id for messages.
func uidString(id uint32) string { return strconv.FormatUint(uint64(id), 10) }
