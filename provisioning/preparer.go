package provisioning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/internal/errdefs"
	"remote/internal/keyed"
	"remote/internal/revert"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning/checkpoint"
	"remote/provisioning/clidevice"
	"remote/provisioning/envsetup"
	"remote/provisioning/gitrepo"
	"remote/provisioning/lxdconn"
	"remote/provisioning/lxdimage"
	"remote/provisioning/netdev"
	"remote/provisioning/placement"
	"remote/provisioning/preview"
	"remote/provisioning/warm"
)

// MarkerKey is the instance config key the daemon sets on containers it
// creates; its value is the project's id (api.Project.ID). Only a container
// marked with a project's id is that project's: one with another value, or
// none, is never adopted, started, stopped or deleted for it (409 naming
// the container).
const MarkerKey = "user.remote.project-id"

// NameKey is the instance config key holding the project's name, for
// people reading `lxc list`. Before projects had ids it was the only
// marker (see owns).
const NameKey = "user.remote.project"

// ErrProjectReplaced means the project a run was bound to is gone: the
// project of that name was deleted, or deleted and created again (a new id).
var ErrProjectReplaced = errdefs.New(errdefs.ErrConflict, "project was deleted or replaced")

// DefaultCredentialSyncTimeout bounds SyncCredentials when Options leaves
// it zero (S12).
const DefaultCredentialSyncTimeout = 30 * time.Second

// Container is the container a preparation works on. UUID is LXD's
// volatile.uuid: it changes when the container is replaced, which resets
// every "already published" record of the old one.
type Container struct {
	Name string
	UUID string
	// Config is the instance config read at the start of the preparation.
	Config map[string]string
}

// The provisioning dependencies (S9). They are wired all or none: a
// Preparer without them only reconciles the container and loads secrets.

// CLIProvisioner ensures a provider's CLI is installed in the container.
type CLIProvisioner interface {
	EnsureCLI(ctx context.Context, c Container, p providers.ProviderID) error
}

// CredentialProvisioner pushes a provider's credentials into the container
// and syncs them back after a run.
type CredentialProvisioner interface {
	PushCredentials(ctx context.Context, c Container, p providers.ProviderID) error
	SyncCredentials(ctx context.Context, c Container, p providers.ProviderID) error
}

// WorkspacePublisher publishes shared instructions and skills with their
// links.
type WorkspacePublisher interface {
	PublishInstructions(ctx context.Context, c Container, p providers.ProviderID) error
	PublishSkills(ctx context.Context, c Container, p providers.ProviderID, selected []string) error
	// PublishScheduleTools publishes the scheduled-tasks skill and helper.
	PublishScheduleTools(ctx context.Context, c Container, p providers.ProviderID) error
}

// AssetPublisher publishes a provider profile's non-secret runtime files.
type AssetPublisher interface {
	PublishAssets(ctx context.Context, c Container, p providers.ProviderID) error
}

// BrowserPolicy publishes or removes the browser tool's configuration.
type BrowserPolicy interface {
	ApplyBrowser(ctx context.Context, c Container, p providers.ProviderID, enabled bool) error
}

// Lifecycle sets the container to start with LXD (boot.autostart).
type Lifecycle interface {
	EnableAutostart(ctx context.Context, c Container) error
}

// Dependencies are the provisioning steps. All six set, or all nil.
type Dependencies struct {
	CLI         CLIProvisioner
	Credentials CredentialProvisioner
	Workspace   WorkspacePublisher
	Assets      AssetPublisher
	Browser     BrowserPolicy
	Lifecycle   Lifecycle
}

// count reports how many dependencies are set.
func (d Dependencies) count() int {
	n := 0
	for _, set := range []bool{d.CLI != nil, d.Credentials != nil, d.Workspace != nil,
		d.Assets != nil, d.Browser != nil, d.Lifecycle != nil} {
		if set {
			n++
		}
	}
	return n
}

// Options configure a Preparer.
type Options struct {
	LXD      LXD          // required
	Projects ProjectStore // required
	Secrets  SecretSource // nil: runs get no secrets
	// Image is the image alias new containers are created from when the
	// project names none (DevImage when ""); Profiles are their LXD
	// profiles.
	Image    string
	Profiles []string
	// ImageServers are the image servers an image may name as
	// "<server>:<alias>" ([lxd.image_servers]); nil: none.
	ImageServers *lxdimage.Servers
	// Deps are the provisioning steps, all or none (see NewDependencies).
	Deps Dependencies
	// CredentialSyncTimeout bounds SyncCredentials; zero means
	// DefaultCredentialSyncTimeout.
	CredentialSyncTimeout time.Duration
	// StartTimeout bounds waiting for a container to start.
	StartTimeout time.Duration
	// CheckpointKeep is how many checkpoints each project keeps; zero
	// means DefaultCheckpointKeep.
	CheckpointKeep int
	// CheckpointExpiry, when positive, has LXD delete each checkpoint
	// that long after it was taken (the snapshot's expires_at).
	CheckpointExpiry time.Duration
	// PreviewDir holds the Unix sockets of the projects' port previews
	// (LXD proxy devices); "" turns previews off.
	PreviewDir string
	// Egress opens the projects' egress proxy sockets (network off or
	// allowlist); nil: every project's network is open.
	Egress netdev.Sockets
	// Idmap is how new containers' uids map onto the host's; "" is
	// IdmapAuto.
	Idmap Idmap
	// Checkouts says where a chat works in its project's repository (its
	// branch, its worktree: docs/operating.md, "A repository per
	// project"); nil: in /workspace as it is.
	Checkouts func(chatID string) (gitrepo.Checkout, error)
	// Git runs on the host every git command that talks to a project's
	// repository server (the token stays there); nil: a temporary mirror
	// per clone. Share it with the repository routes.
	Git *gitrepo.Remote
	// EnvUID and EnvGID are the container user the project environment's
	// setup and maintenance run as ([projects] container_uid and
	// container_gid; 0: root).
	EnvUID, EnvGID int
	// EnvLogDir holds each project's environment log (the last setup or
	// maintenance run, <project id>.log); "": the status's tail only.
	EnvLogDir string
	Logger    hclog.Logger
}

// Preparer makes a project's container ready for a provider run. It
// implements providers.ProjectPreparer.
type Preparer struct {
	lxd         LXD
	projects    ProjectStore
	secrets     SecretSource
	image       string
	servers     *lxdimage.Servers
	profiles    []string
	deps        Dependencies
	wired       bool
	syncTimeout time.Duration
	log         hclog.Logger
	lifecycle   keyed.Lock // one container lifecycle change at a time
	checkpoints *checkpoint.Manager
	previews    *preview.Devices
	network     *netdev.Devices
	idmap       Idmap // uid ranges of new containers
	repos       gitrepo.Cloner
	caps        atomic.Pointer[api.ProjectLimits] // SetCaps

	envs *envsetup.Manager
}

var (
	_ providers.ProjectPreparer = (*Preparer)(nil)
	_ checkpoint.Snapshotter    = (*lxdconn.Conn)(nil)
	_ preview.DeviceEditor      = (*lxdconn.Conn)(nil)
	_ LXD                       = (*lxdconn.Conn)(nil)
	_ placement.PoolChecker     = (*lxdconn.Conn)(nil)
	_ placement.ClusterMembers  = (*lxdconn.Conn)(nil)
	_ clidevice.Remover         = (*lxdconn.Conn)(nil)
)

// New returns a Preparer. It fails when LXD or Projects is missing or when
// the provisioning dependencies are wired partially.
func New(opts Options) (*Preparer, error) {
	if opts.LXD == nil || opts.Projects == nil {
		return nil, errors.New("provisioning: lxd client and project store are required")
	}
	n := opts.Deps.count()
	if n != 0 && n != 6 {
		return nil, fmt.Errorf("provisioning: %w: %d of 6 set", ErrIncompleteDependencies, n)
	}
	if opts.Image == "" {
		opts.Image = lxdimage.DevImage
	}
	if len(opts.Profiles) == 0 {
		opts.Profiles = []string{"default"}
	}
	if opts.CredentialSyncTimeout <= 0 {
		opts.CredentialSyncTimeout = DefaultCredentialSyncTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.CheckpointKeep <= 0 {
		opts.CheckpointKeep = checkpoint.DefaultCheckpointKeep
	}
	if err := preview.CheckDir(opts.PreviewDir); err != nil {
		return nil, err
	}
	if opts.Idmap == "" {
		opts.Idmap = IdmapAuto
	}
	if !opts.Idmap.valid() {
		return nil, fmt.Errorf("provisioning: idmap %q: want auto, isolated or shared", opts.Idmap)
	}
	p := &Preparer{
		lxd: opts.LXD, projects: opts.Projects, secrets: opts.Secrets,
		image: opts.Image, servers: opts.ImageServers, profiles: opts.Profiles, deps: opts.Deps, wired: n == 6,
		syncTimeout: opts.CredentialSyncTimeout, log: opts.Logger, idmap: opts.Idmap, repos: gitrepo.Cloner{X: opts.LXD, Chats: opts.Checkouts, Remote: opts.Git},
	}
	nd, _ := opts.LXD.(netdev.LXD)
	p.network = &netdev.Devices{Sockets: opts.Egress, LXD: nd, Classify: classify}
	ed, _ := opts.LXD.(preview.DeviceEditor)
	p.previews = &preview.Devices{Dir: opts.PreviewDir, Editor: ed, Log: opts.Logger, Classify: classify}
	snap, _ := opts.LXD.(checkpoint.Snapshotter)
	p.envs = &envsetup.Manager{X: opts.LXD, Lock: p.lifecycle.Lock, UID: opts.EnvUID, GID: opts.EnvGID, LogDir: opts.EnvLogDir,
		Logger: opts.Logger, Classify: classify}
	if snap != nil {
		p.envs.Snap = snap
	}
	if g, ok := opts.Egress.(netdev.Granter); ok && opts.Egress != nil {
		// The environment's own network: a credential of the project's
		// egress proxy in that exec's proxy variables only, revoked when
		// it exits. An open project's scripts reach everything anyway.
		p.envs.Proxy = func(proj api.Project, allow []string) (map[string]string, string, func()) {
			if netdev.Mode(proj) == api.NetworkOpen {
				return nil, "", func() {}
			}
			tok, revoke := g.Grant(proj.ID, allow)
			return netdev.SetupEnv(tok), tok, revoke
		}
	}
	p.checkpoints = &checkpoint.Manager{Snap: snap, Keep: opts.CheckpointKeep, Expiry: opts.CheckpointExpiry,
		Log: opts.Logger, Classify: classify, Lock: p.lifecycle.Lock, Resync: p.resyncPreviews, Limits: p.resyncLimits}
	return p, nil
}

// SetCaps sets the operator's caps of every project's limits
// ([projects.limits]; the project routes set them when they are made). A
// project whose stored limits are beyond them is clamped to them when its
// container is next created or started, and when a checkpoint is
// restored into it or forked from.
func (p *Preparer) SetCaps(caps api.ProjectLimits) { p.caps.Store(&caps) }

func (p *Preparer) capsNow() api.ProjectLimits {
	if c := p.caps.Load(); c != nil {
		return *c
	}
	return api.ProjectLimits{}
}

// Clamped is a project whose limits were lowered to the operator's caps:
// Project holds them now; Excess says what was beyond which cap.
type Clamped struct {
	Project api.Project
	Excess  []placement.Excess
}

// Message says what was clamped, for the project's owner.
func (c Clamped) Message() string {
	parts := make([]string, len(c.Excess))
	for i, e := range c.Excess {
		parts[i] = e.String()
	}
	return fmt.Sprintf("project %q: limits lowered to the operator's caps: %s", c.Project.Name, strings.Join(parts, "; "))
}

// clampLimits lowers proj's stored limits to the caps where they are
// beyond them (the store and, with apply, its container's LXD limits:
// before a start, so the container never runs above a cap). It returns
// proj as it now is and what was clamped (nil: nothing).
func (p *Preparer) clampLimits(ctx context.Context, proj api.Project, apply bool) (api.Project, *Clamped, error) {
	eff, ex := placement.Clamp(proj.Limits, p.capsNow())
	if len(ex) == 0 {
		return proj, nil, nil
	}
	next := proj
	next.Limits = eff
	if apply {
		if err := p.ApplyLimits(ctx, next); err != nil {
			return proj, nil, fmt.Errorf("lower the limits of project %q to the operator's caps: %w", proj.Name, err)
		}
	}
	_, err := p.projects.UpdateProject(proj.Name, func(pr *api.Project) error {
		if pr.ID != proj.ID {
			return fmt.Errorf("project %q: %w while its limits were lowered", proj.Name, ErrProjectReplaced)
		}
		pr.Limits = eff
		pr.UpdatedAt = time.Now().UTC()
		return nil
	})
	if err != nil {
		return proj, nil, fmt.Errorf("record the lowered limits of project %q: %w", proj.Name, err)
	}
	c := &Clamped{Project: next, Excess: ex}
	p.log.Warn("project limits lowered to the operator's caps", "project", proj.Name, "container", proj.Container, "detail", c.Message())
	return next, c, nil
}

// resyncLimits gives a restored or copied container proj's limits (the
// snapshot's config holds the limits of its time), clamped to the caps
// first.
func (p *Preparer) resyncLimits(ctx context.Context, proj api.Project) error {
	proj, _, err := p.clampLimits(ctx, proj, false)
	if err != nil {
		return err
	}
	return p.ApplyLimits(ctx, proj)
}

// Checkpoints lists the project's checkpoints, oldest first (see
// checkpoint.Manager).
func (p *Preparer) Checkpoints(ctx context.Context, proj api.Project) ([]api.Checkpoint, error) {
	return p.checkpoints.Checkpoints(ctx, proj)
}

// Restore restores the project's container in place from checkpoint name.
func (p *Preparer) Restore(ctx context.Context, proj api.Project, name string) error {
	return p.checkpoints.Restore(ctx, proj, name)
}

// Fork creates dst's container as a copy of src's checkpoint name, marked
// as dst's, with dst's limits (the copy's own are the checkpoint's); it is
// started by dst's first run. A copy whose limits cannot be set is
// deleted again.
func (p *Preparer) Fork(ctx context.Context, src api.Project, name string, dst api.Project) error {
	err := p.checkpoints.Fork(ctx, src, name, dst, map[string]string{MarkerKey: dst.ID, NameKey: dst.Name})
	if err != nil {
		if derr := p.Delete(context.WithoutCancel(ctx), dst); derr != nil { // only a container marked as dst's
			p.log.Warn("remove half-made fork container", "project", dst.Name, "container", dst.Container, "error", derr)
		}
	}
	return err
}

// WaitRetention returns when no checkpoint retention run is pending for
// proj's container (or ctx ends).
func (p *Preparer) WaitRetention(ctx context.Context, proj api.Project) error {
	return p.checkpoints.WaitRetention(ctx, proj)
}

// PreviewSocket is the host path of the Unix socket that reaches port on
// the loopback of proj's container while it runs; "" without a preview
// directory.
func (p *Preparer) PreviewSocket(proj api.Project, port int) string {
	return p.previews.Socket(proj, port)
}

// SyncPreviews makes the proxy devices of proj's container match its
// ports now (added and removed live while it runs). A container not
// created yet gets them when it is.
func (p *Preparer) SyncPreviews(ctx context.Context, proj api.Project) error {
	if p.previews.Dir == "" {
		return nil
	}
	return p.syncOwned(ctx, proj, func(inst *lxdexec.Instance) error { return p.previews.Sync(ctx, proj, inst) })
}

// syncOwned runs sync on proj's container under its lifecycle lock, once
// it is read and known to be proj's; a container not created yet is
// nothing to do (it gets its devices when it is).
func (p *Preparer) syncOwned(ctx context.Context, proj api.Project, sync func(*lxdexec.Instance) error) error {
	unlock, err := p.lifecycle.Lock(ctx, proj.Container)
	if err != nil {
		return err
	}
	defer unlock()
	inst, _, err := p.lxd.Instance(ctx, proj.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read container %q of project %q: %w", proj.Container, proj.Name, classify(err))
	}
	if _, err := owns(inst, proj); err != nil {
		return err
	}
	return sync(inst)
}

// CheckPool returns nil when LXD has the storage pool name, an error
// matching placement.ErrNoSuchPool when it does not, and an
// unavailability error (IsUnavailable) when LXD cannot be asked.
func (p *Preparer) CheckPool(ctx context.Context, name string) error {
	return placement.CheckPool(ctx, p.lxd, name, classify)
}

// ApplyLimits sets proj's limits on its container, live when it runs. A
// container not created yet gets them when it is created.
func (p *Preparer) ApplyLimits(ctx context.Context, proj api.Project) error {
	inst, _, err := p.lxd.Instance(ctx, proj.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read container %q of project %q: %w", proj.Container, proj.Name, classify(err))
	}
	if _, err := owns(inst, proj); err != nil {
		return err
	}
	if err := p.lxd.UpdateInstance(ctx, proj.Container, placement.LimitsPatch(proj, inst), ""); err != nil {
		return fmt.Errorf("apply limits to project %q: %w", proj.Name, classify(err))
	}
	return nil
}

// resyncPreviews sets a restored or copied container's preview devices.
func (p *Preparer) resyncPreviews(ctx context.Context, proj api.Project) error {
	inst, _, err := p.lxd.Instance(ctx, proj.Container)
	if err != nil {
		return nil // nothing to set on a container LXD cannot show
	}
	// The copy or the snapshot has the devices it had then: the project's
	// network now replaces them (its egress socket, its NICs).
	return errors.Join(p.previews.Sync(ctx, proj, inst), p.network.Sync(ctx, proj, inst))
}

// systemEvent builds a daemon-originated system event.
func systemEvent(subtype string, data any) providers.Event {
	raw, _ := json.Marshal(data)
	return providers.Event{Type: providers.EventSystem, Subtype: subtype, Data: raw}
}

// Prepare runs S9 in order and returns the run's target. It emits
// system/container_starting once when the container must be started or
// created (the stored status was not running, or was stale: S10), and
// system/container_preparing when the project has ports (the project's
// container ports enter provisioning on every preparation; none → no
// event).
func (p *Preparer) Prepare(ctx context.Context, req providers.PrepareRequest, emit func(providers.Event)) (providers.Target, error) {
	if emit == nil {
		emit = func(providers.Event) {}
	}
	// 1. Resolve the project; a run bound to a project id runs only in
	// that project, never in a later one of the same name.
	proj, err := p.projects.Project(req.ProjectID)
	if err != nil {
		return providers.Target{}, fmt.Errorf("resolve project %q: %w", req.ProjectID, err)
	}
	if req.ProjectUID != "" && proj.ID != req.ProjectUID {
		return providers.Target{}, fmt.Errorf("project %q: %w since the chat was created", proj.Name, ErrProjectReplaced)
	}
	if proj.Container == "" {
		return providers.Target{}, fmt.Errorf("project %q: %w", proj.Name, ErrNoContainer)
	}
	// 2. Always reconcile with LXD. container_starting is emitted once:
	// up front when the stored status is not running, or just before the
	// container is created or started when the stored status was stale
	// (LXD's lifecycle event not yet applied).
	starting := func() {
		emit(systemEvent("container_starting", map[string]string{"project": proj.Name, "container": proj.Container}))
	}
	if proj.Status != StatusRunning {
		starting()
		starting = func() {}
	}
	// The container's limits lowered to the operator's caps before it
	// started: the chat is told (system/limits_clamped).
	clamped := func(c Clamped) {
		data, _ := json.Marshal(map[string]any{"project": c.Project.Name, "limits": c.Project.Limits, "clamped": c.Excess})
		emit(providers.Event{Type: providers.EventSystem, Subtype: api.SubtypeLimitsClamped, Message: c.Message(), Data: data})
	}
	c, created, err := p.start(ctx, proj, starting, clamped)
	if err != nil {
		return providers.Target{}, err
	}
	// 3–4. Provisioning, when wired.
	if p.wired {
		if len(proj.Ports) > 0 {
			emit(systemEvent("container_preparing", map[string]any{"project": proj.Name, "container": proj.Container, "ports": proj.Ports}))
		}
		if err := p.provision(ctx, c, req, proj.Credentials != api.CredentialsProject); err != nil {
			return providers.Target{}, fmt.Errorf("prepare project %q for %s: %w", proj.Name, req.Provider, classify(err))
		}
	}
	// 5. Secrets, best effort. They are stored by project name: the
	// project still having its id after they were read shows they are its
	// own (ids are never reused), not a later project's of that name.
	secrets := p.loadSecrets(proj.Name)
	cur, err := p.projects.Project(proj.Name)
	if err != nil {
		return providers.Target{}, fmt.Errorf("resolve project %q again: %w", proj.Name, err)
	}
	if cur.ID != proj.ID {
		return providers.Target{}, fmt.Errorf("project %q: %w while it was prepared", proj.Name, ErrProjectReplaced)
	}
	// 6. The turn's checkpoint, when the caller asked for one: after the
	// container is ready, before the CLI starts; a failure is reported,
	// never fatal. None when this preparation created the container
	// (docs/operating.md, "Warm containers"): there is nothing in it to
	// restore to.
	// 5b. The project's repository (docs/operating.md, "A repository per
	// project"): cloned when /workspace has none (an event either way),
	// the turn's tree recorded. The token
	// secret goes to git only, never into the run's environment.
	// The chat's branch is then made ready where it works (its worktree:
	// the run's cwd); a refusal fails the turn.
	var cwd string
	if cur.Repo != nil {
		var token string
		secrets, token = gitrepo.TakeToken(secrets, cur.Repo.TokenSecret)
		// The webhook secret stays out too: with it an agent could forge
		// the deliveries that start chats.
		secrets, _ = gitrepo.TakeToken(secrets, cur.Repo.WebhookSecret)
		sub, data, dir, err := p.repos.Ensure(ctx, c.Name, cur.ID, req.Chat, *cur.Repo, token, checkpoint.TreeHook(ctx))
		if sub != "" {
			emit(systemEvent(sub, data))
		}
		if err != nil {
			return providers.Target{}, err // it names the chat's branch
		}
		cwd = dir
	}
	// 5c. The project's environment (its setup once per cache key, kept
	// as a snapshot; its maintenance once per chat on one already set
	// up). A failure fails the turn: it never starts on a half-set-up
	// container. The secrets the setup names are the setup's only.
	setupOnly, err := p.envs.Prepare(ctx, envsetup.Container(c), cur, req.Chat, false, secrets, emit)
	secrets = slices.DeleteFunc(secrets, func(s providers.Secret) bool { return slices.Contains(setupOnly, s.Key) })
	if err != nil {
		return providers.Target{}, fmt.Errorf("prepare the environment of project %q: %w", cur.Name, err)
	}
	p.checkpoints.Take(ctx, cur, created)
	return providers.Target{ProjectID: proj.Name, Container: proj.Container, Secrets: secrets, Cwd: cwd,
		SharedCredentials: cur.Credentials != api.CredentialsProject}, nil
}

// provision runs the provisioning steps; sharedCredentials is false for a
// project with its own login (api.CredentialsProject): the host's
// credentials are then never pushed.
func (p *Preparer) provision(ctx context.Context, c Container, req providers.PrepareRequest, sharedCredentials bool) error {
	d := p.deps
	if err := d.CLI.EnsureCLI(ctx, c, req.Provider); err != nil {
		return err
	}
	if sharedCredentials {
		if err := d.Credentials.PushCredentials(ctx, c, req.Provider); err != nil {
			return err
		}
	}
	if err := d.Workspace.PublishInstructions(ctx, c, req.Provider); err != nil {
		return err
	}
	if err := d.Assets.PublishAssets(ctx, c, req.Provider); err != nil {
		return err
	}
	if err := d.Workspace.PublishSkills(ctx, c, req.Provider, req.Skills); err != nil {
		return err
	}
	if err := d.Browser.ApplyBrowser(ctx, c, req.Provider, req.EnableBrowser); err != nil {
		return err
	}
	if req.EnableScheduleTools {
		if err := d.Workspace.PublishScheduleTools(ctx, c, req.Provider); err != nil {
			return err
		}
	}
	return d.Lifecycle.EnableAutostart(ctx, c)
}

func (p *Preparer) loadSecrets(project string) []providers.Secret {
	if p.secrets == nil {
		return nil
	}
	s, err := p.secrets.ProjectSecrets(project)
	if err != nil {
		// The error text comes from the store; it never carries values.
		p.log.Warn("project secrets unavailable, running without them", "project", project, "error", err)
		return nil
	}
	return s
}

// SyncCredentials copies the provider's credentials back from the
// container when its copy is newer (S12). It gives up after the configured
// timeout even when LXD does not answer; the abandoned transfer finishes or
// fails in the background.
//
// A project with its own login (api.CredentialsProject) is never synced
// back: its container's login stays its own.
func (p *Preparer) SyncCredentials(ctx context.Context, t providers.Target, prov providers.ProviderID) error {
	if !p.wired {
		return nil
	}
	if t.ProjectID != "" {
		proj, err := p.projects.Project(t.ProjectID)
		if err != nil {
			return fmt.Errorf("sync %s credentials: resolve project %q: %w", prov, t.ProjectID, err)
		}
		if proj.Credentials == api.CredentialsProject {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.syncTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c := Container{Name: t.Container}
		if inst, _, err := p.lxd.Instance(ctx, t.Container); err == nil {
			c.UUID, c.Config = inst.Config["volatile.uuid"], inst.Config
		}
		done <- p.deps.Credentials.SyncCredentials(ctx, c, prov)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sync %s credentials from %q: %w", prov, t.Container, ctx.Err())
	}
}

// Start reconciles a project's container: it is created from the image
// when missing, started when not running, and the stored status is set to
// running. It returns the container's identity.
func (p *Preparer) Start(ctx context.Context, proj api.Project) (Container, error) {
	c, _, err := p.start(ctx, proj, func() {}, func(Clamped) {})
	return c, err
}

// start is Start; created reports that this call created the container.
func (p *Preparer) start(ctx context.Context, proj api.Project, starting func(), clamped func(Clamped)) (c Container, created bool, err error) {
	if proj.Container == "" {
		return Container{}, false, fmt.Errorf("project %q: %w", proj.Name, ErrNoContainer)
	}
	if proj.ID == "" {
		return Container{}, false, fmt.Errorf("project %q: %w", proj.Name, ErrNoProjectID)
	}
	inst, changed, created, err := p.ensureRunning(ctx, proj, sync.OnceFunc(starting), clamped)
	if err != nil {
		return Container{}, false, err
	}
	if proj.Status != StatusRunning || changed || placement.MemberName(inst.Location) != proj.Location {
		p.setStatusAt(proj.Name, StatusRunning, inst.Location)
	}
	return Container{Name: inst.Name, UUID: inst.Config["volatile.uuid"], Config: inst.Config}, created, nil
}

// Stop stops a project's container (clean shutdown, then force) and
// records the stored status. A missing container is recorded as missing.
func (p *Preparer) Stop(ctx context.Context, proj api.Project) error {
	if proj.Container == "" {
		return fmt.Errorf("project %q: %w", proj.Name, ErrNoContainer)
	}
	unlock, err := p.lifecycle.Lock(ctx, proj.Container)
	if err != nil {
		return err
	}
	defer unlock()
	inst, _, err := p.lxd.Instance(ctx, proj.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		p.setStatus(proj.Name, StatusMissing)
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop project %q: %w", proj.Name, classify(err))
	}
	if _, err := owns(inst, proj); err != nil {
		return err
	}
	if inst.Status != "Stopped" {
		err := p.lxd.SetState(ctx, proj.Container, lxdexec.StateRequest{Action: "stop", Timeout: 10})
		if err != nil {
			err = p.lxd.SetState(ctx, proj.Container, lxdexec.StateRequest{Action: "stop", Force: true})
		}
		if err != nil && !p.isState(ctx, proj.Container, "Stopped") {
			return fmt.Errorf("stop container %q: %w", proj.Container, classify(err))
		}
	}
	p.setStatus(proj.Name, StatusStopped)
	return nil
}

// Delete removes a project's container (forced stop first). A missing
// container is not an error.
func (p *Preparer) Delete(ctx context.Context, proj api.Project) error {
	if proj.Container == "" {
		return nil
	}
	unlock, err := p.lifecycle.Lock(ctx, proj.Container)
	if err != nil {
		return err
	}
	defer unlock()
	_ = p.checkpoints.WaitRetention(ctx, proj) // no retention run on a deleted container
	inst, _, err := p.lxd.Instance(ctx, proj.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete container %q: %w", proj.Container, classify(err))
	}
	if _, err := owns(inst, proj); err != nil {
		return err
	}
	if inst.Status != "Stopped" {
		if err := p.lxd.SetState(ctx, proj.Container, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil && !p.isState(ctx, proj.Container, "Stopped") {
			return fmt.Errorf("stop container %q: %w", proj.Container, classify(err))
		}
	}
	if err := p.lxd.DeleteInstance(ctx, proj.Container); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
		return fmt.Errorf("delete container %q: %w", proj.Container, classify(err))
	}
	p.previews.RemoveSockets(proj)
	return nil
}

func (p *Preparer) isState(ctx context.Context, name, status string) bool {
	inst, _, err := p.lxd.Instance(ctx, name)
	return err == nil && inst.Status == status
}

func (p *Preparer) setStatus(project, status string) { p.setStatusAt(project, status, "") }

// setStatusAt records status and, when not "", the cluster member.
func (p *Preparer) setStatusAt(project, status, location string) {
	location = placement.MemberName(location)
	_, err := p.projects.UpdateProject(project, func(pr *api.Project) error {
		pr.Status = status
		if location != "" {
			pr.Location = location
		}
		return nil
	})
	if err != nil {
		p.log.Warn("record project status", "project", project, "status", status, "error", err)
	}
}

// ensureRunning returns the running instance, creating and starting it as
// needed (changed: started, created: made by this call). Calls for one
// container are serialized: a second caller finds the container the
// first one made running.
//
// Before it creates or starts the container it lowers the project's
// limits to the operator's caps where they are beyond them (clampLimits),
// telling clamped.
func (p *Preparer) ensureRunning(ctx context.Context, proj api.Project, starting func(), clamped func(Clamped)) (inst *lxdexec.Instance, changed, created bool, err error) {
	unlock, err := p.lifecycle.Lock(ctx, proj.Container)
	if err != nil {
		return nil, false, false, err
	}
	defer unlock()
	inst, _, err = p.lxd.Instance(ctx, proj.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		// Not a missing container while LXD moves it between members.
		if moved, moving, merr := placement.AwaitMove(ctx, p.lxd, proj, MarkerKey, p.log, classify); merr != nil {
			return nil, false, false, merr
		} else if moving {
			inst, err = moved, nil
		}
	}
	switch {
	case errors.Is(err, lxdexec.ErrNotFound):
		starting()
		var c *Clamped
		if proj, c, err = p.clampLimits(ctx, proj, false); err != nil {
			return nil, false, false, err
		} else if c != nil {
			clamped(*c)
		}
		if err := p.create(ctx, proj, map[string]string{MarkerKey: proj.ID, NameKey: proj.Name}); err != nil {
			return nil, false, false, err
		}
		created = true
		inst, _, err = p.lxd.Instance(ctx, proj.Container)
		if err != nil {
			return nil, false, false, fmt.Errorf("read container %q after create: %w", proj.Container, classify(err))
		}
	case err != nil:
		return nil, false, false, fmt.Errorf("read container %q of project %q: %w", proj.Container, proj.Name, classify(err))
	}
	legacy, err := owns(inst, proj)
	if err != nil {
		// Never adopted, never destroyed: the operator decides.
		return nil, false, false, err
	}
	if legacy {
		if err := p.lxd.UpdateInstance(ctx, proj.Container, lxdexec.InstancePatch{Config: map[string]string{MarkerKey: proj.ID}}, ""); err != nil {
			return nil, false, false, fmt.Errorf("mark container %q: %w", proj.Container, classify(err))
		}
		p.log.Info("container from before project ids marked with its project's id", "project", proj.Name, "container", proj.Container, "id", proj.ID)
	}
	if inst.Config[warm.Key] == warm.Claimed { // a warm container's first preparation: as fresh as a new one
		created = true
		if err := p.lxd.UpdateInstance(ctx, proj.Container, lxdexec.InstancePatch{Config: map[string]string{warm.Key: warm.Used}}, ""); err != nil {
			return nil, false, false, fmt.Errorf("mark warm container %q used: %w", proj.Container, classify(err))
		}
	}
	if err := p.previews.Sync(ctx, proj, inst); err != nil { // before a start: a fork's copy has its origin's sockets
		p.log.Warn("project previews not set", "project", proj.Name, "error", err)
	}
	// Before a start, and on every preparation: a container whose network
	// is off or allowlist runs with no NIC, only the egress proxy.
	if err := p.network.Sync(ctx, proj, inst); err != nil {
		return nil, false, false, err
	}
	if inst.Status == "Running" {
		return inst, false, created, nil
	}
	starting()
	if _, c, err := p.clampLimits(ctx, proj, true); err != nil {
		return nil, false, false, err
	} else if c != nil {
		clamped(*c)
	}
	action := "start"
	if inst.Status == "Frozen" {
		action = "unfreeze"
	}
	// LXD may answer a start with "already running" while its GET said
	// otherwise (seen in CI under load: LXD reports a running container
	// whose monitor does not answer within 5 s as "Error"). Its answer to
	// the start is the one to trust.
	if err := p.lxd.SetState(ctx, proj.Container, lxdexec.StateRequest{Action: action, Timeout: int(time.Minute / time.Second)}); err != nil &&
		!errors.Is(err, lxdexec.ErrAlreadyInState) && !p.isState(ctx, proj.Container, "Running") {
		return nil, false, false, fmt.Errorf("start container %q of project %q: %w", proj.Container, proj.Name, classify(err))
	}
	inst, _, err = p.lxd.Instance(ctx, proj.Container)
	if err != nil {
		return nil, false, false, fmt.Errorf("read container %q after start: %w", proj.Container, classify(err))
	}
	return inst, true, created, nil
}

// CreateWarm is the warm pool's Create: a container of no project from the
// default image, profiles and uid map, its root on pool, with the CLIs of
// the providers clis names (nil: none) installed, best effort: a project's
// first preparation installs what is missing.
func (p *Preparer) CreateWarm(pool string, clis func() []providers.ProviderID) func(ctx context.Context, name string, config map[string]string) error {
	return func(ctx context.Context, name string, config map[string]string) error {
		if err := p.create(ctx, api.Project{Name: "(warm pool)", Container: name, Pool: pool}, config); err != nil || !p.wired || clis == nil {
			return err
		}
		inst, _, err := p.lxd.Instance(ctx, name)
		if err != nil {
			return fmt.Errorf("read warm container %q: %w", name, classify(err))
		}
		for _, id := range clis() {
			if err := p.deps.CLI.EnsureCLI(ctx, Container{Name: name, UUID: inst.Config["volatile.uuid"], Config: inst.Config}, id); err != nil {
				p.log.Warn("cli not installed in a warm container; a project's first preparation will", "container", name, "provider", id, "error", err)
			}
		}
		return nil
	}
}

// create makes the container from the image, config added to its config,
// and starts it; a container that cannot be started is deleted again (no
// half-created container).
func (p *Preparer) create(ctx context.Context, proj api.Project, config map[string]string) error {
	image := proj.Image
	if image == "" {
		image = p.image
	}
	config["boot.autostart"] = "true"
	p.log.Info("creating container", "project", proj.Name, "container", proj.Container, "image", image)
	src, err := p.servers.Source(image)
	if err != nil {
		return fmt.Errorf("create container %q: %w", proj.Container, err)
	}
	err = p.createInstance(ctx, proj, lxdexec.InstancesPost{
		Name:     proj.Container,
		Type:     "container",
		Source:   src,
		Profiles: p.profiles,
		Config:   config,
		Devices:  placement.RootOnPool(proj.Pool),
		Target:   proj.Target,
	})
	if errors.Is(err, lxdexec.ErrNotFound) {
		// The image went after the project was made (or was never
		// checked: LXD was unreachable then): say which and how to get it.
		if cerr := p.CheckImage(ctx, image); errors.Is(cerr, lxdimage.ErrNoSuchImage) {
			return fmt.Errorf("create container %q: %w", proj.Container, cerr)
		}
	}
	if err != nil {
		return fmt.Errorf("create container %q from image %q: %w", proj.Container, image, placement.TargetError(classify(err), proj.Target))
	}
	var rev revert.Reverter
	defer rev.Fail()
	rev.Add(func() {
		// The caller's context may be the reason for the failure.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = p.lxd.SetState(dctx, proj.Container, lxdexec.StateRequest{Action: "stop", Force: true})
		if err := p.lxd.DeleteInstance(dctx, proj.Container); err != nil {
			p.log.Error("undo container create", "container", proj.Container, "error", err)
		}
	})
	if proj.Limits != nil && *proj.Limits != (api.ProjectLimits{}) {
		if err := p.ApplyLimits(ctx, proj); err != nil {
			return err
		}
	}
	if err := p.lxd.SetState(ctx, proj.Container, lxdexec.StateRequest{Action: "start", Timeout: 60}); err != nil {
		return fmt.Errorf("start new container %q: %w", proj.Container, classify(err))
	}
	rev.Success()
	return nil
}

// ErrUnmarkedContainer means a container exists under the project's
// container name without the project's marker; it is never adopted.
var ErrUnmarkedContainer = errdefs.New(errdefs.ErrConflict, "container is not marked as the project's")

// ErrNoProjectID means a project has no id, so no container can be shown
// to be its own (the store gives every project one).
var ErrNoProjectID = errors.New("project has no id")

// owns returns nil when inst is proj's container: marked (MarkerKey) with
// proj's id. Otherwise it returns an error naming the container, wrapping
// ErrForeignContainer when it is marked as another project's and
// ErrUnmarkedContainer when it is not marked at all (made outside the
// daemon). Nothing is ever adopted: the operator who knows a container is
// the project's marks it by hand (README).
//
// The one exception, legacy true: a container from before project ids,
// marked only with the project's name (NameKey), that LXD created after
// the project was created: only the daemon made it, for this project (a
// container left by an earlier project of that name, or placed under the
// name in advance, predates it). The caller marks it with the id.
func owns(inst *lxdexec.Instance, proj api.Project) (legacy bool, err error) {
	if proj.ID == "" {
		return false, fmt.Errorf("project %q: %w", proj.Name, ErrNoProjectID)
	}
	switch id := inst.Config[MarkerKey]; {
	case id == proj.ID:
		return false, nil
	case id != "":
		return false, fmt.Errorf("container %q of project %q: %w (its %s differs); it is left as it is",
			proj.Container, proj.Name, ErrForeignContainer, MarkerKey)
	case inst.Config[NameKey] == proj.Name && !proj.CreatedAt.IsZero() && inst.CreatedAt.After(proj.CreatedAt):
		return true, nil
	}
	return false, fmt.Errorf("container %q of project %q: %w (no %s); it is never adopted: remove or rename it, "+
		"or, if it really is this project's, mark it: lxc config set %s %s %s",
		proj.Container, proj.Name, ErrUnmarkedContainer, MarkerKey, proj.Container, MarkerKey, proj.ID)
}
