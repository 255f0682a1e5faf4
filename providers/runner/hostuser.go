package runner

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"remote/providers"
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

// HostUser is who loose-chat agents run as on the host (S8).
type HostUser struct {
	Name     string
	UID, GID uint32
	Home     string
}

// hostUserLauncher runs every host command as one user: it sets the
// child's credentials and its HOME/USER/LOGNAME, leaving the rest of the
// (already filtered) environment alone.
type hostUserLauncher struct {
	inner providers.Launcher
	user  HostUser
}

// HostUserLauncher wraps inner so commands run as u. When u is the daemon's
// own user the credentials are left unset (no setuid needed).
func HostUserLauncher(inner providers.Launcher, u HostUser) providers.Launcher {
	return &hostUserLauncher{inner: inner, user: u}
}

var _ providers.Launcher = (*hostUserLauncher)(nil)

// Start runs cmd as the host user unless cmd already names a user.
func (l *hostUserLauncher) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	if cmd.UID == nil && int(l.user.UID) != os.Getuid() {
		uid, gid := l.user.UID, l.user.GID
		cmd.UID, cmd.GID = &uid, &gid
		// The daemon's own HOME/USER/LOGNAME are wrong for another user;
		// values configured explicitly for the provider are kept.
		for key, value := range map[string]string{"HOME": l.user.Home, "USER": l.user.Name, "LOGNAME": l.user.Name} {
			if cur, ok := lookupEnv(cmd.Env, key); !ok || cur == os.Getenv(key) {
				cmd.Env = setEnv(cmd.Env, key, value)
			}
		}
	}
	return l.inner.Start(ctx, cmd)
}

func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
