package repoapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"remote/api"
	"remote/daemon"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/internal/errdefs"
	"remote/provisioning/gitrepo"
)

// Forge webhooks (POST /v1/projects/{name}/forge-events?forge=KIND): a
// verified issue or comment carrying the project's trigger becomes a chat
// in the project whose turn ends in a pull request.

// HookForge is what the webhook intake needs of one repository's forge
// (cmd/remoted adapts package forge): its dialect, the repository's path
// on it, the webhook scheme, and the issue, permission and pull request
// requests, each with the project's token.
type HookForge interface {
	Kind() string
	// Repo is the repository's path on the forge ("owner/name").
	Repo() string
	// Verify checks a delivery's signature (or token) with secret and
	// returns its delivery id.
	Verify(secret string, h http.Header, body []byte) (string, error)
	Parse(h http.Header, body []byte) (ForgeEvent, error)
	Comment(ctx context.Context, token string, issue int, body string) (string, error)
	CanWrite(ctx context.Context, token, user string) (bool, error)
	OpenPullRequest(ctx context.Context, token string, pr PullRequest) (string, int, error)
}

// ForgeEvent is a delivery's meaning (package forge's Event).
type ForgeEvent struct {
	Type, Action   string // Type "issue" or "comment" ("": not acted on)
	Repo, CloneURL string
	Issue          int
	Title, Body    string
	Labels         []string
	Label          string
	Comment        string
	PullRequest    bool
	Sender         string
}

// Webhook bounds and defaults.
const (
	MaxHookBody          = 1 << 20
	DefaultTriggerLabel  = "remote"
	DefaultTriggerPhrase = "@remote"
	deliveryWindow       = 24 * time.Hour
	maxDeliveries        = 10000
	permTTL              = 5 * time.Minute
	// A project starts at most hookBurst chats or turns from webhooks per
	// hookWindow.
	hookBurst  = 10
	hookWindow = time.Hour
	// botMark ends every comment the daemon writes: a comment carrying it
	// never triggers (the daemon's token usually has write access, and an
	// agent's answer may quote the trigger phrase).
	botMark        = "<!-- remote:bot -->"
	maxCommentBody = 60000
)

// IssueBranch is the daemon's branch of the chat of issue n.
func IssueBranch(n int) string { return gitrepo.ReservedBranchPrefix + "issue-" + strconv.Itoa(n) }

// hookState is the intake's memory: deliveries seen, forge permissions
// asked, starts per project, and the chats whose turn end it handles.
type hookState struct {
	mu         sync.Mutex
	deliveries map[string]time.Time
	perms      map[string]permEntry
	starts     map[string][]time.Time
}

type permEntry struct {
	ok bool
	at time.Time
}

// seen records delivery key and reports whether it was seen within the
// window; the memory is bounded (oldest dropped).
func (h *hookState) seen(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deliveries == nil {
		h.deliveries = map[string]time.Time{}
	}
	if at, ok := h.deliveries[key]; ok && now.Sub(at) < deliveryWindow {
		return true
	}
	if len(h.deliveries) >= maxDeliveries {
		for k, at := range h.deliveries {
			if now.Sub(at) >= deliveryWindow {
				delete(h.deliveries, k)
			}
		}
		for len(h.deliveries) >= maxDeliveries { // all recent: drop the oldest
			var oldest string
			var t time.Time
			for k, at := range h.deliveries {
				if oldest == "" || at.Before(t) {
					oldest, t = k, at
				}
			}
			delete(h.deliveries, oldest)
		}
	}
	h.deliveries[key] = now
	return false
}

// allow takes one of project's starts, false when the window's are spent.
func (h *hookState) allow(project string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.starts == nil {
		h.starts = map[string][]time.Time{}
	}
	s := slices.DeleteFunc(h.starts[project], func(t time.Time) bool { return now.Sub(t) >= hookWindow })
	if len(s) >= hookBurst {
		h.starts[project] = s
		return false
	}
	h.starts[project] = append(s, now)
	return true
}

// hookAnswer is the route's 200/202 body.
type hookAnswer struct {
	Status string `json:"status"` // accepted, ignored, duplicate
	Reason string `json:"reason,omitempty"`
	Chat   string `json:"chat,omitempty"`
}

// forgeEvents serves POST /v1/projects/{name}/forge-events?forge=KIND:
// a forge's webhook delivery as remote-web relays it (raw body, the
// forge's headers). Only a peer that may assert users (remote-web, root,
// the daemon's uid) may call it.
func (rt *Routes) forgeEvents(w http.ResponseWriter, r *http.Request) error {
	if p := daemon.PeerFrom(r.Context()); p == nil || !p.MayAssert {
		return errdefs.PermissionDenied("forge events are relayed by a frontend (remote-web) or root only")
	}
	name, kind := r.PathValue("name"), r.URL.Query().Get("forge")
	log := rt.o.Logger.With("project", name, "forge", kind, "delivery", deliveryHeader(r.Header))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxHookBody))
	if err != nil {
		log.Warn("forge event refused: body too large")
		return &daemon.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("the delivery is larger than %d bytes", MaxHookBody)}
	}
	srv := rt.srv
	if srv == nil {
		return errNoChats
	}
	proj, err := rt.o.Store.Project(name)
	if err != nil {
		log.Warn("forge event refused", "reason", "no such project")
		return err
	}
	if proj.Repo == nil || proj.Repo.WebhookSecret == "" {
		log.Warn("forge event refused", "reason", "the project takes no webhooks (no repo.webhookSecret)")
		return errdefs.PermissionDenied("project %q takes no forge webhooks: set repo.webhookSecret", name)
	}
	hf, err := rt.o.Hooks(proj.Repo.URL)
	if err != nil {
		return err
	}
	if kind != hf.Kind() {
		log.Warn("forge event refused", "reason", "forge kind is not the project's", "want", hf.Kind())
		return errdefs.InvalidArgument("forge: %q is not the project's forge (%s)", kind, hf.Kind())
	}
	secret, err := rt.secret(proj, proj.Repo.WebhookSecret, "repo.webhookSecret")
	if err != nil {
		return err
	}
	delivery, err := hf.Verify(secret, r.Header, body)
	if err != nil {
		log.Warn("forge event refused: not verified", "reason", err.Error())
		return errdefs.Unauthenticated("forge event not verified: %v", err)
	}
	if rt.hooks.seen(proj.ID+"\x00"+kind+"\x00"+delivery, time.Now()) {
		log.Warn("forge event ignored: delivery seen before (replay)")
		return daemon.WriteJSON(w, http.StatusOK, hookAnswer{Status: "duplicate", Reason: "delivery " + delivery + " was handled before"})
	}
	ev, err := hf.Parse(r.Header, body)
	if err != nil {
		log.Warn("forge event refused: unreadable", "reason", err.Error())
		return err
	}
	if ev.Type == "" {
		return daemon.WriteJSON(w, http.StatusOK, hookAnswer{Status: "ignored", Reason: "not an issue or comment event"})
	}
	if !strings.EqualFold(ev.Repo, hf.Repo()) {
		log.Warn("forge event refused: another repository", "reason", "payload repository is not the project's", "payload_repo", bound(ev.Repo, 200))
		return errdefs.PermissionDenied("the delivery names repository %q, not the project's", bound(ev.Repo, 200))
	}
	if strings.Contains(ev.Comment, botMark) || strings.Contains(ev.Body, botMark) {
		return daemon.WriteJSON(w, http.StatusOK, hookAnswer{Status: "ignored", Reason: "the daemon's own comment"})
	}
	label := cmp.Or(proj.Repo.TriggerLabel, DefaultTriggerLabel)
	phrase := cmp.Or(proj.Repo.TriggerPhrase, DefaultTriggerPhrase)
	var why string
	switch {
	case ev.Type == "issue" && ev.Action == "opened" && slices.Contains(ev.Labels, label):
	case ev.Type == "issue" && ev.Action == "labeled" && (ev.Label == label || ev.Label == "" && slices.Contains(ev.Labels, label)):
	case ev.Type == "comment" && ev.Action == "created" && strings.Contains(strings.ToLower(ev.Comment), strings.ToLower(phrase)):
	default:
		why = "no trigger (label " + label + ", phrase " + phrase + ")"
	}
	if why == "" && ev.Issue <= 0 {
		why = "no issue number"
	}
	if why != "" {
		log.Debug("forge event ignored", "reason", why)
		return daemon.WriteJSON(w, http.StatusOK, hookAnswer{Status: "ignored", Reason: why})
	}
	if proj.Owner == "" {
		return errdefs.FailedPrecondition("project %q has no owner to own the chat", name)
	}
	token, err := rt.secret(proj, proj.Repo.TokenSecret, "repo.tokenSecret")
	if err != nil {
		return err
	}
	if token == "" {
		return errdefs.FailedPrecondition("project %q names no repo.tokenSecret: the forge token answers the issue", name)
	}
	// Who may trigger: the project's listed users, else forge users with
	// write access to the repository.
	ok, err := rt.mayTrigger(r.Context(), proj, hf, token, ev.Sender)
	if err != nil {
		log.Warn("forge event ignored: permission unknown", "sender", ev.Sender, "reason", err.Error())
		return err
	}
	if !ok {
		log.Warn("forge event ignored: sender may not trigger", "sender", ev.Sender, "reason", "no write access and not in repo.triggerUsers")
		return daemon.WriteJSON(w, http.StatusOK, hookAnswer{Status: "ignored", Reason: "sender " + ev.Sender + " may not trigger"})
	}
	// The chat of the issue (its branch), or of the pull request it
	// opened; else a new one (an issue only).
	existing, err := rt.issueChat(srv, proj, ev.Issue)
	if ev.PullRequest {
		existing, err = rt.prChat(srv, proj, ev.Issue)
	}
	if err != nil {
		return err
	}
	if ev.PullRequest && existing == nil {
		return daemon.WriteJSON(w, http.StatusOK, hookAnswer{Status: "ignored", Reason: "a pull request no chat of this project opened"})
	}
	if existing != nil && ev.Type == "issue" {
		return daemon.WriteJSON(w, http.StatusOK, hookAnswer{Status: "ignored", Reason: "the issue has a chat: " + existing.ID})
	}
	if !rt.hooks.allow(proj.ID, time.Now()) {
		log.Warn("forge event refused: rate limited", "reason", fmt.Sprintf("more than %d starts in %s", hookBurst, hookWindow))
		return errdefs.ResourceExhausted("project %q started %d forge tasks in the last %s; try later", name, hookBurst, hookWindow)
	}
	text := promptText(ev)
	var chat api.Chat
	if existing != nil {
		chat = *existing
	} else {
		if chat, err = rt.createIssueChat(srv, proj, hf, ev); err != nil {
			return err
		}
	}
	if _, _, err := srv.Prompts().Enqueue(context.WithoutCancel(r.Context()), chat.ID, prompt.Input{Text: text}); err != nil {
		return fmt.Errorf("start the turn of chat %s: %w", chat.ID, err)
	}
	log.Info("forge event accepted", "issue", ev.Issue, "sender", ev.Sender, "chat", chat.ID, "new", existing == nil)
	if existing == nil {
		go rt.comment(context.Background(), hf, token, ev.Issue, chat, "Remote is working on this in chat "+rt.chatLink(chat)+" (branch `"+chat.Branch+"`).")
	}
	return daemon.WriteJSON(w, http.StatusAccepted, hookAnswer{Status: "accepted", Chat: chat.ID})
}

func deliveryHeader(h http.Header) string {
	return bound(cmp.Or(h.Get("X-GitHub-Delivery"), h.Get("X-Gitlab-Event-UUID"), h.Get("X-Gitea-Delivery")), 128)
}

// bound cuts s to n bytes at a rune boundary.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// secret is the value of the project secret key names ("" for key "").
func (rt *Routes) secret(proj api.Project, key, field string) (string, error) {
	if key == "" {
		return "", nil
	}
	ss, err := rt.o.Store.Secrets(proj.Name)
	if err != nil {
		return "", fmt.Errorf("read the secrets of project %q: %w", proj.Name, err)
	}
	for _, s := range ss {
		if s.Key == key {
			return s.Value, nil
		}
	}
	return "", errdefs.FailedPrecondition("project %q: secret %q (%s) is not set", proj.Name, key, field)
}

// mayTrigger: sender is listed in repo.triggerUsers, or has write access
// on the forge (asked with the token, remembered for permTTL).
func (rt *Routes) mayTrigger(ctx context.Context, proj api.Project, hf HookForge, token, sender string) (bool, error) {
	if sender == "" {
		return false, nil
	}
	if slices.Contains(proj.Repo.TriggerUsers, sender) {
		return true, nil
	}
	key := proj.ID + "\x00" + sender
	now := time.Now()
	rt.hooks.mu.Lock()
	if rt.hooks.perms == nil {
		rt.hooks.perms = map[string]permEntry{}
	}
	if p, ok := rt.hooks.perms[key]; ok && now.Sub(p.at) < permTTL {
		rt.hooks.mu.Unlock()
		return p.ok, nil
	}
	rt.hooks.mu.Unlock()
	ok, err := hf.CanWrite(ctx, token, sender)
	if err != nil {
		return false, err
	}
	rt.hooks.mu.Lock()
	if len(rt.hooks.perms) > maxDeliveries {
		clear(rt.hooks.perms)
	}
	rt.hooks.perms[key] = permEntry{ok: ok, at: now}
	rt.hooks.mu.Unlock()
	return ok, nil
}

// issueChat is the project's chat of issue n (on its daemon branch), nil
// when there is none.
func (rt *Routes) issueChat(srv *daemonSide, proj api.Project, n int) (*api.Chat, error) {
	chats, err := srv.Store().Chats()
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	branch := IssueBranch(n)
	for _, c := range chats {
		if c.Project == proj.Name && c.ProjectID == proj.ID && c.Branch == branch {
			return &c, nil
		}
	}
	return nil, nil
}

// prChat is the project's forge chat that opened pull request n, nil
// when none did.
func (rt *Routes) prChat(srv *daemonSide, proj api.Project, n int) (*api.Chat, error) {
	chats, err := srv.Store().Chats()
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	for _, c := range chats {
		if c.Project != proj.Name || c.ProjectID != proj.ID || !strings.HasPrefix(c.Branch, gitrepo.ReservedBranchPrefix+"issue-") {
			continue
		}
		_, _, pr, err := issueOf(srv, c.ID)
		if err != nil {
			return nil, err
		}
		if pr == n {
			return &c, nil
		}
	}
	return nil, nil
}

// createIssueChat makes the chat of ev's issue: the project owner's, the
// project's provider (else the daemon's default), on the issue's daemon
// branch in a worktree of its own, with a system/forge_issue event.
func (rt *Routes) createIssueChat(srv *daemonSide, proj api.Project, hf HookForge, ev ForgeEvent) (api.Chat, error) {
	provider := cmp.Or(proj.Provider, rt.o.DefaultProvider)
	if provider == "" {
		return api.Chat{}, errdefs.FailedPrecondition("project %q has no provider and the daemon no default one", proj.Name)
	}
	title := bound(fmt.Sprintf("#%d %s", ev.Issue, strings.Join(strings.Fields(ev.Title), " ")), 200)
	c := api.Chat{Title: title, Owner: proj.Owner, Provider: provider, Mode: "default", Project: proj.Name, ProjectID: proj.ID,
		Branch: IssueBranch(ev.Issue), Worktree: true, CreatedAt: time.Now().UTC()}
	var err error
	for range 3 {
		c.ID = runhub.NewID(6)
		if err = srv.Store().CreateChat(c); !errdefs.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		return api.Chat{}, fmt.Errorf("create chat: %w", err)
	}
	t := target{srv: srv, chat: c, proj: proj, repo: *proj.Repo}
	if err := rt.record(t, api.SubtypeForgeIssue, issueRef{Forge: hf.Kind(), Number: ev.Issue, Repo: hf.Repo()}); err != nil {
		return api.Chat{}, err
	}
	return c, nil
}

type issueRef struct {
	Forge  string `json:"forge"`
	Number int    `json:"number"`
	Repo   string `json:"repo"`
}

// promptText is the first prompt: the issue's title and body, and the
// comment that triggered.
func promptText(ev ForgeEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Issue #%d: %s\n\n%s", ev.Issue, ev.Title, ev.Body)
	if ev.Type == "comment" {
		fmt.Fprintf(&b, "\n\nComment by %s:\n%s", ev.Sender, ev.Comment)
	}
	return bound(b.String(), 256<<10)
}

// chatLink is the chat's page (Options.PageURL), else its id.
func (rt *Routes) chatLink(c api.Chat) string {
	if rt.o.PageURL == "" {
		return "`" + c.ID + "`"
	}
	return strings.TrimSuffix(rt.o.PageURL, "/") + "/#/chat/" + c.ID
}

// comment posts text on the issue, marked as the daemon's; a failure is
// logged (the forge is told nothing else).
func (rt *Routes) comment(ctx context.Context, hf HookForge, token string, issue int, chat api.Chat, text string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	text = bound(text, maxCommentBody) + "\n\n" + botMark
	if _, err := hf.Comment(ctx, token, issue, text); err != nil {
		rt.o.Logger.Warn("comment on the forge issue failed", "chat", chat.ID, "issue", issue, "error", err)
	}
}

// observe is the hub observer: the end of a turn of a forge issue's chat
// (its branch is an issue branch) is handled off the commit path.
func (rt *Routes) observe(chatID string, ev api.Event) {
	if ev.Type != api.EventComplete && ev.Type != api.EventError {
		return
	}
	go rt.turnEnded(chatID)
}

// turnEnded answers the issue of a forge chat whose turn ended: with
// changes, commit, push, open a draft pull request (once) and link it;
// without, the turn's last assistant message.
func (rt *Routes) turnEnded(chatID string) {
	srv := rt.srv
	if srv == nil {
		return
	}
	chat, err := srv.Store().Chat(chatID)
	if err != nil || !strings.HasPrefix(chat.Branch, gitrepo.ReservedBranchPrefix+"issue-") {
		return
	}
	ref, last, prNumber, err := issueOf(srv, chatID)
	if err != nil || ref.Number == 0 {
		return
	}
	log := rt.o.Logger.With("chat", chatID, "issue", ref.Number)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for srv.Hub().Running(chatID) { // the run's end is stored before it leaves the hub
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	proj, err := rt.o.Store.Project(chat.Project)
	if err != nil || proj.Repo == nil || proj.ID != chat.ProjectID {
		log.Warn("forge chat's project is gone", "error", err)
		return
	}
	hf, err := rt.o.Hooks(proj.Repo.URL)
	if err != nil {
		log.Warn("forge chat's forge is gone", "error", err)
		return
	}
	token, err := rt.token(proj)
	if err != nil || token == "" {
		log.Warn("forge chat without token", "error", err)
		return
	}
	t, err := rt.start(ctx, target{srv: srv, chat: chat, proj: proj, repo: *proj.Repo})
	if err != nil {
		log.Warn("forge chat's container did not start", "error", err)
		return
	}
	co, err := rt.checkout(srv, chat)
	if err != nil {
		return
	}
	dir, err := gitrepo.CheckOut(ctx, rt.o.Exec, t.contain, co)
	if err != nil {
		log.Warn("forge chat's branch", "error", err)
		return
	}
	d, err := gitrepo.Diff(ctx, rt.o.Exec, t.contain, dir, "", "", gitrepo.DiffLimits{MaxPatch: 1, MaxFiles: rt.o.MaxDiffFiles})
	if err != nil {
		log.Warn("forge chat's diff", "error", err)
		return
	}
	if len(d.Files) == 0 {
		rt.comment(ctx, hf, token, ref.Number, chat, cmp.Or(strings.TrimSpace(last), "The turn ended without changes or an answer."))
		return
	}
	pushed, err := rt.commitAndPush(ctx, t, chat.Owner,
		api.PushRequest{Message: fmt.Sprintf("%s (#%d)", strings.TrimPrefix(chat.Title, fmt.Sprintf("#%d ", ref.Number)), ref.Number)}, token)
	if err != nil {
		log.Warn("forge chat's push failed", "error", err)
		rt.comment(ctx, hf, token, ref.Number, chat, "Remote could not push the changes of chat "+rt.chatLink(chat)+".")
		return
	}
	if prNumber > 0 {
		rt.comment(ctx, hf, token, ref.Number, chat, fmt.Sprintf("Pushed %s to `%s`.", pushed.SHA, pushed.Branch))
		return
	}
	base := t.repo.Ref
	if base == "" {
		if base, err = rt.o.Git.DefaultBranch(ctx, t.repo.URL, token); err != nil {
			log.Warn("forge chat's base branch", "error", err)
			return
		}
	}
	closes := "Fixes"
	if hf.Kind() == "gitlab" {
		closes = "Closes"
	}
	body := fmt.Sprintf("%s #%d\n\nOpened by Remote from chat %s.\n\n%s", closes, ref.Number, rt.chatLink(chat), botMark)
	prURL, number, err := hf.OpenPullRequest(ctx, token, PullRequest{Head: pushed.Branch, Base: base, Title: bound(chat.Title, 250), Body: body, Draft: true})
	if err != nil {
		log.Warn("forge chat's pull request failed", "error", err)
		rt.comment(ctx, hf, token, ref.Number, chat, fmt.Sprintf("Pushed `%s`; the pull request could not be opened.", pushed.Branch))
		return
	}
	_ = rt.record(t, api.SubtypePullRequest, struct {
		URL    string `json:"url"`
		Number int    `json:"number"`
	}{prURL, number})
	log.Info("forge chat's pull request opened", "url", prURL, "number", number)
	rt.comment(ctx, hf, token, ref.Number, chat, "Opened "+prURL+" from chat "+rt.chatLink(chat)+".")
}

// issueOf reads a chat's events: its forge_issue, the last assistant
// message of its last turn, and the number of the pull request it opened
// (0: none).
func issueOf(srv *daemonSide, chatID string) (issueRef, string, int, error) {
	var ref issueRef
	var last strings.Builder
	var pr int
	err := srv.Store().Events(chatID, 0, 0, func(ev api.Event) error {
		switch {
		case ev.Type == api.EventSystem && ev.Subtype == api.SubtypeForgeIssue:
			_ = json.Unmarshal(ev.Data, &ref)
		case ev.Type == api.EventSystem && ev.Subtype == api.SubtypePullRequest:
			var d struct {
				Number int `json:"number"`
			}
			if json.Unmarshal(ev.Data, &d) == nil && d.Number > 0 {
				pr = d.Number
			}
		case ev.Type == api.EventUser:
			last.Reset()
		case ev.Type == api.EventAssistantText:
			if last.Len() < maxCommentBody {
				last.WriteString(ev.Text)
			}
		}
		return nil
	})
	return ref, last.String(), pr, err
}
