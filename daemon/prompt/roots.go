package prompt

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"remote/internal/errdefs"
	"remote/internal/hostfs"
	"remote/providers/runner"
)

// Roots is the set of directories loose chats may work in ([agent]
// allowed_roots), held as cleaned, symlink-resolved absolute paths, and
// the host user whose rights Check uses.
type Roots struct {
	dirs []string
	user hostfs.User // zero: the daemon's own rights
	who  string      // the user's name, for messages
}

// NewUserRoots is NewRoots for the host user u, whose rights Check then
// uses (as root the daemon could see paths u cannot, and say so).
func NewUserRoots(dirs []string, u runner.HostUser) Roots {
	r := NewRoots(dirs, u.Home)
	r.user, r.who = hostfs.User{UID: u.UID, GID: u.GID}, u.Name
	return r
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

// Check returns the resolved cwd when it is a directory the host user can
// enter (resolved with that user's rights, see hostfs.User.EnterDir)
// inside one of the roots. Every other case — missing, not a directory,
// not searchable by the user, outside the roots — is one bad_request
// message, so the answer reveals nothing the user could not see itself.
func (r Roots) Check(cwd string) (string, error) {
	if !filepath.IsAbs(cwd) {
		return "", errdefs.InvalidArgument("cwd: %q is not an absolute path", cwd)
	}
	real, err := r.user.EnterDir(filepath.Clean(cwd))
	if err == nil {
		for _, root := range r.dirs {
			if real == root || strings.HasPrefix(real, strings.TrimSuffix(root, "/")+"/") {
				return real, nil
			}
		}
	}
	who := r.who
	if who == "" {
		who = "the host user"
	} else {
		who = "user " + strconv.Quote(who)
	}
	return "", errdefs.InvalidArgument("cwd: %q is not a directory %s may enter inside the allowed roots (%s)", cwd, who, strings.Join(r.dirs, ", "))
}
