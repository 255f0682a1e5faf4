// Package daemontest runs the real remoted server for black-box tests of
// its clients (package client, remotectl, remote-web), the way Tailscale's
// ipn/lapitest runs a real LocalAPI: the same constructor cmd/remoted uses
// (system.New, the composition root: a real store, the real route table,
// the project routes and the peer-credential gate) on a Unix socket in a
// temporary directory, with scripted providers in place of the agent CLIs.
// What the tests see is what a user of the socket sees; there is no second
// implementation of the API, nor of its wiring, to drift from the first.
//
// The project routes and the doctor are always wired, by the same
// system.New as cmd/remoted: without Options.LXD the daemon runs degraded (project operations that need LXD
// answer 503, as remoted does while LXD is unreachable); with it they run
// on the machine's real LXD (testkit.LXD: skipped locally, failing in CI
// when LXD is missing).
//
// The daemon logs through testkit.Logger, so a failing test shows its log.
// It is imported by tests only.
package daemontest

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/client"
	"remote/daemon"
	"remote/daemon/doctor"
	"remote/daemon/egress"
	"remote/daemon/projectapi"
	"remote/daemon/prompt"
	"remote/daemon/repoapi"
	"remote/daemon/schedule"
	"remote/daemon/socket"
	"remote/daemon/store"
	"remote/daemon/system"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/clistore"
	"remote/providers/runner"
	"remote/provisioning"
	"remote/provisioning/gitrepo"
	"remote/provisioning/lxdconn"
)

// Options configures a Daemon; the zero value is a daemon without LXD
// serving the default Claude and Codex fakes.
type Options struct {
	// Providers replaces the default fakes (Daemon.Claude, Daemon.Codex).
	Providers []providers.Provider
	// LXD wires the project routes to the real LXD (testkit.LXD).
	LXD bool
	// Chats are written to the store before the server starts, as a
	// previous run of the daemon would have left them.
	Chats []Chat
	// Version is what GET /v1/info reports; "" is "test".
	Version string
	// Configure, when set, adjusts the server's settings (access,
	// bounds) before system.New builds the daemon; the route providers
	// it builds are appended to RouteProviders.
	Configure func(*daemon.Options)
	// HostUser is the host user the login routes act as (nil: the
	// test's own user).
	HostUser *runner.HostUser
	// Projects, when set, adjusts the project routes' options (limits,
	// allowlists) before they are made.
	Projects func(*projectapi.ProjectsOptions)
	// Repos, when set, adjusts the repository routes' options (bounds)
	// before they are made.
	Repos func(*repoapi.Options)
	// Profiles are the LXD profiles of project containers (nil: LXD's
	// default profile), e.g. one with a proxy device to a host server.
	Profiles []string
	// Schedules, when set, adjusts the scheduler's options (bounds,
	// catch-up, its clock) before it is made.
	Schedules func(*schedule.Options)
	// Network, when set (with LXD), gives the daemon an egress proxy of
	// this configuration, as [projects.network] does remoted.
	Network *Network
}

// Network configures the daemon's egress proxy.
type Network struct {
	Config egress.Config
	// Resolver resolves names for the proxy (nil: the system's).
	Resolver egress.Resolver
	// Public is egress.Options.Public (nil: egress.Public).
	Public func(netip.Addr) bool
}

// Chat is a stored chat and its events (Seq and T are assigned by the store).
type Chat struct {
	api.Chat
	Events []api.Event
}

// Daemon is a running remoted server.
type Daemon struct {
	// Socket is the path of the API socket.
	Socket string
	// StateDir holds the store; it is also the default cwd of loose chats.
	StateDir string
	Store    *store.Store
	Server   *daemon.Server
	// System is the daemon as system.New built it (its run hub, prompt
	// service, preparer, routes).
	System *system.System
	// LXD is the LXD client the project routes use; nil without Options.LXD.
	LXD *lxdexec.Client
	// Claude and Codex are the default scripted providers (nil when
	// Options.Providers replaced them).
	Claude, Codex *Provider
	// Ports is what a real adapter is given: the project preparer and the
	// containers' launchers (Containers nil without Options.LXD). A
	// scripted run of a project chat prepares its container through it
	// (runner.PrepareProject), as a CLI's adapter does.
	Ports providers.AdapterConfig
	// Scheduler fires the chats' schedules.
	Scheduler *schedule.Scheduler

	t         testing.TB
	mu        sync.Mutex
	audit     []AuditRecord
	cancel    context.CancelFunc
	done      chan error
	schedDone chan struct{} // closed when the scheduler's loop returned
}

// AuditRecord is one line of the daemon's audit log: a state-changing
// request (any method but GET and HEAD, or a WebSocket upgrade).
type AuditRecord struct {
	Route  string // "POST /v1/chats/{id}/cancel"
	User   string // the acting user; "" when the request named none
	Status int
}

// testKey is the fixed secrets key of the daemon's store.
var testKey = []byte("daemontest-secrets-key-32-bytes!")

// New starts a daemon; it is shut down (runs cancelled, store closed) when
// the test ends.
func New(t testing.TB, o Options) *Daemon {
	t.Helper()
	// The socket path must fit sockaddr_un (108 bytes): t.TempDir() can be
	// too deep, so the socket gets a short directory of its own.
	sockDir, err := os.MkdirTemp("", "rdt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	d := &Daemon{t: t, Socket: filepath.Join(sockDir, "remoted.sock"), StateDir: t.TempDir(), done: make(chan error, 1)}

	log := testkit.Logger(t, "remoted")
	log.RegisterSink(&auditSink{d: d})

	st, err := store.Open(filepath.Join(d.StateDir, "remoted.db"), store.Options{Key: testKey, Logger: log.Named("store")})
	if err != nil {
		t.Fatalf("daemontest: open store: %v", err)
	}
	d.Store = st
	for _, c := range o.Chats {
		if err := st.CreateChat(c.Chat); err != nil {
			t.Fatalf("daemontest: seed chat %s: %v", c.ID, err)
		}
		if len(c.Events) > 0 {
			if _, err := st.Append(c.ID, c.Events...); err != nil {
				t.Fatalf("daemontest: seed events of chat %s: %v", c.ID, err)
			}
		}
	}

	var lxdClient *lxdexec.Client
	var lxdStatus daemon.LXDStatus
	if o.LXD {
		lxdClient = testkit.LXD(t)
		d.LXD = lxdClient
		lxdStatus = lxdInfo{lxdClient}
	}

	ps := o.Providers
	if ps == nil {
		d.Claude, d.Codex = Claude(), Codex()
		ps = []providers.Provider{d.Claude, d.Codex}
	}
	reg := prompt.NewRegistry()
	m := map[providers.ProviderID]providers.Provider{}
	var order []providers.ProviderID
	for _, p := range ps {
		m[p.ID()] = p
		order = append(order, p.ID())
	}
	reg.Set(m, nil, order)

	version := o.Version
	if version == "" {
		version = "test"
	}
	roots := prompt.NewRoots([]string{os.TempDir()}, "")
	hostUser := o.HostUser
	if hostUser == nil {
		hu, err := runner.LookupHostUser("")
		if err != nil {
			t.Fatalf("daemontest: host user: %v", err)
		}
		hostUser = &hu
	}
	so := system.Options{
		Store: st, Logger: log, LXD: lxdconn.NewConn(lxdClient), LXDStatus: lxdStatus,
		Registry: reg, HostUser: *hostUser,
		Git:      &gitrepo.Remote{Dir: filepath.Join(d.StateDir, "git")},
		CLIStore: clistore.New(filepath.Join(d.StateDir, "clis")),
		Server: daemon.Options{
			Version:    version,
			Roots:      roots,
			DefaultCwd: d.StateDir,
			StateDir:   d.StateDir,
		},
		Provisioning: provisioning.Options{Image: testkit.TestImage, Profiles: o.Profiles, CredentialSyncTimeout: 3 * time.Second},
		Schedule:     schedule.Options{CatchUp: true},
		Doctor:       doctor.Doctor{SocketPath: d.Socket, StateDir: d.StateDir, Roots: roots},
	}
	if o.Network != nil {
		policy, err := egress.Compile(o.Network.Config)
		if err != nil {
			t.Fatalf("daemontest: network: %v", err)
		}
		so.Egress = &egress.Options{Dir: filepath.Join(sockDir, "egress"), Policy: policy, Resolver: o.Network.Resolver, Public: o.Network.Public}
	}
	if o.Configure != nil {
		o.Configure(&so.Server)
	}
	if o.Projects != nil {
		o.Projects(&so.Projects)
	}
	if o.Repos != nil {
		o.Repos(&so.Repos)
	}
	if o.Schedules != nil {
		o.Schedules(&so.Schedule)
	}
	sys, err := system.New(so)
	if err != nil {
		st.Close()
		t.Fatalf("daemontest: system.New: %v", err)
	}
	if sys.Egress != nil {
		t.Cleanup(func() { _ = sys.Egress.Close() })
	}
	d.System, d.Server, d.Scheduler = sys, sys.Server, sys.Scheduler
	d.Ports = providers.AdapterConfig{Preparer: sys.Preparer, Logger: log.Named("adapter")}
	if lxdClient != nil {
		d.Ports.Containers = &runner.LXDLauncher{Client: lxdClient}
	}
	ln, err := socket.Listen(d.Socket, "")
	if err != nil {
		st.Close()
		t.Fatalf("daemontest: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.schedDone = make(chan struct{})
	go func() { defer close(d.schedDone); d.Scheduler.Run(ctx) }()
	go func() { d.done <- sys.Server.Serve(ctx, ln) }()
	t.Cleanup(d.stop)
	// Serving: one answered request means Serve has registered its HTTP
	// server, so a Shutdown from here on stops it. (A Shutdown that runs
	// before Serve has started leaves Serve running.)
	readyCtx, readyCancel := context.WithTimeout(context.Background(), time.Minute)
	defer readyCancel()
	if _, err := d.Client("").Info(readyCtx); err != nil {
		t.Fatalf("daemontest: the daemon does not answer: %v", err)
	}
	return d
}

// stop shuts the daemon down the way remoted does on SIGTERM, then closes
// the store.
func (d *Daemon) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Server.Shutdown(ctx); err != nil {
		d.t.Errorf("daemontest: Shutdown: %v", err)
	}
	d.cancel()
	if err := <-d.done; err != nil {
		d.t.Errorf("daemontest: Serve: %v", err)
	}
	<-d.schedDone
	if err := d.Store.Close(); err != nil {
		d.t.Errorf("daemontest: close store: %v", err)
	}
}

// Client returns a client of the daemon acting as user (X-Remote-User; the
// test process runs as the daemon's uid, which may name any user).
func (d *Daemon) Client(user string) *client.Client {
	return client.New(d.Socket).WithUser(user)
}

// Audit returns the audit records logged so far, in order.
func (d *Daemon) Audit() []AuditRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.audit)
}

// AuditCount returns how many audit records name route (e.g.
// "POST /v1/chats/{id}/cancel").
func (d *Daemon) AuditCount(route string) int {
	n := 0
	for _, r := range d.Audit() {
		if r.Route == route {
			n++
		}
	}
	return n
}

// auditSink collects the daemon's audit lines ("request" on the logger
// named remoted.api.audit) as AuditRecords.
type auditSink struct{ d *Daemon }

// Accept implements hclog.SinkAdapter.
func (s *auditSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	if name != "remoted.api.audit" || msg != "request" {
		return
	}
	var rec AuditRecord
	for i := 0; i+1 < len(args); i += 2 {
		k, _ := args[i].(string)
		switch k {
		case "route":
			rec.Route, _ = args[i+1].(string)
		case "user":
			rec.User, _ = args[i+1].(string)
		case "status":
			rec.Status, _ = args[i+1].(int)
		}
	}
	s.d.mu.Lock()
	s.d.audit = append(s.d.audit, rec)
	s.d.mu.Unlock()
}

// lxdInfo reports LXD's reachability and version for GET /v1/info, as
// remoted's LXD link does.
type lxdInfo struct{ c *lxdexec.Client }

func (l lxdInfo) Status(ctx context.Context) api.LXDInfo {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	srv, err := l.c.Server(ctx)
	if err != nil {
		return api.LXDInfo{Reachable: false, Error: err.Error()}
	}
	return api.LXDInfo{Reachable: true, ServerVersion: srv.ServerVersion, Server: srv.Server}
}
