package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"remote/api"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
)

// Peer is the kernel's account of who is on the other end of a connection
// (SO_PEERCRED), read once when the connection is accepted.
type Peer struct {
	UID, GID uint32
	PID      int32
	// Allowed is the access decision taken from the credentials.
	Allowed bool
	// MayAssert says the peer may name any acting user in X-Remote-User:
	// root, the daemon's own uid and the configured frontends.
	MayAssert bool
	// Admin says the peer is an administrator: uid 0 or the daemon's own
	// uid, and not one of the configured frontends. Only a request that
	// also acts as the peer itself is an administrator's (see IsAdmin).
	Admin bool
	// Name is the login name the peer's uid maps to in the user database,
	// looked up for allowed peers that may not assert another user and for
	// administrators; NameErr says why there is none.
	Name    string
	NameErr error
	// Err says why the credentials could not be read, if they could not.
	Err error
}

type peerKey struct{}

// PeerFrom returns the connection's peer, or nil when the request did not
// arrive through the daemon's listener.
func PeerFrom(ctx context.Context) *Peer {
	p, _ := ctx.Value(peerKey{}).(*Peer)
	return p
}

// WithPeer returns ctx carrying p as the connection's peer, as the
// listener sets it: for route providers' tests of their access checks.
func WithPeer(ctx context.Context, p *Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// Access decides which peers may use the socket: root, the daemon's own
// uid, the listed uids and frontends, and members (primary or
// supplementary) of the listed gids. It also decides who may act for
// another user: root, the daemon's own uid and the frontends name the
// acting user in X-Remote-User; every other peer acts as its own login
// name.
type Access struct {
	UIDs []int
	GIDs []int
	// Frontends are the uids (remote-web's) that relay other users'
	// requests and so may assert any user; they may also connect.
	Frontends []int
	// groupsOf returns the group ids of uid (supplementary included); tests
	// replace it.
	groupsOf func(uid uint32) []int
	// nameOf returns the login name of uid; tests replace it.
	nameOf func(uid uint32) (string, error)
}

// Allows reports whether a peer with uid and primary gid may connect.
func (a Access) Allows(uid, gid uint32) bool {
	if a.MayAssert(uid) || slices.Contains(a.UIDs, int(uid)) {
		return true
	}
	if len(a.GIDs) == 0 {
		return false
	}
	if slices.Contains(a.GIDs, int(gid)) {
		return true
	}
	groups := a.groupsOf
	if groups == nil {
		groups = userGroups
	}
	for _, g := range groups(uid) {
		if slices.Contains(a.GIDs, g) {
			return true
		}
	}
	return false
}

// MayAssert reports whether a peer with uid may name any acting user in
// X-Remote-User.
func (a Access) MayAssert(uid uint32) bool {
	return uid == 0 || int(uid) == os.Getuid() || slices.Contains(a.Frontends, int(uid))
}

// loginName returns the user database's name for uid.
func (a Access) loginName(uid uint32) (string, error) {
	if a.nameOf != nil {
		return a.nameOf(uid)
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

func userGroups(uid uint32) []int {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil
	}
	var out []int
	for _, id := range ids {
		if n, err := strconv.Atoi(id); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// connContext reads SO_PEERCRED once per connection and keeps the peer
// under a typed key.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	p := &Peer{}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		p.Err = fmt.Errorf("connection from %s is not a Unix socket", c.RemoteAddr())
		return context.WithValue(ctx, peerKey{}, p)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		p.Err = fmt.Errorf("read peer credentials: %w", err)
		return context.WithValue(ctx, peerKey{}, p)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		credErr = err
	}
	if credErr != nil {
		p.Err = fmt.Errorf("read peer credentials: %w", credErr)
		return context.WithValue(ctx, peerKey{}, p)
	}
	p.UID, p.GID, p.PID = cred.Uid, cred.Gid, cred.Pid
	a := s.access.Load()
	p.Allowed = a.Allows(cred.Uid, cred.Gid)
	if !p.Allowed {
		s.log.Warn("refusing peer", "uid", cred.Uid, "gid", cred.Gid, "pid", cred.Pid)
		return context.WithValue(ctx, peerKey{}, p)
	}
	p.MayAssert = a.MayAssert(cred.Uid)
	p.Admin = (cred.Uid == 0 || int(cred.Uid) == os.Getuid()) && !slices.Contains(a.Frontends, int(cred.Uid))
	if !p.MayAssert || p.Admin {
		p.Name, p.NameErr = a.loginName(cred.Uid)
	}
	return context.WithValue(ctx, peerKey{}, p)
}

var errForbiddenPeer = &Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "this user may not use the remoted socket"}

var errBrowserOrigin = &Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
	Message: "requests carrying a browser Origin header must come through remote-web (" + api.HeaderFrontend + ")"}

// gate runs before any route: refused peers and bare browser requests get
// 403 and no handler sees them.
func (s *Server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := PeerFrom(r.Context())
		if p == nil || !p.Allowed {
			s.writeError(w, r, errForbiddenPeer)
			return
		}
		if r.Header.Get("Origin") != "" && r.Header.Get(api.HeaderFrontend) == "" {
			s.writeError(w, r, errBrowserOrigin)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// userName is what X-Remote-User may hold.
var userName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)

var errNoUser = &Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: api.HeaderUser + " header is required"}

// callerName returns the user r acts as. A peer that may assert (root, the
// daemon's uid, a frontend) names it in X-Remote-User; any other peer acts
// as its own login name, and a header naming someone else is refused.
func callerName(r *http.Request) (string, error) {
	name := r.Header.Get(api.HeaderUser)
	if name != "" && !userName.MatchString(name) {
		return "", errdefs.InvalidArgument("%s: invalid user name %q", api.HeaderUser, name)
	}
	p := PeerFrom(r.Context())
	if p == nil {
		return "", errForbiddenPeer
	}
	if p.MayAssert {
		if name == "" {
			return "", errNoUser
		}
		return name, nil
	}
	if p.NameErr != nil || !userName.MatchString(p.Name) {
		return "", &Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: fmt.Sprintf("uid %d has no usable login name in the user database, and a peer that is not root, the daemon's user or one of [daemon] frontend_uids acts as its own login name", p.UID)}
	}
	if name != "" && name != p.Name {
		return "", &Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: fmt.Sprintf("%s %q refused: uid %d (%s) may act only as itself; only root, the daemon's user and [daemon] frontend_uids may name another user", api.HeaderUser, name, p.UID, p.Name)}
	}
	return p.Name, nil
}

// IsAdmin reports whether r is an administrator acting as itself: its
// peer is root or the daemon's own uid (not a configured frontend), it
// carries no frontend mark (X-Remote-Frontend: remote-web relays its
// browser users' requests even when it runs as root), and X-Remote-User
// is absent or names the peer's own login name. Never a name alone: a
// browser user called "root" is not root.
func IsAdmin(r *http.Request) bool {
	p := PeerFrom(r.Context())
	if p == nil || !p.Allowed || !p.Admin || r.Header.Get(api.HeaderFrontend) != "" {
		return false
	}
	name := r.Header.Get(api.HeaderUser)
	return name == "" || (p.NameErr == nil && name == p.Name)
}

type userKey struct{}

// UserFrom returns the acting user of a request that passed a route with
// AccessUser (see callerName).
func UserFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}
