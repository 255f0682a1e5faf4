// Package system is the daemon's composition root, in the spirit of
// Tailscale's tsd.System. Its one concern is building the daemon's parts
// in order and wiring them to each other: the run hub and the prompt
// service; the project pieces (the egress proxy, the preparer, the warm
// pool, the reconciler, the containers' launchers); the route packages
// (projects, repositories, schedules, images, the CLI store, logins, the
// doctor), each handed at construction the small interfaces it uses; the
// server; and the recovery of the runs a previous daemon left. The few
// late-bound links between parts built in turn (the preparer asks the
// repository routes where a chat works; the egress proxy tells the project
// routes of a refusal) live here and nowhere else.
//
// It is the only package that imports all of them. cmd/remoted (from its
// config) and daemon/daemontest (from test values) both build the daemon
// through New, so the tests run the wiring the binary runs. It takes plain
// option values, never the config, which stays in cmd/remoted. No package
// but cmd/remoted and daemon/daemontest may import it (internal/deps); it
// never imports config, a client, web or cmd.
package system

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/daemon/doctor"
	"remote/daemon/egress"
	"remote/daemon/hostapi"
	"remote/daemon/loginapi"
	"remote/daemon/projectapi"
	"remote/daemon/prompt"
	"remote/daemon/repoapi"
	"remote/daemon/runhub"
	"remote/daemon/schedule"
	"remote/daemon/scheduleapi"
	"remote/daemon/store"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/clistore"
	"remote/providers/runner"
	"remote/provisioning"
	"remote/provisioning/gitrepo"
	"remote/provisioning/lxdconn"
	"remote/provisioning/reconcile"
	"remote/provisioning/warm"
)

// Options are the values the daemon is built from. The caller fills each
// part's own settings; New fills the links between the parts (stores,
// hub, service, preparer, loggers left nil) and says so field by field.
type Options struct {
	// Store is the daemon's store (required); the caller opens and closes it.
	Store *store.Store
	// Logger is the daemon's; each part gets a named sub-logger (the
	// server "api", the project pieces "projects", the scheduler
	// "schedule").
	Logger hclog.Logger
	// Metrics are the daemon's series (nil: new ones).
	Metrics *daemon.Metrics
	// LXD is the daemon's LXD connection, without a client while LXD is
	// unreachable (required).
	LXD *lxdconn.Conn
	// LXDStatus reports LXD for GET /v1/info and the doctor (nil: not
	// configured).
	LXDStatus daemon.LXDStatus
	// Dial, when set, is what the project loop dials LXD with while the
	// connection has no client.
	Dial *lxdexec.Options
	// Go, when set, starts the project loop (the LXD dial, the warm pool,
	// the reconciler) at its place in the start-up, before the server is
	// built; it must return once its context ends. nil: the loop does not
	// run (tests).
	Go func(fn func(ctx context.Context))
	// Registry is the provider registry (required).
	Registry *prompt.Registry
	// Ports is the caller's part of every adapter's ports (Host, Logger,
	// ExitGrace); New adds the preparer and the containers' launchers.
	Ports providers.AdapterConfig
	// Providers, when set, configures Registry once the ports are whole,
	// before the runs are recovered.
	Providers func(ports providers.AdapterConfig)
	// Shim is remote-shim (nil: runs go direct).
	Shim *runner.ShimConfig
	// HostUser is the host user the login routes act as.
	HostUser runner.HostUser
	// Git is the host's git of the projects' repositories (nil: a
	// temporary mirror per push).
	Git *gitrepo.Remote
	// CLIStore is the CLI store of project containers (its routes; nil:
	// none).
	CLIStore *clistore.Store

	// Server is the server's own settings (access, version, bounds,
	// roots, ...). New sets Store, Registry, Logger (when nil), Metrics,
	// LXD, Projects, Hub, Service and ContainerForker, and appends its
	// route providers to RouteProviders.
	Server daemon.Options
	// Provisioning is the preparer's settings. New sets Git, LXD,
	// Projects, Secrets, Egress, Checkouts and Logger (when nil).
	Provisioning provisioning.Options
	// Projects is the project routes' settings. New sets Store, Preparer,
	// Exec, Chats, Hub, Warm, Network, Egress and Logger (when nil).
	Projects projectapi.ProjectsOptions
	// Repos is the repository routes' settings. New sets Store, Starter,
	// Exec, Git, Chats, Hub, Prompts and Logger (when nil).
	Repos repoapi.Options
	// Schedule is the scheduler's settings. New sets Store, Prompts and
	// Logger (when nil).
	Schedule schedule.Options
	// Egress, when set, makes the egress proxy of projects whose network
	// is off or allowlist (its Dir and Policy at least). New sets Lookup,
	// Blocked and Log (when nil).
	Egress *egress.Options
	// Warm, when set, makes the warm container pool (its Size, Pool and
	// Profiles). New sets Image, LXD, Create, MarkerKey, NameKey and
	// Logger (when nil).
	Warm *warm.Options
	// Reconcile, when set, makes the reconciler the project loop runs
	// (its Parallel). New sets Start, MarkerKey, NameKey, Projects,
	// Lister, Events, OnEvacuated and Logger (when nil).
	Reconcile *reconcile.Options
	// Doctor is the doctor's settings. New sets LXD, Registry, Images and
	// Warm.
	Doctor doctor.Doctor
}

// System is the wired daemon: its server and the parts the caller drives
// (the scheduler's loop, reloads, the orphaned shims) or tests look at.
type System struct {
	Server    *daemon.Server
	Hub       *runhub.Hub
	Service   *daemon.Service
	Preparer  *provisioning.Preparer
	Projects  *projectapi.Projects
	Repos     *repoapi.Routes
	Scheduler *schedule.Scheduler
	// Egress is the egress proxy (nil without Options.Egress).
	Egress *egress.Server
	// Warm is the warm pool (nil without Options.Warm).
	Warm *warm.Pool
	// Ports are the adapters' ports, the preparer and the launchers added.
	Ports providers.AdapterConfig

	reconciler *reconcile.Reconciler
	sweep      *warm.Options // [projects] warm = 0: the ready warm containers of before to delete
	dial       *lxdexec.Options
	lxd        *lxdconn.Conn
	log        hclog.Logger
}

// New builds the daemon in order: the run hub and the prompt service; the
// egress proxy, the preparer, the project and repository routes, the warm
// pool, the reconciler and the containers' launchers (the project loop
// starts here, through Options.Go); the providers' ports; the scheduler
// and its routes; the other route providers; the server; then the runs
// a previous daemon left are recovered. The server does not serve yet, and
// the scheduler does not fire until the caller runs it.
func New(o Options) (*System, error) {
	if o.Store == nil || o.LXD == nil || o.Registry == nil {
		return nil, errors.New("system: Options.Store, LXD and Registry are required")
	}
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	metrics := o.Metrics
	if metrics == nil {
		metrics = daemon.NewMetrics()
	}
	st, conn := o.Store, o.LXD
	s := &System{dial: o.Dial, lxd: conn, log: log}

	// The run hub and the prompt service: every route package is handed
	// them.
	so := o.Server
	so.Store, so.Registry, so.Metrics, so.LXD = st, o.Registry, metrics, o.LXDStatus
	so.Projects = projectapi.ProjectChatCheck{Store: st}
	if so.Logger == nil {
		so.Logger = log.Named("api")
	}
	s.Hub = daemon.NewRunHub(so)
	s.Service = daemon.NewPromptService(so, s.Hub)
	so.Hub, so.Service = s.Hub, s.Service

	// The project pieces.
	plog := log.Named("projects")
	if o.Egress != nil {
		eo := *o.Egress
		if eo.Lookup == nil {
			eo.Lookup = func(id string) (api.Project, error) { return projectByID(st, id) }
		}
		if eo.Blocked == nil {
			// The project routes tell the running chats (built below).
			eo.Blocked = func(p api.Project, host string, port int, method, reason string) {
				if s.Projects != nil {
					s.Projects.EgressBlocked(p, host, port, method, reason)
				}
			}
		}
		if eo.Log == nil {
			eo.Log = plog.Named("egress")
		}
		var err error
		if s.Egress, err = egress.New(eo); err != nil {
			return nil, err
		}
		// Running containers reach their proxy before any preparation.
		if projs, err := st.Projects(); err == nil {
			for _, p := range projs {
				if p.Network != nil && p.Network.Mode != api.NetworkOpen {
					if _, err := s.Egress.Socket(p.ID); err != nil {
						plog.Warn("egress socket not opened", "project", p.Name, "error", err)
					}
				}
			}
		}
	}
	git := o.Git
	if git == nil {
		git = &gitrepo.Remote{}
	}
	po := o.Provisioning
	po.Git, po.LXD, po.Projects = git, conn, st
	po.Secrets = provisioning.SecretSourceFunc(projectapi.StoreSecrets(st))
	if s.Egress != nil {
		po.Egress = s.Egress
	}
	// Where a chat works in the repository: the repository routes know
	// the chats (built below, before any run).
	po.Checkouts = func(id string) (gitrepo.Checkout, error) {
		if s.Repos == nil {
			return gitrepo.Checkout{}, errors.New("the repository routes are not built yet")
		}
		return s.Repos.Checkout(id)
	}
	if po.Logger == nil {
		po.Logger = plog.Named("prepare")
	}
	prep, err := provisioning.New(po)
	if err != nil {
		return nil, err
	}
	s.Preparer = prep
	if o.Warm != nil {
		wo := *o.Warm
		wo.Image, wo.LXD = prep.DefaultImage(), conn
		wo.Create = prep.CreateWarm(wo.Pool, storeCLIs(o.CLIStore))
		wo.MarkerKey, wo.NameKey = provisioning.MarkerKey, provisioning.NameKey
		if wo.Logger == nil {
			wo.Logger = plog.Named("warm")
		}
		if s.Warm, err = warm.New(wo); err != nil {
			return nil, err
		}
		if s.Warm == nil {
			s.sweep = &wo // no pool: the ready ones of before are deleted
		}
	}
	if o.Reconcile != nil {
		ro := *o.Reconcile
		ro.Start = func(ctx context.Context, p api.Project) error { _, err := prep.Start(ctx, p); return err }
		ro.MarkerKey, ro.NameKey = provisioning.MarkerKey, provisioning.NameKey
		ro.Projects, ro.Lister, ro.Events = st, conn, conn
		ro.OnEvacuated = s.Service.ContainerEvacuated
		if ro.Logger == nil {
			ro.Logger = plog.Named("reconcile")
		}
		if s.reconciler, err = reconcile.New(ro); err != nil {
			return nil, err
		}
	}
	pro := o.Projects
	pro.Store, pro.Preparer, pro.Exec, pro.Chats, pro.Hub = st, prep, conn, st, s.Hub
	if s.Warm != nil {
		pro.Warm = s.Warm
	}
	if s.Egress != nil {
		pro.Network, pro.Egress = o.Egress.Policy, s.Egress
	}
	if pro.Logger == nil {
		pro.Logger = plog.Named("api")
	}
	if s.Projects, err = projectapi.NewProjects(pro); err != nil {
		return nil, err
	}
	rpo := o.Repos
	rpo.Store, rpo.Starter, rpo.Exec, rpo.Git = st, prep, conn, git
	rpo.Chats, rpo.Hub, rpo.Prompts = st, s.Hub, s.Service
	if rpo.Logger == nil {
		rpo.Logger = plog.Named("repo")
	}
	if s.Repos, err = repoapi.New(rpo); err != nil {
		return nil, err
	}
	if o.Go != nil {
		o.Go(s.runProjects) // writes project status to the store
	}

	// The providers' ports, whole: the registry is configured before any
	// run is recovered.
	s.Ports = o.Ports
	s.Ports.Containers = connLaunchers{conn: conn, shim: o.Shim}
	s.Ports.Preparer = prep
	if o.Providers != nil {
		o.Providers(s.Ports)
	}

	// The schedules: built now, fired once the caller runs the scheduler
	// (after the recovery below, so a catch-up run sees the chats as they
	// really are).
	sco := o.Schedule
	sco.Store, sco.Prompts = st, s.Service
	if sco.Logger == nil {
		sco.Logger = log.Named("schedule")
	}
	if s.Scheduler, err = schedule.New(sco); err != nil {
		return nil, err
	}

	// The other route providers, then the server.
	doc := o.Doctor
	doc.LXD, doc.Registry, doc.Images = o.LXDStatus, o.Registry, prep
	if s.Warm != nil {
		doc.Warm = s.Warm
	}
	images := &hostapi.ImageRoutes{LXD: conn, Default: prep.DefaultImage(), Allowed: pro.Images, Logger: plog.Named("images")}
	so.RouteProviders = append(so.RouteProviders, s.Projects)
	if o.CLIStore != nil {
		so.RouteProviders = append(so.RouteProviders, &hostapi.CLIStoreRoutes{Store: o.CLIStore, Logger: plog.Named("clistore")})
	}
	so.RouteProviders = append(so.RouteProviders, images, s.Repos, &doc,
		&loginapi.ProviderLogins{Registry: o.Registry, HostUser: o.HostUser}, scheduleapi.New(s.Scheduler))
	so.ContainerForker = s.Projects // fork with a container
	if s.Server, err = daemon.New(so); err != nil {
		return nil, err
	}
	if w := s.Warm; w != nil {
		metrics.WarmPool(func() (int, int, uint64, uint64) {
			st := w.Stats()
			return st.Ready, st.Creating, st.Claims, st.Misses
		})
	}

	// Recovery never fails start-up for want of space: chats it cannot
	// repair yet are logged, counted and retried while the daemon serves.
	if err := s.Service.RecoverInterrupted(); err != nil {
		return nil, err
	}
	if n := len(s.Service.Unrepaired()); n > 0 {
		log.Error("serving with interrupted chats not yet repaired (state directory full?); retrying every 30 s", "chats", n)
	}
	return s, nil
}

// runProjects connects to LXD when it was unreachable at start-up, starts
// the warm pool and runs the reconciler (autostart projects, stored status
// kept true) until ctx ends.
func (s *System) runProjects(ctx context.Context) {
	if s.dial != nil {
		s.lxd.Dial(ctx, *s.dial, s.log.Named("projects").Named("lxd"))
	}
	if s.Warm != nil {
		go s.Warm.Run(ctx)
	} else if s.sweep != nil {
		go warm.Sweep(ctx, *s.sweep)
	}
	if s.reconciler != nil {
		_ = s.reconciler.Run(ctx)
	}
}

// projectByID is the stored project of id (the egress proxy's Lookup).
func projectByID(st *store.Store, id string) (api.Project, error) {
	projs, err := st.Projects()
	if err != nil {
		return api.Project{}, err
	}
	for _, p := range projs {
		if p.ID == id {
			return p, nil
		}
	}
	return api.Project{}, fmt.Errorf("no project of id %s", id)
}

// storeCLIs lists the providers whose CLI the store has a version of:
// what a warm container gets mounted ahead of need.
func storeCLIs(st *clistore.Store) func() []providers.ProviderID {
	if st == nil {
		return nil
	}
	return func() []providers.ProviderID {
		var ids []providers.ProviderID
		for _, id := range []providers.ProviderID{providers.Claude, providers.Codex} {
			if _, ok := st.Selected(id); ok {
				ids = append(ids, id)
			}
		}
		return ids
	}
}

// connLaunchers runs project commands with runner.LXDLauncher over the
// LXD connection as it is when the run starts: while LXD has not been
// reached yet, a run fails with provisioning.ErrUnavailable instead of
// the daemon needing a restart.
type connLaunchers struct {
	conn *lxdconn.Conn
	shim *runner.ShimConfig // nil: runs go direct
}

var _ providers.ContainerLaunchers = connLaunchers{}

func (l connLaunchers) Container(name string) providers.Launcher {
	return connLauncher{conn: l.conn, name: name, shim: l.shim}
}

type connLauncher struct {
	conn *lxdconn.Conn
	name string
	shim *runner.ShimConfig
}

func (l connLauncher) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	cl := l.conn.Client()
	if cl == nil {
		return nil, fmt.Errorf("exec %s in %q: %w", cmd.Path, l.name, provisioning.ErrUnavailable)
	}
	return (&runner.LXDLauncher{Client: cl, Instance: l.name, Shim: l.shim}).Start(ctx, cmd)
}
