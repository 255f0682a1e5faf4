package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/config"
	"remote/daemon"
	"remote/daemon/doctor"
	"remote/daemon/egress"
	"remote/daemon/projectapi"
	"remote/daemon/prompt"
	"remote/daemon/repoapi"
	"remote/daemon/schedule"
	"remote/daemon/store"
	"remote/daemon/system"
	"remote/daemon/webhook"
	"remote/forge"
	"remote/internal/hostfs"
	"remote/internal/version"
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

// systemOptions translates the config into the composition root's
// options (system.New): the project pieces, the routes' bounds, the
// doctor and the server's settings. The directories the parts write in
// are made here, owned by the daemon's uid.
func systemOptions(cfg config.Config, st *store.Store, lxd *lxdLink, hu runner.HostUser, shim *runner.ShimConfig, log hclog.Logger) (system.Options, error) {
	conn := lxd.conn
	hostHome := os.Getenv("HOME")
	hostUser := hostfs.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if u, err := runner.LookupHostUser(cfg.Agent.HostUser); err == nil {
		hostHome = u.Home
		hostUser = hostfs.User{UID: u.UID, GID: u.GID}
	}
	plog := log.Named("projects")
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
		Logger:          plog.Named("provision"),
	})
	// Port previews: LXD's proxy devices listen on sockets here, owned
	// by the daemon's uid (mode 0600) in a directory only it may enter.
	previewDir := filepath.Join(cfg.Daemon.StateDir, "previews")
	if err := os.MkdirAll(previewDir, 0o700); err != nil {
		return system.Options{}, fmt.Errorf("create preview directory %s: %w", previewDir, err)
	}
	// The egress proxy of projects whose network is off or allowlist: a
	// socket per project here, the container's 127.0.0.1:3128 through an
	// LXD proxy device.
	policy, err := egress.Compile(egress.Config{Mode: cfg.Projects.Network.Mode, Allow: cfg.Projects.Network.Allow,
		ProjectMayAllow: nilIfEmpty(cfg.Projects.Network.ProjectMayAllow), Agent: agentHosts(cfg)})
	if err != nil {
		return system.Options{}, fmt.Errorf("[projects.network]: %w", err)
	}
	// The project environments' logs, readable by the daemon only.
	envLogDir := filepath.Join(cfg.Daemon.StateDir, "environments")
	if err := os.MkdirAll(envLogDir, 0o700); err != nil {
		return system.Options{}, fmt.Errorf("create environment log directory %s: %w", envLogDir, err)
	}
	servers, err := imageServers(cfg.LXD.ImageServers)
	if err != nil {
		return system.Options{}, err
	}
	pools, images, targets := cfg.ProjectAllowlists()
	var fs projectapi.ContainerFS // the file routes answer 503 without remote-shim
	if shim != nil {
		fs = &containerfs.ContainerFiles{LXD: conn, Shim: shim}
	}
	profiles := cfg.LXD.Profiles
	if len(profiles) == 0 {
		profiles = []string{"default"} // as the preparer does
	}
	dial := lxdOptions(cfg.LXD)
	return system.Options{
		Store: st, Logger: log, LXD: conn, LXDStatus: lxd, Dial: &dial,
		Ports: providers.AdapterConfig{
			Host:      runner.HostUserLauncher(&runner.HostLauncher{Shim: shim, Nice: cfg.Agent.Nice}, hu),
			Logger:    log.Named("providers"),
			ExitGrace: cfg.Agent.ExitGrace.Duration,
		},
		Shim: shim, HostUser: hu, CLIStore: cliStore,
		// The git that talks to the projects' repositories runs here, on
		// the host, with one bare mirror per project: the token never
		// enters a container.
		Git: &gitrepo.Remote{Dir: filepath.Join(cfg.Daemon.StateDir, "git")},
		Server: daemon.Options{
			Version:         version.String(),
			Access:          access(cfg),
			TranscriptBytes: cfg.Agent.TranscriptBytes,
			SkillsDir:       cfg.Projects.SkillsDir,
			Roots:           prompt.NewUserRoots(cfg.Agent.AllowedRoots, hu),
			IdleTimeout:     cfg.Agent.IdleTimeout.Duration,
			DefaultCwd:      hu.Home,
			StateDir:        cfg.Daemon.StateDir,
			MinFree:         int64(cfg.Daemon.MinFree),
			MaxRunBytes:     int64(cfg.Daemon.MaxRunBytes),
			MaxChatBytes:    int64(cfg.Daemon.MaxChatBytes),
			Notify:          webhook.NotifierOptions{URL: cfg.Notify.WebhookURL, Headers: cfg.Notify.Headers},
			Queue: daemon.QueueBounds{Prompt: int64(cfg.Daemon.MaxQueuedPromptBytes),
				Chat: int64(cfg.Daemon.MaxChatQueuedBytes), User: int64(cfg.Daemon.MaxUserQueuedBytes)},
		},
		Provisioning: provisioning.Options{
			ImageServers: servers,
			Image:        cfg.LXD.Image, Profiles: cfg.LXD.Profiles, Deps: deps,
			CredentialSyncTimeout: cfg.Agent.CredentialSyncTimeout.Duration,
			CheckpointKeep:        cfg.Projects.CheckpointKeep,
			CheckpointExpiry:      cfg.Projects.CheckpointExpiry.Duration,
			PreviewDir:            previewDir,
			Idmap:                 provisioning.Idmap(cfg.Projects.Idmap),
			// The project environment's setup runs as the container user.
			EnvUID: cfg.Projects.ContainerUID, EnvGID: cfg.Projects.ContainerGID, EnvLogDir: envLogDir,
		},
		Projects: projectapi.ProjectsOptions{
			Limits: api.ProjectLimits(cfg.Projects.Limits), DefaultPool: cfg.Projects.Pool, Pools: pools, Images: images, Targets: targets,
			FS: fs, MaxUploadBytes: int64(cfg.Projects.MaxUploadBytes), FileUID: cfg.Projects.ContainerUID, FileGID: cfg.Projects.ContainerGID,
		},
		Repos: repoapi.Options{MaxPatchBytes: cfg.Projects.MaxDiffBytes,
			AuthorName: cfg.Projects.GitAuthorName, AuthorEmail: cfg.Projects.GitAuthorEmail,
			Forge: forgeFor(cfg.Forges), Hooks: hooksFor(cfg.Forges), DefaultProvider: defaultProvider(cfg), PageURL: cfg.Web.PublicURL},
		Schedule: schedule.Options{CatchUp: cfg.Schedules.CatchUp, MinInterval: cfg.Schedules.MinInterval.Duration,
			MaxPerChat: cfg.Schedules.MaxPerChat, MaxPerUser: cfg.Schedules.MaxPerUser},
		Egress:    &egress.Options{Dir: filepath.Join(cfg.Daemon.StateDir, "egress"), Policy: policy},
		Warm:      &warm.Options{Size: cfg.Projects.Warm, Pool: cfg.Projects.Pool, Profiles: cfg.LXD.Profiles},
		Reconcile: &reconcile.Options{Parallel: cfg.Projects.StartParallel},
		Doctor: doctor.Doctor{
			SocketPath: cfg.Daemon.Socket, SocketGroup: cfg.Daemon.SocketGroup,
			StateDir: cfg.Daemon.StateDir, HostUser: hu, Roots: prompt.NewRoots(cfg.Agent.AllowedRoots, hu.Home),
			SecretsKeyPath: cfg.Daemon.SecretsKeyPath(os.Getenv("CREDENTIALS_DIRECTORY")),
			CLIStore:       cliStore,
			Profiles:       lxdconn.Profiles{Conn: conn, Names: profiles},
			Uses:           st,
			Forges:         doctorForges(cfg.Forges),
		},
	}, nil
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

// doctorForges lists the [forges."<host>"] tables for the doctor, by host.
func doctorForges(forges map[string]config.Forge) []doctor.Forge {
	out := make([]doctor.Forge, 0, len(forges))
	for _, host := range slices.Sorted(maps.Keys(forges)) {
		out = append(out, doctor.Forge{Host: host, Kind: forges[host].Kind, API: forges[host].API})
	}
	return out
}
