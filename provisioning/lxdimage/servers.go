package lxdimage

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/lxdexec"
)

// The protocols an image server may speak (LXD's source protocol names).
const (
	ProtocolSimpleStreams = "simplestreams"
	ProtocolLXD           = "lxd"
)

// Server is one image server the operator configured
// ([lxd.image_servers."<name>"]): the only place its URL comes from. A
// user names the server, never a URL.
type Server struct {
	// URL is https://host[:port][/path] of the server.
	URL string
	// Protocol is ProtocolSimpleStreams ("" means it) or ProtocolLXD.
	Protocol string
	// Certificate is the PEM of the server's TLS certificate, pinned: the
	// daemon and LXD accept that certificate only. "" trusts the
	// system's certificate authorities.
	Certificate string
}

func (s Server) protocol() string {
	if s.Protocol == "" {
		return ProtocolSimpleStreams
	}
	return s.Protocol
}

// Ref is a project's image: a local alias or fingerprint (Server "") or
// Alias on the configured image server Server ("<server>:<alias>").
type Ref struct {
	Server string
	Alias  string
}

func (r Ref) String() string {
	if r.Server == "" {
		return r.Alias
	}
	return r.Server + ":" + r.Alias
}

var (
	// serverNameRE is what an image server's name may be (no ':').
	serverNameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// refAliasRE is what an alias (local, or on a server: "debian/12")
	// or a fingerprint may be.
	refAliasRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._/+-]{0,127}$`)
)

// ErrBadRef means an image reference is malformed (InvalidArgument).
var ErrBadRef = errdefs.New(errdefs.ErrInvalidArgument, "invalid image")

// ParseRef parses a project's image: "alias", "fingerprint" or
// "<server>:<alias>". A URL ("https://host/…") is refused: an image server
// is named by its configured name, so a user never makes the daemon or
// LXD fetch from an address of theirs.
func ParseRef(s string) (Ref, error) {
	if strings.Contains(s, "://") {
		return Ref{}, fmt.Errorf("%w %q: an image server is named by its [lxd.image_servers] name (\"<server>:<alias>\"), never given by URL", ErrBadRef, s)
	}
	server, alias, remote := strings.Cut(s, ":")
	if !remote {
		server, alias = "", s
	} else if !serverNameRE.MatchString(server) {
		return Ref{}, fmt.Errorf("%w %q: %q is not an image server name", ErrBadRef, s, server)
	}
	if !refAliasRE.MatchString(alias) || strings.Contains(alias, "..") || strings.HasSuffix(alias, "/") {
		return Ref{}, fmt.Errorf("%w %q: want an alias or fingerprint, or <server>:<alias> (letters, digits, '.', '_', '/', '+', '-')", ErrBadRef, s)
	}
	return Ref{Server: server, Alias: alias}, nil
}

// ErrUnknownServer means an image names a server the operator did not
// configure (InvalidArgument).
var ErrUnknownServer = errdefs.New(errdefs.ErrInvalidArgument, "no such image server configured")

// ErrServerUnavailable means an image server could not be asked, or did
// not answer as one (Unavailable): it is unreachable, its certificate is
// not the pinned one, or its index is malformed or too large.
var ErrServerUnavailable = errdefs.New(errdefs.ErrUnavailable, "unreachable or untrusted")

// IndexTTL is how long an image server's list of aliases is reused
// before it is fetched again.
const IndexTTL = time.Minute

// Servers are the configured image servers, by name. The zero value and
// nil have none.
type Servers struct {
	m map[string]Server

	mu      sync.Mutex
	indexes map[string]*serverIndex // by server name
	fetch   func(ctx context.Context, srv Server, alias string) (aliases map[string]bool, err error)
}

type serverIndex struct {
	mu      sync.Mutex // one fetch per server at a time
	aliases map[string]bool
	at      time.Time
}

// NewServers returns the image servers m (name → server).
func NewServers(m map[string]Server) *Servers {
	return &Servers{m: maps.Clone(m), indexes: map[string]*serverIndex{}}
}

// Names returns the configured servers' names, sorted.
func (s *Servers) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.m))
}

// Resolve parses image and finds its server: an error matching ErrBadRef
// or ErrUnknownServer (naming the configured servers) when it is
// malformed or names a server not configured.
func (s *Servers) Resolve(image string) (Ref, Server, error) {
	ref, err := ParseRef(image)
	if err != nil || ref.Server == "" {
		return ref, Server{}, err
	}
	var srv Server
	ok := false
	if s != nil {
		srv, ok = s.m[ref.Server]
	}
	if !ok {
		have := "none is configured"
		if names := s.Names(); len(names) > 0 {
			have = "configured: " + strings.Join(names, ", ")
		}
		return ref, Server{}, fmt.Errorf("image %q: %w: %q ([lxd.image_servers]; %s)", image, ErrUnknownServer, ref.Server, have)
	}
	return ref, srv, nil
}

// Source returns the LXD instance source of image: a local alias or
// fingerprint, or a pull of the alias from its configured server (LXD
// downloads and caches it, trusting only the pinned certificate when one
// is set).
func (s *Servers) Source(image string) (lxdexec.InstanceSource, error) {
	ref, srv, err := s.Resolve(image)
	if err != nil {
		return lxdexec.InstanceSource{}, err
	}
	if ref.Server == "" {
		return lxdexec.InstanceSource{Type: "image", Alias: ref.Alias}, nil
	}
	return lxdexec.InstanceSource{Type: "image", Mode: "pull", Server: srv.URL, Protocol: srv.protocol(),
		Alias: ref.Alias, Certificate: srv.Certificate}, nil
}

// Check returns nil when image exists: a local alias LXD has (Check), or
// an alias its image server lists. An error matches ErrNoSuchImage when
// it does not, ErrBadRef or ErrUnknownServer when image is malformed or
// names no configured server, and ErrServerUnavailable when the server
// cannot be asked; any other error is LXD's.
func (s *Servers) Check(ctx context.Context, imgs Images, image string) error {
	ref, srv, err := s.Resolve(image)
	if err != nil {
		return err
	}
	if ref.Server == "" {
		return Check(ctx, imgs, image)
	}
	aliases, err := s.aliases(ctx, ref.Server, srv, ref.Alias)
	if err != nil {
		return fmt.Errorf("image %q: %w", image, err)
	}
	if !aliases[ref.Alias] {
		return fmt.Errorf("image %q: %w: image server %q has no alias %q", image, ErrNoSuchImage, ref.Server, ref.Alias)
	}
	return nil
}

// aliases returns the aliases server name lists, fetched at most once
// per IndexTTL (and one fetch at a time); an alias not in a cached list
// is looked up afresh, once the list is older than a few seconds.
func (s *Servers) aliases(ctx context.Context, name string, srv Server, alias string) (map[string]bool, error) {
	s.mu.Lock()
	idx := s.indexes[name]
	if idx == nil {
		idx = &serverIndex{}
		if s.indexes == nil {
			s.indexes = map[string]*serverIndex{}
		}
		s.indexes[name] = idx
	}
	fetch := s.fetch
	s.mu.Unlock()
	if fetch == nil {
		fetch = fetchAliases
	}
	idx.mu.Lock()
	defer idx.mu.Unlock()
	age := time.Since(idx.at)
	// An LXD server is asked for the one alias: nothing to reuse.
	if srv.protocol() != ProtocolLXD && idx.aliases != nil && (age < IndexTTL && idx.aliases[alias] || age < 5*time.Second) {
		return idx.aliases, nil
	}
	got, err := fetch(ctx, srv, alias)
	if err != nil {
		return nil, fmt.Errorf("image server %q: %w: %v", name, ErrServerUnavailable, err)
	}
	idx.aliases, idx.at = got, time.Now()
	return got, nil
}
