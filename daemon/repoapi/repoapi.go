package repoapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/provisioning"
	"remote/provisioning/gitrepo"
)

// DefaultMaxPatchBytes bounds a diff's patch when Options leaves it zero.
const DefaultMaxPatchBytes = 1 << 20

// Bounds of the diffs across the daemon (security review finding 5): what
// one diff may hold is bounded by gitrepo (its patch, files, paths and
// listing; gitrepo.DiffMemory); these bound them all together.
const (
	// DefaultDiffMemory is the memory all diffs in progress may hold
	// together, each counted at its worst case (gitrepo.DiffMemory).
	DefaultDiffMemory = 256 << 20
	// DefaultDiffsPerUser is how many diffs one user may have in progress.
	DefaultDiffsPerUser = 2
	// DiffTimeout ends a diff that runs longer (its git in the container).
	DiffTimeout = 2 * time.Minute
)

// ProjectStore is what the repository routes need of the store.
type ProjectStore interface {
	Project(name string) (api.Project, error)
	Secrets(project string) ([]store.Secret, error)
}

// Starter makes a project's container run (the preparer).
type Starter interface {
	Start(ctx context.Context, proj api.Project) (provisioning.Container, error)
}

// ChatStore is what the repository routes need of the chats; *store.Store
// implements it.
type ChatStore interface {
	Chat(id string) (api.Chat, error)
	Chats() ([]api.Chat, error)
	CreateChat(c api.Chat) error
	Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error
}

var _ ChatStore = (*store.Store)(nil)

// ChatHub is what the repository routes need of the run hub: which chats
// run, the events a push adds, and every stored event (a forge issue's
// chat answers its issue when a turn ends); *runhub.Hub implements it.
type ChatHub interface {
	Running(chatID string) bool
	Active() map[string]runhub.Run
	Append(chatID string, ev api.Event) (api.Event, error)
	Observe(fn func(chatID string, ev api.Event))
}

var _ ChatHub = (*runhub.Hub)(nil)

// Enqueuer submits a prompt to a chat (the prompt service): a forge
// issue's comment becomes its chat's next prompt.
type Enqueuer interface {
	Enqueue(ctx context.Context, chatID string, in prompt.Input) (runID, qid string, err error)
}

// Options configure the repository routes.
type Options struct {
	Store   ProjectStore
	Starter Starter
	Exec    gitrepo.Execer
	// Chats, Hub and Prompts are the daemon's chats, run hub and prompt
	// service; without all three the routes that reach a chat answer an
	// internal error.
	Chats   ChatStore
	Hub     ChatHub
	Prompts Enqueuer
	// Git pushes and asks for the default branch from the host, with the
	// token (which never enters the container); nil: a temporary mirror
	// per push. The preparer's clones share it.
	Git *gitrepo.Remote
	// MaxPatchBytes bounds a diff's patch ([projects] max_diff_bytes);
	// zero means DefaultMaxPatchBytes.
	MaxPatchBytes int
	// MaxDiffFiles bounds the files one diff lists; zero means
	// gitrepo.DefaultMaxDiffFiles.
	MaxDiffFiles int
	// DiffMemory bounds the memory of all diffs in progress together
	// (each counted at gitrepo.DiffMemory); zero means DefaultDiffMemory.
	// One diff always fits: a smaller budget runs one at a time.
	DiffMemory int64
	// DiffsPerUser bounds one user's diffs in progress; zero means
	// DefaultDiffsPerUser.
	DiffsPerUser int
	// AuthorName and AuthorEmail sign a push's commit ([projects]
	// git_author_name, git_author_email); "" takes the acting user.
	AuthorName, AuthorEmail string
	// Forge returns the opener of pull requests on the forge configured
	// for repoURL's host, or an error naming the host and its config key
	// when there is none; it sends nothing. cmd/remoted adapts package
	// forge over [forges]. nil: no forge is configured.
	Forge func(repoURL string) (Opener, error)
	// Hooks returns the forge of repoURL's host for the webhook intake
	// (POST /v1/projects/{name}/forge-events), or an error naming the
	// host; nil: no forge is configured.
	Hooks func(repoURL string) (HookForge, error)
	// DefaultProvider makes a forge issue's chat in a project without a
	// provider of its own ([agent] default_provider).
	DefaultProvider string
	// PageURL is the page's public URL (https://remote.example), for the
	// chat links the daemon comments on issues; "": the chat's id.
	PageURL string
	Logger  hclog.Logger
}

// PullRequest is what the routes ask a forge to open: the pushed branch
// (head) into base.
type PullRequest struct {
	Head, Base, Title, Body string
	// Draft asks for a draft where the forge has them.
	Draft bool
}

// Opener opens a pull request on one repository's forge with the user's
// token and returns its page and number; the token never appears in its
// errors.
type Opener func(ctx context.Context, token string, pr PullRequest) (url string, number int, err error)

// Routes serves the repository routes.
type Routes struct {
	o     Options
	srv   *daemonSide // nil without Options.Chats, Hub and Prompts
	diffs *diffBudget
	hooks hookState
}

// New returns the routes, watching the ends of turns on o.Hub (a forge
// issue's chat answers its issue); Store, Starter and Exec are required.
func New(o Options) (*Routes, error) {
	if o.Store == nil || o.Starter == nil || o.Exec == nil {
		return nil, errors.New("repoapi: store, starter and exec are required")
	}
	if o.Git == nil {
		o.Git = &gitrepo.Remote{}
	}
	if o.MaxPatchBytes <= 0 {
		o.MaxPatchBytes = DefaultMaxPatchBytes
	}
	if o.MaxDiffFiles <= 0 {
		o.MaxDiffFiles = gitrepo.DefaultMaxDiffFiles
	}
	if o.DiffMemory <= 0 {
		o.DiffMemory = DefaultDiffMemory
	}
	if o.DiffsPerUser <= 0 {
		o.DiffsPerUser = DefaultDiffsPerUser
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Forge == nil {
		o.Forge = func(string) (Opener, error) {
			return nil, errdefs.FailedPrecondition("no forge is configured: the operator adds [forges.\"<host>\"] kind and api to the daemon's configuration")
		}
	}
	if o.Hooks == nil {
		o.Hooks = func(string) (HookForge, error) {
			return nil, errdefs.FailedPrecondition("no forge is configured: the operator adds [forges.\"<host>\"] kind and api to the daemon's configuration")
		}
	}
	rt := &Routes{o: o, diffs: diffBudgetFor(o)}
	if o.Chats != nil && o.Hub != nil && o.Prompts != nil {
		rt.srv = &daemonSide{store: o.Chats, hub: o.Hub, prompts: o.Prompts}
		o.Hub.Observe(rt.observe)
	}
	return rt, nil
}

var errNoChats = errors.New("repository routes have no chats (repoapi.Options.Chats, Hub, Prompts)")

// daemonSide is what the routes reach of the daemon: its chats, run hub
// and prompt service.
type daemonSide struct {
	store   ChatStore
	hub     ChatHub
	prompts Enqueuer
}

func (d *daemonSide) Store() ChatStore  { return d.store }
func (d *daemonSide) Hub() ChatHub      { return d.hub }
func (d *daemonSide) Prompts() Enqueuer { return d.prompts }

// Routes lists the repository routes; all act for a named user.
func (rt *Routes) Routes() []daemon.Route {
	return []daemon.Route{
		{Method: http.MethodGet, Pattern: "/v1/chats/{id}/diff", Access: daemon.AccessUser, Handler: rt.diff},
		{Method: http.MethodPost, Pattern: "/v1/chats/{id}/push", Access: daemon.AccessUser, Handler: rt.push},
		{Method: http.MethodPost, Pattern: "/v1/chats/{id}/pull-request", Access: daemon.AccessUser, Handler: rt.pullRequest},
		// A forge's webhook, relayed by remote-web: a peer route whose
		// handler admits only peers that may assert users.
		{Method: http.MethodPost, Pattern: "/v1/projects/{name}/forge-events", Access: daemon.AccessPeer, Handler: rt.forgeEvents},
	}
}

var _ daemon.RouteProvider = (*Routes)(nil)

var chatIDRE = lazyre.New(`^[0-9a-f]{4,32}$`)

// target is a chat of the caller's with its project's repository and a
// running container.
type target struct {
	srv     *daemonSide
	chat    api.Chat
	proj    api.Project
	repo    api.ProjectRepo
	contain string
}

// resolve loads the caller's chat and its project (lookup) and starts
// its container.
func (rt *Routes) resolve(r *http.Request) (target, error) {
	t, err := rt.lookup(r)
	if err != nil {
		return target{}, err
	}
	return rt.start(r.Context(), t)
}

// start makes t's project container run.
func (rt *Routes) start(ctx context.Context, t target) (target, error) {
	c, err := rt.o.Starter.Start(ctx, t.proj)
	if err != nil {
		return target{}, err
	}
	t.contain = c.Name
	return t, nil
}

// lookup loads the caller's chat (another user's chat is not found,
// like a missing one) and its project (still the one the chat was made
// in, with a repository), without touching its container.
func (rt *Routes) lookup(r *http.Request) (target, error) {
	srv := rt.srv
	if srv == nil {
		return target{}, errNoChats
	}
	id := r.PathValue("id")
	if !chatIDRE.MatchString(id) {
		return target{}, errdefs.InvalidArgument("id: invalid chat id %q (want 4-32 lowercase hex characters)", id)
	}
	chat, err := srv.Store().Chat(id)
	if err != nil || chat.Owner != daemon.UserFrom(r.Context()) {
		if err != nil && !errdefs.IsNotFound(err) {
			return target{}, fmt.Errorf("load chat %s: %w", id, err)
		}
		return target{}, fmt.Errorf("chat %s: %w", id, errdefs.ErrNotFound)
	}
	if chat.Project == "" {
		return target{}, errdefs.FailedPrecondition("chat %s is a loose chat: only a project chat has a repository", id)
	}
	proj, err := rt.o.Store.Project(chat.Project)
	if err != nil {
		return target{}, err
	}
	if chat.ProjectID != "" && proj.ID != chat.ProjectID || proj.Owner != "" && proj.Owner != chat.Owner {
		return target{}, fmt.Errorf("project %q: %w since the chat was created", proj.Name, provisioning.ErrProjectReplaced)
	}
	if proj.Repo == nil {
		return target{}, errdefs.FailedPrecondition("project %q has no repository (repo on project create)", proj.Name)
	}
	return target{srv: srv, chat: chat, proj: proj, repo: *proj.Repo}, nil
}

// diff serves GET /v1/chats/{id}/diff[?turn=SEQ]. A GET never starts a
// container (security review finding 6): a project whose container is not
// running is refused as the file routes refuse it. The diff is admitted
// by the daemon's diff budget (diffBudget) and bounded by gitrepo.
func (rt *Routes) diff(w http.ResponseWriter, r *http.Request) error {
	var turn int64
	if s := r.URL.Query().Get("turn"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return errdefs.InvalidArgument("turn: %q is not a positive seq", s)
		}
		turn = n
	}
	t, err := rt.lookup(r)
	if err != nil {
		return err
	}
	if err := notRunning(t.proj); err != nil {
		return err
	}
	var base, head string // "": the clone's base, the working tree now
	if turn != 0 {
		if base, head, err = turnTrees(t.srv.Store(), t.chat.ID, turn); err != nil {
			return err
		}
	}
	release, err := rt.diffs.acquire(daemon.UserFrom(r.Context()))
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), DiffTimeout)
	defer cancel()
	// Without turn: the chat's working tree (its worktree, else
	// /workspace) against the clone's base.
	dir := gitrepo.Checkout{Chat: t.chat.ID, Branch: t.chat.Branch, Worktree: t.chat.Worktree}.Dir()
	d, err := gitrepo.Diff(ctx, rt.o.Exec, t.proj.Container, dir, base, head,
		gitrepo.DiffLimits{MaxPatch: rt.o.MaxPatchBytes, MaxFiles: rt.o.MaxDiffFiles})
	if err != nil {
		return diffError(t.proj, err, ctx.Err() != nil && r.Context().Err() == nil)
	}
	return daemon.WriteJSON(w, http.StatusOK, d)
}

// notRunning refuses a project whose container is known not to run, as
// the file routes and previews do: a GET never starts one, so a link in
// agent-written Markdown cannot.
func notRunning(proj api.Project) error {
	if proj.Container != "" && proj.Status != provisioning.StatusStopped && proj.Status != provisioning.StatusMissing {
		return nil
	}
	state := cmp.Or(proj.Status, "not created")
	return &daemon.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
		Message: fmt.Sprintf("project %q is not running (its container is %s): start it with POST /v1/projects/%s/start", proj.Name, state, proj.Name)}
}

// diffError names the bound a refused diff met: 413 for a diff beyond
// one diff's bounds (gitrepo.TooLargeError), 503 for one that ran past
// DiffTimeout.
func diffError(proj api.Project, err error, timedOut bool) error {
	var tl *gitrepo.TooLargeError
	switch {
	case errors.As(err, &tl):
		return &daemon.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeBadRequest, Err: err,
			Message: tl.Error() + ": diff one turn (?turn=), or push the chat and compare its branch on the forge"}
	case timedOut:
		return errdefs.Unavailable("the diff took longer than %s (git in project %q's container): retry, or diff one turn (?turn=)", DiffTimeout, proj.Name)
	}
	return err
}

// turnTrees finds the tree recorded at turn's start and the one recorded
// at the next turn's start ("" when turn is the last: the working tree
// now). The head is the next turn's record, the first turn_tree after
// turn's: never a later turn's, which would show the turns between as
// turn's (a next turn whose tree was not recorded is refused instead).
func turnTrees(st interface {
	Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error
}, chatID string, turn int64) (string, string, error) {
	var base, head string
	next := int64(0) // the next turn's seq, once found
	var nextErr string
	stop := errors.New("stop")
	err := st.Events(chatID, turn-1, 0, func(ev api.Event) error {
		if ev.Type != api.EventSystem || ev.Subtype != api.SubtypeTurnTree {
			return nil
		}
		var d struct {
			Turn  int64  `json:"turn"`
			Tree  string `json:"tree"`
			Error string `json:"error"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return nil
		}
		switch {
		case d.Turn == turn && base == "":
			base = d.Tree
			if base == "" {
				return stop // turn's own tree was not recorded
			}
		case d.Turn > turn && base != "":
			head, next, nextErr = d.Tree, d.Turn, d.Error
			return stop
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return "", "", fmt.Errorf("read events of chat %s: %w", chatID, err)
	}
	if base == "" {
		return "", "", fmt.Errorf("turn %d of chat %s has no recorded tree: %w", turn, chatID, errdefs.ErrNotFound)
	}
	if next != 0 && head == "" {
		return "", "", errdefs.FailedPrecondition("turn %d of chat %s ends where turn %d starts, whose tree was not recorded (%s)",
			turn, chatID, next, cmp.Or(nextErr, "no tree"))
	}
	return base, head, nil
}

// push serves POST /v1/chats/{id}/push {message?, all?, paths?}; the
// paths are checked before the chat or its container is looked at.
func (rt *Routes) push(w http.ResponseWriter, r *http.Request) error {
	var req api.PushRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	if len(req.Message) > 64<<10 {
		return errdefs.InvalidArgument("message: longer than 65536 bytes")
	}
	if req.All && len(req.Paths) > 0 {
		return errdefs.InvalidArgument("all and paths: give one of them (all: every untracked file .gitignore does not ignore; paths: only these)")
	}
	if err := gitrepo.CheckPaths(req.Paths); err != nil {
		return err
	}
	t, err := rt.resolve(r)
	if err != nil {
		return err
	}
	if t.srv.Hub().Running(t.chat.ID) {
		return errdefs.Conflict("chat %s is running; push when its turn has ended", t.chat.ID)
	}
	token, err := rt.token(t.proj)
	if err != nil {
		return err
	}
	res, err := rt.commitAndPush(r.Context(), t, daemon.UserFrom(r.Context()), req, token)
	if err != nil {
		return err
	}
	return daemon.WriteJSON(w, http.StatusOK, res)
}

// commitAndPush commits what is uncommitted on the chat's branch (what
// req's All and Paths say; message "" takes the default) and pushes the
// branch with token, recording system/pushed in the chat.
func (rt *Routes) commitAndPush(ctx context.Context, t target, user string, req api.PushRequest, token string) (api.PushResult, error) {
	co, err := rt.checkout(t.srv, t.chat)
	if err != nil {
		return api.PushResult{}, err
	}
	p := gitrepo.Push{URL: t.repo.URL, Branch: cmp.Or(t.chat.Branch, Branch(t.chat.ID)), Message: req.Message, Token: token,
		AuthorName: rt.o.AuthorName, AuthorEmail: rt.o.AuthorEmail, Dir: co.Dir(), Busy: co.Busy && !co.Worktree,
		All: req.All, Paths: req.Paths}
	if co.Branch != "" { // its branch made ready where it works, as a turn does
		if p.Dir, err = gitrepo.CheckOut(ctx, rt.o.Exec, t.contain, co); err != nil {
			return api.PushResult{}, err
		}
	}
	if strings.TrimSpace(p.Message) == "" {
		p.Message = "Changes from Remote chat " + t.chat.ID
	}
	if p.AuthorName == "" {
		p.AuthorName = user
	}
	if p.AuthorEmail == "" {
		p.AuthorEmail = user + "@localhost"
	}
	sha, err := gitrepo.CommitAndPush(ctx, rt.o.Exec, rt.o.Git, t.proj.ID, t.contain, p)
	if err != nil {
		return api.PushResult{}, err
	}
	res := api.PushResult{Branch: p.Branch, SHA: sha}
	if err := rt.record(t, api.SubtypePushed, res); err != nil {
		return api.PushResult{}, err
	}
	rt.o.Logger.Info("chat branch pushed", "chat", t.chat.ID, "project", t.proj.Name, "branch", p.Branch, "sha", sha, "user", user)
	return res, nil
}

// record appends a system event with data to t's chat.
func (rt *Routes) record(t target, subtype string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := t.srv.Hub().Append(t.chat.ID, api.Event{Type: api.EventSystem, Subtype: subtype, Data: b, T: time.Now().UnixMilli()}); err != nil {
		return fmt.Errorf("record %s in chat %s: %w", subtype, t.chat.ID, err)
	}
	return nil
}

// Bounds of a pull request's fields (GitHub's title limit is 256
// characters, GitLab's description 1,048,576).
const (
	maxTitleBytes = 1024
	maxBodyBytes  = 1 << 20
)

// pullRequest serves POST /v1/chats/{id}/pull-request {title, body?,
// base?}: push, then open the pull request. Everything that needs no
// container (the caller's chat, the forge of the repository's host, the
// token) is checked first, so a refusal touches neither the container nor
// the forge. The chat's branch is committed (the title is the commit
// message) and pushed as by push, then the pull request of that branch
// into base (the request's, else the project's repo.ref, else the
// repository's default branch) is opened on the forge configured for the
// repository's host, with the project's token.
func (rt *Routes) pullRequest(w http.ResponseWriter, r *http.Request) error {
	var req api.PullRequestRequest
	if err := daemon.DecodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(req.Title) == "":
		return errdefs.InvalidArgument("title: must not be empty")
	case len(req.Title) > maxTitleBytes:
		return errdefs.InvalidArgument("title: longer than %d bytes", maxTitleBytes)
	case strings.ContainsAny(req.Title, "\r\n"):
		return errdefs.InvalidArgument("title: must be one line")
	case len(req.Body) > maxBodyBytes:
		return errdefs.InvalidArgument("body: longer than %d bytes", maxBodyBytes)
	case req.Base != "" && !gitrepo.ValidRef(req.Base):
		return errdefs.InvalidArgument("base: %q is not a branch name", req.Base)
	}
	t, err := rt.lookup(r)
	if err != nil {
		return err
	}
	open, err := rt.o.Forge(t.repo.URL)
	if err != nil {
		return err
	}
	if t.repo.TokenSecret == "" {
		return errdefs.FailedPrecondition("project %q names no repo.tokenSecret: a pull request needs the forge token", t.proj.Name)
	}
	token, err := rt.token(t.proj)
	if err != nil {
		return err
	}
	if t.srv.Hub().Running(t.chat.ID) {
		return errdefs.Conflict("chat %s is running; open the pull request when its turn has ended", t.chat.ID)
	}
	if t, err = rt.start(r.Context(), t); err != nil {
		return err
	}
	user := daemon.UserFrom(r.Context())
	pushed, err := rt.commitAndPush(r.Context(), t, user, api.PushRequest{Message: req.Title}, token)
	if err != nil {
		return err
	}
	base := cmp.Or(req.Base, t.repo.Ref)
	if base == "" {
		if base, err = rt.o.Git.DefaultBranch(r.Context(), t.repo.URL, token); err != nil {
			return err
		}
	}
	prURL, number, err := open(r.Context(), token, PullRequest{Head: pushed.Branch, Base: base, Title: req.Title, Body: req.Body})
	if err != nil {
		return err
	}
	if err := rt.record(t, api.SubtypePullRequest, struct {
		URL    string `json:"url"`
		Number int    `json:"number"`
	}{prURL, number}); err != nil {
		return err
	}
	rt.o.Logger.Info("pull request opened", "chat", t.chat.ID, "project", t.proj.Name, "url", prURL, "number", number,
		"head", pushed.Branch, "base", base, "user", user)
	return daemon.WriteJSON(w, http.StatusCreated, api.PullRequestResult{URL: prURL, Number: number, Head: pushed.Branch, SHA: pushed.SHA, Base: base})
}

// token is the project's token secret ("" when it names none); a named
// secret that is not set is a failed precondition.
func (rt *Routes) token(proj api.Project) (string, error) {
	if proj.Repo.TokenSecret == "" {
		return "", nil
	}
	ss, err := rt.o.Store.Secrets(proj.Name)
	if err != nil {
		return "", fmt.Errorf("read the secrets of project %q: %w", proj.Name, err)
	}
	for _, s := range ss {
		if s.Key == proj.Repo.TokenSecret {
			return s.Value, nil
		}
	}
	return "", errdefs.FailedPrecondition("project %q: secret %q (repo.tokenSecret) is not set", proj.Name, proj.Repo.TokenSecret)
}

// Branch is the branch a chat without a branch of its own pushes:
// remote/ and the chat id's first 8 characters.
func Branch(chatID string) string {
	return gitrepo.ReservedBranchPrefix + chatID[:min(len(chatID), 8)]
}

// Checkout says where chat chatID works in its project's repository (the
// preparer's Options.Checkouts): its branch and worktree, and whether
// another chat of the project has a run active.
func (rt *Routes) Checkout(chatID string) (gitrepo.Checkout, error) {
	srv := rt.srv
	if srv == nil {
		return gitrepo.Checkout{}, errNoChats
	}
	chat, err := srv.Store().Chat(chatID)
	if err != nil {
		return gitrepo.Checkout{}, fmt.Errorf("load chat %s: %w", chatID, err)
	}
	return rt.checkout(srv, chat)
}

func (rt *Routes) checkout(srv *daemonSide, chat api.Chat) (gitrepo.Checkout, error) {
	co := gitrepo.Checkout{Chat: chat.ID, Branch: chat.Branch, Worktree: chat.Worktree}
	// Only the chats with an active run can make it busy: load those, not
	// every chat in the store (this runs at each project turn's start).
	for id := range srv.Hub().Active() {
		if id == chat.ID {
			continue
		}
		c, err := srv.Store().Chat(id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return gitrepo.Checkout{}, fmt.Errorf("load chat %s: %w", id, err)
		}
		if c.Project == chat.Project && c.ProjectID == chat.ProjectID {
			co.Busy = true
			break
		}
	}
	return co, nil
}
