package projectapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/daemon/egress"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/lxdexec"
	"remote/provisioning"
	"remote/provisioning/checkpoint"
	"remote/provisioning/envsetup"
	"remote/provisioning/gitrepo"
	"remote/provisioning/lxdimage"
	"remote/provisioning/warm"
)

// ProjectStore is what the project routes need of the store; *store.Store
// implements it.
type ProjectStore interface {
	CreateProject(p api.Project) error
	Project(name string) (api.Project, error)
	Projects() ([]api.Project, error)
	UpdateProject(name string, fn func(*api.Project) error) (api.Project, error)
	DeleteProject(name string) error
	PutSecret(project, key, value string) error
	SecretKeys(project string) ([]api.SecretInfo, error)
	Secrets(project string) ([]store.Secret, error)
	DeleteSecret(project, key string) error
}

var _ ProjectStore = (*store.Store)(nil)

// ChatStore is what the project routes need of the chats: a restore
// clears the sessions of the project's chats, the egress proxy's refusals
// find its running ones; *store.Store implements it.
type ChatStore interface {
	Chats() ([]api.Chat, error)
	UpdateChat(id string, fn func(*api.Chat) error) (api.Chat, error)
}

var _ ChatStore = (*store.Store)(nil)

// ChatHub is what the project routes need of the run hub: whether a chat
// runs, and the events a restore or a refusal of the egress proxy adds
// to its chats; *runhub.Hub implements it.
type ChatHub interface {
	Running(chatID string) bool
	Append(chatID string, ev api.Event) (api.Event, error)
	AppendAsync(chatID string, ev api.Event, done func(api.Event, error))
	Sync(chatID string)
}

// ProjectExecer starts processes in containers; *lxdexec.Client
// implements it.
type ProjectExecer interface {
	Exec(ctx context.Context, instance string, req lxdexec.ExecRequest) (*lxdexec.Exec, error)
}

// ProjectsOptions configure the project routes.
type ProjectsOptions struct {
	Store    ProjectStore
	Preparer *provisioning.Preparer
	Exec     ProjectExecer
	Logger   hclog.Logger
	// Chats and Hub are the daemon's chats and run hub (restore marks a
	// project's chats, the egress proxy's refusals reach its running
	// ones); nil: restore answers an internal error and refusals are only
	// logged.
	Chats ChatStore
	Hub   ChatHub
	// Limits ([projects.limits]) are the caps of every project's limits
	// (a capped field may be lowered, never raised above its cap nor
	// removed) and fill the limits a new project does not name. They are
	// the Preparer's caps too (SetCaps): a project beyond them, a cap
	// lowered since its limits were set, is clamped at its container's
	// next start.
	Limits api.ProjectLimits
	// DefaultPool is the storage pool of a new project naming none
	// ([projects] pool; "": the profile's root disk).
	DefaultPool string
	// Pools, Images and Targets are what a new project may name in pool,
	// image and target besides the default ("", always allowed):
	// [projects] allowed_pools, allowed_images, allowed_targets; nil
	// allows the default only.
	Pools, Images, Targets []string
	// FS describes, reads and writes files from inside containers (the
	// file routes answer 503 without it).
	FS ContainerFS
	// MaxFileOpsPerUser and MaxFileOpsPerProject bound the file requests
	// in flight (listings, downloads, uploads; 429 past them); 0: 8 and 4.
	MaxFileOpsPerUser, MaxFileOpsPerProject int
	// MaxUploadBytes bounds one upload ([projects] max_upload_bytes;
	// 0: no bound).
	MaxUploadBytes int64
	// FileUID and FileGID own uploaded files ([projects] container_uid,
	// container_gid: the container user).
	FileUID, FileGID int
	// PullOpenTimeout bounds a listing, and the wait for a file to
	// download to be opened in the container (the process there is
	// killed at it); 0: 30s.
	PullOpenTimeout time.Duration
	// Warm is the warm container pool a new project on the default
	// image and pool claims from ([projects] warm; nil: none).
	Warm *warm.Pool
	// Network is the operator's part of every project's network
	// ([projects.network]); nil (or a Preparer without an egress proxy):
	// every project is open, as before network modes.
	Network *egress.Compiled
	// Egress closes a deleted project's egress socket (nil: none).
	Egress interface{ Forget(projectID string) }
}

// Projects serves the project routes of docs/api.md.
type Projects struct {
	o   ProjectsOptions
	log hclog.Logger

	fileOps fileSlots // file requests in flight

	previewOnce sync.Once       // previewTransport
	previewTr   *http.Transport // dials the preview sockets only
}

// NewProjects returns the project routes; Store, Preparer and Exec are
// required.
func NewProjects(o ProjectsOptions) (*Projects, error) {
	if o.Store == nil || o.Preparer == nil || o.Exec == nil {
		return nil, errors.New("projects: store, preparer and exec are required")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if err := checkLimits(o.Limits); err != nil {
		return nil, fmt.Errorf("projects: [projects.limits]: %w", err)
	}
	if o.PullOpenTimeout <= 0 {
		o.PullOpenTimeout = 30 * time.Second
	}
	// The preparer clamps a project beyond the caps at its container's
	// next start (a cap lowered since its limits were set).
	o.Preparer.SetCaps(o.Limits)
	if o.MaxFileOpsPerUser <= 0 {
		o.MaxFileOpsPerUser = defaultFileOpsPerUser
	}
	if o.MaxFileOpsPerProject <= 0 {
		o.MaxFileOpsPerProject = defaultFileOpsPerProject
	}
	return &Projects{o: o, log: o.Logger}, nil
}

// Routes lists the project routes for the daemon's route table; every one
// needs a named user (X-Remote-User) and maps provisioning errors onto the
// API's error classes.
func (p *Projects) Routes() []daemon.Route {
	route := func(method, pattern string, h daemon.HandlerFunc) daemon.Route {
		return daemon.Route{Method: method, Pattern: pattern, Access: daemon.AccessUser, Handler: func(w http.ResponseWriter, r *http.Request) error {
			return projectError(h(w, r))
		}}
	}
	return append(p.previewRoutes(route),
		route(http.MethodPost, "/v1/projects", p.create),
		route(http.MethodGet, "/v1/projects", p.list),
		route(http.MethodGet, "/v1/projects/{name}", p.show),
		route(http.MethodDelete, "/v1/projects/{name}", p.remove),
		route(http.MethodPost, "/v1/projects/{name}/start", p.start),
		route(http.MethodPost, "/v1/projects/{name}/stop", p.stop),
		route(http.MethodPut, "/v1/projects/{name}/secrets/{key}", p.putSecret),
		route(http.MethodGet, "/v1/projects/{name}/secrets", p.listSecrets),
		route(http.MethodDelete, "/v1/projects/{name}/secrets/{key}", p.deleteSecret),
		route(http.MethodPost, "/v1/projects/{name}/exec", p.exec),
		route(http.MethodGet, "/v1/projects/{name}/terminal", p.terminal),
		route(http.MethodPatch, "/v1/projects/{name}", p.patch),
		route(http.MethodPost, "/v1/projects/{name}/network/allow", p.allowHost),
		route(http.MethodGet, "/v1/projects/{name}/environment", p.environment),
		route(http.MethodPost, "/v1/projects/{name}/environment/rebuild", p.rebuildEnvironment),
		route(http.MethodGet, "/v1/projects/{name}/environment/log", p.environmentLog),
		route(http.MethodGet, "/v1/projects/{name}/checkpoints", p.checkpoints),
		route(http.MethodPost, "/v1/projects/{name}/checkpoints/{checkpoint}/restore", p.restore),
		route(http.MethodGet, "/v1/projects/{name}/files", p.listFiles),
		route(http.MethodGet, "/v1/projects/{name}/files/raw", p.downloadFile),
		route(http.MethodPut, "/v1/projects/{name}/files/raw", p.uploadFile),
	)
}

var _ daemon.RouteProvider = (*Projects)(nil)

// projectError names LXD in an unavailable error of provisioning (an
// image server's names itself). The
// other classes (conflicts like a foreign container, invalid skills or
// checkpoint names) come classified from provisioning and lxdexec.
func projectError(err error) error {
	if errdefs.IsUnavailable(err) && !errors.Is(err, lxdimage.ErrServerUnavailable) {
		return fmt.Errorf("lxd is unreachable: %w", err)
	}
	return err
}

var (
	projectNameRE = lazyre.New(`^[a-z0-9](?:[a-z0-9-]{0,54}[a-z0-9])?$`)
	secretKeyRE   = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	imageRE       = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}$`)
)

// ContainerPrefix prefixes a project's name to form its container name, so
// a project never adopts an unrelated container of the same name.
const ContainerPrefix = "remote-"

// ContainerName is the container of project name with id: ContainerPrefix,
// the name (cut to fit) and the id's first 8 characters, so that a later
// project of the same name never finds the container a deleted one left
// (its marker, the full id, is checked besides). It is a valid LXD name:
// at most 63 characters of [a-z0-9-], not ending with a hyphen.
func ContainerName(name, id string) string {
	const maxLen, suffix = 63, 8
	name = name[:min(len(name), maxLen-len(ContainerPrefix)-1-suffix)]
	name = strings.TrimRight(name, "-")
	return ContainerPrefix + name + "-" + id[:min(len(id), suffix)]
}

// maxSecretValue bounds one secret value.
const maxSecretValue = 64 << 10

// lookup returns the caller's project or a 404 (another user's project
// is not found, exactly like a missing one).
func (p *Projects) lookup(r *http.Request) (api.Project, error) {
	name := r.PathValue("name")
	if !projectNameRE.MatchString(name) {
		return api.Project{}, errdefs.InvalidArgument("invalid project name %q: lowercase letters, digits and hyphens, at most 56", name)
	}
	proj, err := p.o.Store.Project(name)
	if err != nil {
		return api.Project{}, err // the store's errors already name the project
	}
	if !p.visible(r, proj) {
		return api.Project{}, fmt.Errorf("project %q: %w", name, errdefs.ErrNotFound)
	}
	return proj, nil
}

func (p *Projects) visible(r *http.Request, proj api.Project) bool {
	return proj.Owner == "" || proj.Owner == daemon.UserFrom(r.Context())
}

func (p *Projects) create(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateProjectRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	if !projectNameRE.MatchString(req.Name) {
		return errdefs.InvalidArgument("invalid name %q: lowercase letters, digits and hyphens, at most 56", req.Name)
	}
	if req.Image != "" && !imageRE.MatchString(req.Image) {
		return errdefs.InvalidArgument("invalid image %q", req.Image)
	}
	if err := allowed("image", req.Image, p.o.Images, "allowed_images"); err != nil {
		return err
	}
	if req.Provider != "" && !knownProvider(req.Provider) {
		return errdefs.InvalidArgument("unknown provider %q", req.Provider)
	}
	if err := checkPorts(req.Ports); err != nil {
		return err
	}
	if req.Credentials != "" && req.Credentials != api.CredentialsShared && req.Credentials != api.CredentialsProject {
		return errdefs.InvalidArgument("invalid credentials %q: want %q or %q", req.Credentials, api.CredentialsShared, api.CredentialsProject)
	}
	if req.Checkpoints != "" && req.Checkpoints != checkpoint.CheckpointsTurn && req.Checkpoints != checkpoint.CheckpointsOff {
		return errdefs.InvalidArgument("invalid checkpoints %q: turn or off", req.Checkpoints)
	}
	if req.Target != "" && !targetRE.MatchString(req.Target) {
		return errdefs.InvalidArgument("invalid target %q: a cluster member name or @group", req.Target)
	}
	if err := allowed("target", req.Target, p.o.Targets, "allowed_targets"); err != nil {
		return err
	}
	if req.Repo != nil {
		if err := gitrepo.ValidateRepo(*req.Repo, secretKeyRE.MatchString); err != nil {
			return err
		}
	}
	if req.Environment != nil {
		if err := p.checkEnvironment(*req.Environment, req.Repo); err != nil {
			return err
		}
		if envsetup.Empty(req.Environment) {
			req.Environment = nil
		}
	}
	limits, err := p.newLimits(req.Limits)
	if err != nil {
		return err
	}
	network, err := p.newNetwork(req.Network)
	if err != nil {
		return err
	}
	pool, err := p.newPool(r.Context(), req.Pool)
	if err != nil {
		return err
	}
	if err := p.newImage(r.Context(), req.Image); err != nil {
		return err
	}
	autostart := true
	if req.Autostart != nil {
		autostart = *req.Autostart
	}
	now := time.Now().UTC()
	id := store.NewProjectID()
	proj := api.Project{
		ID: id, Name: req.Name, Owner: daemon.UserFrom(r.Context()), Container: ContainerName(req.Name, id),
		Image: req.Image, Provider: req.Provider, Ports: req.Ports, Autostart: autostart, Checkpoints: req.Checkpoints, Limits: limits,
		Status: provisioning.StatusMissing, CreatedAt: now, UpdatedAt: now, Credentials: req.Credentials, Pool: pool,
		Target: req.Target, Repo: req.Repo, Network: network, Environment: req.Environment,
	}
	claimed := p.claimWarm(r.Context(), &proj)
	if err := p.o.Store.CreateProject(proj); err != nil {
		if claimed {
			p.o.Warm.Discard(proj.Container) // marked with an id no project has
		}
		return err // the store's errors already name the project
	}
	p.log.Info("project created", "project", proj.Name, "id", proj.ID, "owner", proj.Owner, "container", proj.Container, "warm", claimed)
	_ = daemon.WriteJSON(w, http.StatusCreated, proj)
	return nil
}

// claimWarm gives a new project on the default image and pool a warm
// container (docs/operating.md, "Warm containers"): already running, marked with the project's id,
// with the project's limits. false: none was ready; the project's own
// container is created at its first start, as without a pool.
func (p *Projects) claimWarm(ctx context.Context, proj *api.Project) bool {
	if !p.o.Warm.Matches(proj.Image, proj.Pool, proj.Target) {
		return false
	}
	c := p.o.Warm.Claim(ctx, proj.ID, proj.Name)
	if c == "" {
		return false
	}
	claimed := *proj
	claimed.Container, claimed.Status = c, provisioning.StatusRunning
	if claimed.Limits != nil && *claimed.Limits != (api.ProjectLimits{}) {
		if err := p.o.Preparer.ApplyLimits(ctx, claimed); err != nil {
			p.log.Warn("warm container left: the project's limits were refused", "container", c, "project", proj.Name, "error", err)
			p.o.Warm.Discard(c)
			return false
		}
	}
	*proj = claimed
	return true
}

func knownProvider(id string) bool {
	switch id {
	case "claude", "codex", "minimax", "kimi", "antigravity":
		return true
	}
	return false
}

func (p *Projects) list(w http.ResponseWriter, r *http.Request) error {
	all, err := p.o.Store.Projects()
	if err != nil {
		return fmt.Errorf("list projects: %w", err)
	}
	out := make([]api.Project, 0, len(all))
	for _, proj := range all {
		if p.visible(r, proj) {
			out = append(out, proj)
		}
	}
	_ = daemon.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (p *Projects) show(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	_ = daemon.WriteJSON(w, http.StatusOK, proj)
	return nil
}

func (p *Projects) remove(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	purge := r.URL.Query().Get("purge")
	if purge != "" && purge != "true" && purge != "false" {
		return errdefs.InvalidArgument("invalid purge %q: true or false", purge)
	}
	if purge == "true" {
		if err := p.o.Preparer.Delete(r.Context(), proj); err != nil {
			return err
		}
	}
	if err := p.o.Store.DeleteProject(proj.Name); err != nil {
		return fmt.Errorf("delete project: %w", err) // the store's error names it
	}
	if p.o.Egress != nil {
		p.o.Egress.Forget(proj.ID) // a container left behind has no way out
	}
	p.log.Info("project deleted", "project", proj.Name, "id", proj.ID, "purge", purge == "true")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (p *Projects) start(w http.ResponseWriter, r *http.Request) error {
	return p.act(w, r, func(ctx context.Context, proj api.Project) error {
		_, err := p.o.Preparer.Start(ctx, proj)
		return err
	})
}

func (p *Projects) stop(w http.ResponseWriter, r *http.Request) error {
	return p.act(w, r, p.o.Preparer.Stop)
}

// act runs do on the caller's project and answers with the project as
// stored afterwards (do updates its status).
func (p *Projects) act(w http.ResponseWriter, r *http.Request, do func(context.Context, api.Project) error) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	if err := do(r.Context(), proj); err != nil {
		return err
	}
	proj, err = p.o.Store.Project(proj.Name)
	if err != nil {
		return err // the store's errors already name the project
	}
	_ = daemon.WriteJSON(w, http.StatusOK, proj)
	return nil
}

func (p *Projects) secretKey(r *http.Request) (string, error) {
	key := r.PathValue("key")
	if !secretKeyRE.MatchString(key) {
		return "", errdefs.InvalidArgument("invalid secret key %q: must match ^[A-Za-z_][A-Za-z0-9_]*$", key)
	}
	return key, nil
}

func (p *Projects) putSecret(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	key, err := p.secretKey(r)
	if err != nil {
		return err
	}
	var req api.PutSecretRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return errdefs.InvalidArgument("invalid secret body: expected {\"value\": string}")
	}
	if len(req.Value) > maxSecretValue {
		return errdefs.InvalidArgument("secret %s value: longer than %d bytes", key, maxSecretValue)
	}
	if err := p.o.Store.PutSecret(proj.Name, key, req.Value); err != nil {
		return fmt.Errorf("store secret: %w", err) // the store's error names the project or key
	}
	p.log.Info("project secret set", "project", proj.Name, "key", key)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (p *Projects) listSecrets(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	keys, err := p.o.Store.SecretKeys(proj.Name)
	if err != nil {
		return fmt.Errorf("list secrets: %w", err) // the store's error names the project
	}
	if keys == nil {
		keys = []api.SecretInfo{}
	}
	_ = daemon.WriteJSON(w, http.StatusOK, keys)
	return nil
}

func (p *Projects) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	key, err := p.secretKey(r)
	if err != nil {
		return err
	}
	if err := p.o.Store.DeleteSecret(proj.Name, key); err != nil {
		return fmt.Errorf("delete secret: %w", err) // the store's error names the secret and project
	}
	p.log.Info("project secret deleted", "project", proj.Name, "key", key)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
