package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/config"
	"remote/daemon"
	"remote/daemon/doctor"
	"remote/daemon/egress"
	"remote/daemon/projectapi"
	"remote/daemon/repoapi"
	"remote/daemon/store"
	"remote/forge"
	"remote/internal/hostfs"
	"remote/providers"
	"remote/providers/clistore"
	"remote/providers/containerfs"
	"remote/providers/runner"
	"remote/provisioning"
	"remote/provisioning/gitrepo"
	"remote/provisioning/lxdconn"
	"remote/provisioning/lxdimage"
	"remote/provisioning/reconcile"
	"remote/provisioning/warm"
)

// projectWiring is what the projects feature adds to remoted.
type projectWiring struct {
	Chats      daemon.ProjectChats          // lets chats name a project
	Routes     []daemon.RouteProvider       // the /v1/projects routes
	Preparer   providers.ProjectPreparer    // S9 preparation for project runs
	Containers providers.ContainerLaunchers // LXD exec launchers
	// CLIStore is the CLI store project containers mount.
	CLIStore *clistore.Store
	// Images checks the default image for the doctor; Profiles the
	// [lxd] profiles.
	Images   doctor.ImageChecker
	Profiles doctor.ProfileChecker
	// Warm is the warm container pool (nil: [projects] warm = 0).
	Warm *warm.Pool
	// Run connects to LXD when it was unreachable at start-up, starts the
	// autostart projects and keeps stored status true until ctx ends.
	Run func(ctx context.Context)
	// OnEvacuated sets what is told when LXD stops a project's container
	// on an evacuated cluster member (the chats, once the server exists).
	OnEvacuated func(fn func(api.Project, string))
}

// wireProjects builds the project routes, the preparer, the reconciler and
// the container launchers from the config, the store and the daemon's LXD
// connection (without a client while LXD is unreachable: project requests
// then answer 503 until Run has connected).
func wireProjects(cfg config.Config, st *store.Store, conn *lxdconn.Conn, shim *runner.ShimConfig, log hclog.Logger) (projectWiring, error) {
	hostHome := os.Getenv("HOME")
	hostUser := hostfs.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if u, err := runner.LookupHostUser(cfg.Agent.HostUser); err == nil {
		hostHome = u.Home
		hostUser = hostfs.User{UID: u.UID, GID: u.GID}
	}
	// The CLI store: mounted into containers when LXD is this machine's
	// (its unix socket), pushed when LXD is reached over the network.
	cliStore := clistore.New(filepath.Join(cfg.Daemon.StateDir, "clis"))
	deps, _ := provisioning.NewDependencies(provisioning.StepsOptions{
		CLIStore:        cliStore,
		CLIStorePush:    cfg.LXD.URL != "",
		LXD:             conn,
		Providers:       providerSetups(cfg, hostHome),
		InstructionsDir: cfg.Projects.InstructionsDir,
		SkillsDir:       cfg.Projects.SkillsDir,
		ScheduleDir:     cfg.Projects.ScheduleDir,
		UID:             cfg.Projects.ContainerUID,
		GID:             cfg.Projects.ContainerGID,
		HostUser:        hostUser,
		HostHome:        hostHome,
		Logger:          log.Named("provision"),
	})
	// Port previews: LXD's proxy devices listen on sockets here, owned
	// by the daemon's uid (mode 0600) in a directory only it may enter.
	previewDir := filepath.Join(cfg.Daemon.StateDir, "previews")
	if err := os.MkdirAll(previewDir, 0o700); err != nil {
		return projectWiring{}, fmt.Errorf("create preview directory %s: %w", previewDir, err)
	}
	// The egress proxy of projects whose network is off or allowlist: a
	// socket per project here, the container's 127.0.0.1:3128 through an
	// LXD proxy device.
	policy, err := egress.Compile(egress.Config{Mode: cfg.Projects.Network.Mode, Allow: cfg.Projects.Network.Allow,
		ProjectMayAllow: nilIfEmpty(cfg.Projects.Network.ProjectMayAllow), Agent: agentHosts(cfg)})
	if err != nil {
		return projectWiring{}, fmt.Errorf("[projects.network]: %w", err)
	}
	var blocked atomic.Pointer[projectapi.Projects]
	egressSrv, err := egress.New(egress.Options{Dir: filepath.Join(cfg.Daemon.StateDir, "egress"), Policy: policy,
		Lookup: func(id string) (api.Project, error) { return projectByID(st, id) },
		Blocked: func(p api.Project, host string, port int, method, reason string) {
			if r := blocked.Load(); r != nil {
				r.EgressBlocked(p, host, port, method, reason)
			}
		},
		Log: log.Named("egress")})
	if err != nil {
		return projectWiring{}, err
	}
	if projs, err := st.Projects(); err == nil { // running containers reach their proxy before any preparation
		for _, p := range projs {
			if p.Network != nil && p.Network.Mode != api.NetworkOpen {
				if _, err := egressSrv.Socket(p.ID); err != nil {
					log.Warn("egress socket not opened", "project", p.Name, "error", err)
				}
			}
		}
	}
	// The project environments' logs, readable by the daemon only.
	envLogDir := filepath.Join(cfg.Daemon.StateDir, "environments")
	if err := os.MkdirAll(envLogDir, 0o700); err != nil {
		return projectWiring{}, fmt.Errorf("create environment log directory %s: %w", envLogDir, err)
	}
	servers, err := imageServers(cfg.LXD.ImageServers)
	if err != nil {
		return projectWiring{}, err
	}
	var repos *repoapi.Routes
	// The git that talks to the projects' repositories runs here, on the
	// host, with one bare mirror per project: the token never enters a
	// container.
	git := &gitrepo.Remote{Dir: filepath.Join(cfg.Daemon.StateDir, "git")}
	prep, err := provisioning.New(provisioning.Options{
		Git:          git,
		ImageServers: servers,
		LXD:          conn, Projects: st, Secrets: provisioning.SecretSourceFunc(projectapi.StoreSecrets(st)),
		Image: cfg.LXD.Image, Profiles: cfg.LXD.Profiles, Deps: deps,
		CredentialSyncTimeout: cfg.Agent.CredentialSyncTimeout.Duration,
		CheckpointKeep:        cfg.Projects.CheckpointKeep,
		CheckpointExpiry:      cfg.Projects.CheckpointExpiry.Duration,
		PreviewDir:            previewDir,
		Egress:                egressSrv,
		Idmap:                 provisioning.Idmap(cfg.Projects.Idmap),
		// Where a chat works in the repository: the repository routes know
		// the chats (repos is set below, before any run).
		Checkouts: func(id string) (gitrepo.Checkout, error) { return repos.Checkout(id) },
		// The project environment's setup runs as the container user.
		EnvUID: cfg.Projects.ContainerUID, EnvGID: cfg.Projects.ContainerGID, EnvLogDir: envLogDir,
		Logger: log.Named("prepare"),
	})
	if err != nil {
		return projectWiring{}, err
	}
	pool, err := warm.New(warm.Options{Size: cfg.Projects.Warm, Image: prep.DefaultImage(), Pool: cfg.Projects.Pool, Profiles: cfg.LXD.Profiles,
		LXD: conn, Create: prep.CreateWarm(cfg.Projects.Pool, storeCLIs(cliStore)), MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey,
		Logger: log.Named("warm")})
	if err != nil {
		return projectWiring{}, err
	}
	var onEvacuated atomic.Pointer[func(api.Project, string)]
	rec, err := reconcile.New(reconcile.Options{
		Start:     func(ctx context.Context, p api.Project) error { _, err := prep.Start(ctx, p); return err },
		MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey,
		Projects: st, Lister: conn, Events: conn,
		Parallel: cfg.Projects.StartParallel, Logger: log.Named("reconcile"),
		OnEvacuated: func(p api.Project, member string) {
			if fn := onEvacuated.Load(); fn != nil {
				(*fn)(p, member)
			}
		},
	})
	if err != nil {
		return projectWiring{}, err
	}
	pools, images, targets := cfg.ProjectAllowlists()
	var fs projectapi.ContainerFS // the file routes answer 503 without remote-shim
	if shim != nil {
		fs = &containerfs.ContainerFiles{LXD: conn, Shim: shim}
	}
	routes, err := projectapi.NewProjects(projectapi.ProjectsOptions{Store: st, Preparer: prep, Exec: conn, Logger: log.Named("api"),
		Limits: api.ProjectLimits(cfg.Projects.Limits), DefaultPool: cfg.Projects.Pool, Pools: pools, Images: images, Targets: targets,
		FS: fs, MaxUploadBytes: int64(cfg.Projects.MaxUploadBytes), FileUID: cfg.Projects.ContainerUID, FileGID: cfg.Projects.ContainerGID,
		Warm: pool, Network: policy, Egress: egressSrv})
	if err != nil {
		return projectWiring{}, err
	}
	blocked.Store(routes)
	repos, err = repoapi.New(repoapi.Options{Store: st, Starter: prep, Exec: conn, Git: git, MaxPatchBytes: cfg.Projects.MaxDiffBytes,
		AuthorName: cfg.Projects.GitAuthorName, AuthorEmail: cfg.Projects.GitAuthorEmail, Logger: log.Named("repo"),
		Forge: forgeFor(cfg.Forges), Hooks: hooksFor(cfg.Forges), DefaultProvider: defaultProvider(cfg), PageURL: cfg.Web.PublicURL})
	if err != nil {
		return projectWiring{}, err
	}
	opts := lxdOptions(cfg.LXD)
	profiles := cfg.LXD.Profiles
	if len(profiles) == 0 {
		profiles = []string{"default"} // as the preparer does
	}
	return projectWiring{
		Chats:    projectapi.ProjectChatCheck{Store: st},
		CLIStore: cliStore,
		Routes: []daemon.RouteProvider{routes, &projectapi.CLIStoreRoutes{Store: cliStore, Logger: log.Named("clistore")},
			&projectapi.ImageRoutes{LXD: conn, Default: prep.DefaultImage(), Allowed: images, Logger: log.Named("images")}, repos},
		Images:     prep,
		Profiles:   lxdconn.Profiles{Conn: conn, Names: profiles},
		Warm:       pool,
		Preparer:   prep,
		Containers: connLaunchers{conn: conn, shim: shim},
		Run: func(ctx context.Context) {
			conn.Dial(ctx, opts, log.Named("lxd"))
			go pool.Run(ctx)
			_ = rec.Run(ctx)
		},
		OnEvacuated: func(fn func(api.Project, string)) { onEvacuated.Store(&fn) },
	}, nil
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

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// agentHosts are the model providers' API hosts the egress proxy always
// lets a project's agent reach: the built-in ones, and the host of every
// *_BASE_URL a provider's env configures.
func agentHosts(cfg config.Config) []string {
	hosts := append([]string(nil), egress.AgentHosts...)
	for _, p := range cfg.Providers {
		for k, v := range p.Env {
			if !strings.HasSuffix(k, "_BASE_URL") {
				continue
			}
			if u, err := url.Parse(v); err == nil && u.Host != "" {
				if _, err := egress.ParsePattern(u.Host, true); err == nil {
					hosts = append(hosts, u.Host)
				}
			}
		}
	}
	return hosts
}

// storeCLIs lists the providers whose CLI the store has a version of:
// what a warm container gets mounted ahead of need.
func storeCLIs(st *clistore.Store) func() []providers.ProviderID {
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

// providerSetups overlays [providers.<id>] provisioning keys on the
// built-in setups: every key that is set replaces the default.
func providerSetups(cfg config.Config, hostHome string) map[providers.ProviderID]provisioning.ProviderSetup {
	home := cfg.Projects.ContainerHome
	if home == "" {
		home = "/root"
	}
	setups := provisioning.DefaultSetups(home, hostHome)
	for id, p := range cfg.Providers {
		s := setups[providers.ProviderID(id)]
		if len(p.Check) > 0 || len(p.Install) > 0 || len(p.InstallFiles) > 0 || strings.ContainsRune(p.Binary, '/') {
			// The operator's own install method or binary: the store
			// stays out.
			s.StoreCLI = ""
		}
		if len(p.Check) > 0 {
			s.Check = p.Check
		}
		if len(p.Install) > 0 {
			s.InstallCommand, s.InstallFiles = p.Install, nil
		}
		if len(p.InstallFiles) > 0 {
			s.InstallFiles = files(p.InstallFiles)
		}
		if len(p.Credentials) > 0 {
			s.Credentials = nil
			for _, c := range p.Credentials {
				s.Credentials = append(s.Credentials, provisioning.Credential{Host: c.Host, Container: c.Container, Sync: c.Sync, RejectAPIKey: c.RejectAPIKey})
			}
		}
		if p.InstructionsPath != "" {
			s.InstructionsPath = p.InstructionsPath
		}
		if p.SkillLinkDir != "" {
			s.SkillLinkDir = p.SkillLinkDir
		}
		if len(p.Assets) > 0 {
			s.Assets = files(p.Assets)
		}
		if len(p.BrowserAssets) > 0 {
			s.BrowserAssets = files(p.BrowserAssets)
		}
		setups[providers.ProviderID(id)] = s
	}
	return setups
}

func files(in []config.ContainerFile) []provisioning.File {
	out := make([]provisioning.File, 0, len(in))
	for _, f := range in {
		out = append(out, provisioning.File{Host: f.Host, Container: f.Container, Mode: os.FileMode(f.Mode)})
	}
	return out
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

// imageServers reads [lxd.image_servers] with their pinned certificates.
func imageServers(cfg map[string]config.ImageServer) (*lxdimage.Servers, error) {
	m := map[string]lxdimage.Server{}
	for name, s := range cfg {
		pemText, err := s.CertificatePEM()
		if err != nil {
			return nil, fmt.Errorf("[lxd.image_servers.%s] certificate: %w", name, err)
		}
		m[name] = lxdimage.Server{URL: s.URL, Protocol: s.Protocol, Certificate: pemText}
	}
	return lxdimage.NewServers(m), nil
}

// forgeFor adapts package forge over [forges] to the repository routes:
// a repository URL picks a configured host (an unconfigured one is an
// error naming it and its config key; nothing is sent), whose forge
// opens the pull request.
func forgeFor(forges map[string]config.Forge) func(repoURL string) (repoapi.Opener, error) {
	return func(repoURL string) (repoapi.Opener, error) {
		f, repo, err := forge.ForRepo(forges, repoURL)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, token string, pr repoapi.PullRequest) (string, int, error) {
			res, err := f.OpenPullRequest(ctx, token, forge.PullRequest{Repo: repo, Head: pr.Head, Base: pr.Base, Title: pr.Title, Body: pr.Body})
			return res.URL, res.Number, err
		}, nil
	}
}

// defaultProvider is the first enabled provider: a forge issue's chat in
// a project without a provider of its own runs it.
func defaultProvider(cfg config.Config) string {
	for _, id := range config.ProviderIDs() {
		if p, ok := cfg.Providers[id]; ok && p.IsEnabled() {
			return id
		}
	}
	return ""
}

// hooksFor adapts package forge over [forges] to the webhook intake.
func hooksFor(forges map[string]config.Forge) func(repoURL string) (repoapi.HookForge, error) {
	return func(repoURL string) (repoapi.HookForge, error) {
		f, repo, err := forge.ForRepo(forges, repoURL)
		if err != nil {
			return nil, err
		}
		return HookForge{F: f, Path: repo}, nil
	}
}

// HookForge is one repository's forge as the webhook intake sees it.
type HookForge struct {
	F    forge.Forge
	Path string
}

func (h HookForge) Kind() string { return string(h.F.Kind) }
func (h HookForge) Repo() string { return h.Path }
func (h HookForge) Verify(secret string, hd http.Header, body []byte) (string, error) {
	return forge.VerifyWebhook(h.F.Kind, secret, hd, body)
}
func (h HookForge) Parse(hd http.Header, body []byte) (repoapi.ForgeEvent, error) {
	ev, err := forge.ParseEvent(h.F.Kind, hd, body)
	return repoapi.ForgeEvent(ev), err
}
func (h HookForge) Comment(ctx context.Context, token string, issue int, body string) (string, error) {
	return h.F.Comment(ctx, token, h.Path, issue, body)
}
func (h HookForge) CanWrite(ctx context.Context, token, user string) (bool, error) {
	return h.F.CanWrite(ctx, token, h.Path, user)
}
func (h HookForge) OpenPullRequest(ctx context.Context, token string, pr repoapi.PullRequest) (string, int, error) {
	res, err := h.F.OpenPullRequest(ctx, token, forge.PullRequest{Repo: h.Path, Head: pr.Head, Base: pr.Base, Title: pr.Title, Body: pr.Body, Draft: pr.Draft})
	return res.URL, res.Number, err
}
