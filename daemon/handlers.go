package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"remote/api"
	"remote/daemon/fork"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/internal/errdefs"
	"remote/providers"
)

// routes is the daemon's own route table (docs/api.md, all non-project routes).
func (s *Server) routes() []Route {
	return []Route{
		{http.MethodGet, "/v1/info", AccessPeer, s.handleInfo},
		{http.MethodGet, "/v1/providers", AccessPeer, s.handleProviders},
		{http.MethodGet, "/metrics", AccessPeer, s.handleMetrics},
		{http.MethodPost, "/v1/chats", AccessUser, s.handleCreateChat},
		{http.MethodGet, "/v1/chats", AccessUser, s.handleListChats},
		{http.MethodGet, "/v1/chats/{id}", AccessUser, s.handleGetChat},
		{http.MethodDelete, "/v1/chats/{id}", AccessUser, s.handleDeleteChat},
		{http.MethodPatch, "/v1/chats/{id}", AccessUser, s.handleUpdateChat},
		{http.MethodGet, "/v1/chats/{id}/history", AccessUser, s.handleHistory},
		{http.MethodGet, "/v1/usage", AccessUser, s.handleUsage},
		{http.MethodGet, "/v1/runs", AccessUser, s.handleRuns},
		{http.MethodPost, "/v1/chats/{id}/fork", AccessUser, s.handleFork},
		{http.MethodGet, "/v1/chats/{id}/events", AccessUser, s.handleEvents},
		{http.MethodPost, "/v1/chats/{id}/prompt", AccessUser, s.handlePrompt},
		{http.MethodPost, "/v1/chats/{id}/cancel", AccessUser, s.handleCancel},
		{http.MethodGet, "/v1/chats/{id}/queue", AccessUser, s.handleQueue},
		{http.MethodDelete, "/v1/chats/{id}/queue/{qid}", AccessUser, s.handleUnqueue},
		{http.MethodPost, "/v1/chats/{id}/interactions", AccessUser, s.handleInteraction},
		{http.MethodGet, "/ws/chat/{id}", AccessUser, s.handleChatSocket},
		{http.MethodGet, "/ws/workspace", AccessUser, s.handleWorkspaceSocket},
	}
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) error {
	info := api.Info{
		Version:       s.version,
		UptimeSeconds: time.Since(s.started).Seconds(),
		LXD:           api.LXDInfo{Error: "LXD is not configured"},
		Providers:     s.providerInfos(r),
	}
	if s.lxd != nil {
		info.LXD = s.lxd.Status(r.Context())
	}
	return writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleProviders(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.providerInfos(r))
}

func (s *Server) providerInfos(r *http.Request) []api.ProviderInfo {
	out := []api.ProviderInfo{}
	for _, e := range s.reg.List() {
		pi := api.ProviderInfo{ID: string(e.ID), Label: string(e.ID), Enabled: e.Enabled, Capabilities: json.RawMessage(`{}`)}
		if e.Provider != nil {
			caps, err := e.Provider.Capabilities(r.Context(), providers.CapabilityRequest{})
			if err != nil {
				s.log.Warn("provider capabilities", "provider", e.ID, "error", err)
			} else {
				pi.Label = caps.Label
				if b, err := json.Marshal(caps); err == nil {
					pi.Capabilities = b
				}
			}
			pi.Readiness = prompt.ReadinessOf(r.Context(), e.Provider)
		}
		out = append(out, pi)
	}
	return out
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metrics.Handler().ServeHTTP(w, r)
	return nil
}

// ownedChat loads the chat named in the path for the caller; another
// user's chat is reported exactly like a missing one.
func (s *Server) ownedChat(r *http.Request) (api.Chat, error) {
	id, err := chatID(r)
	if err != nil {
		return api.Chat{}, err
	}
	c, err := s.store.Chat(id)
	if err != nil || c.Owner != UserFrom(r.Context()) {
		if err != nil && !errdefs.IsNotFound(err) {
			return api.Chat{}, fmt.Errorf("load chat %s: %w", id, err)
		}
		return api.Chat{}, fmt.Errorf("chat %s: %w", id, errdefs.ErrNotFound)
	}
	c.Running = s.hub.Running(c.ID)
	return c, nil
}

const (
	maxTitle = 200
	maxModel = 128
)

func (s *Server) handleCreateChat(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateChatRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	owner := UserFrom(r.Context())
	if req.Provider == "" {
		return errdefs.InvalidArgument("provider: required")
	}
	p, err := s.reg.Get(req.Provider)
	if err != nil {
		return err
	}
	if req.ApprovalPolicy != "" || req.ReasoningEffort != "" {
		caps, err := p.Capabilities(r.Context(), providers.CapabilityRequest{ProjectID: req.Project})
		if err != nil {
			return fmt.Errorf("%s capabilities: %w: %w", req.Provider, errdefs.ErrUnavailable, err)
		}
		if err := checkPreferences(req, caps); err != nil {
			return err
		}
	}
	if len(req.Model) > maxModel || strings.ContainsAny(req.Model, "\x00\n\r") {
		return errdefs.InvalidArgument("model: invalid model name %q", req.Model)
	}
	if len(req.Title) > maxTitle || !utf8.ValidString(req.Title) {
		return errdefs.InvalidArgument("title: at most %d bytes of UTF-8", maxTitle)
	}
	c := api.Chat{Title: req.Title, Owner: owner, Provider: req.Provider, Model: req.Model, Mode: string(providers.ModeDefault),
		ApprovalPolicy: req.ApprovalPolicy, ReasoningEffort: req.ReasoningEffort, CreatedAt: time.Now().UTC()}
	if req.Project != "" {
		if s.projects == nil {
			return errdefs.InvalidArgument("project: projects are not available on this daemon")
		}
		if req.Cwd != "" {
			return errdefs.InvalidArgument("cwd: a project chat runs in its container's /workspace; cwd must be empty")
		}
		id, err := s.projects.CheckChatProject(r.Context(), owner, req)
		if err != nil {
			return err
		}
		c.Project, c.ProjectID, c.Branch, c.Worktree = req.Project, id, req.Branch, req.Worktree
	} else if req.Branch != "" {
		return errdefs.InvalidArgument("branch: only a chat in a project with a repository has a branch")
	} else if req.Worktree {
		return errdefs.InvalidArgument("worktree: only a chat in a project with a repository has a worktree")
	} else {
		cwd := req.Cwd
		if cwd == "" {
			cwd = s.defaultCwd
		}
		real, err := s.svc.Roots().Check(cwd)
		if err != nil {
			return err
		}
		c.Cwd = real
	}
	for range 3 {
		c.ID = runhub.NewID(6)
		if err = s.store.CreateChat(c); !errdefs.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create chat: %w", err)
	}
	s.log.Debug("chat created", "chat", c.ID, "owner", owner, "provider", c.Provider)
	return writeJSON(w, http.StatusCreated, c)
}

// checkPreferences refuses an approval policy that is not one of
// api.ApprovalPolicies or that the provider does not honour (caps.Approvals),
// and a reasoning effort the provider does not declare.
func checkPreferences(req api.CreateChatRequest, caps providers.Capabilities) error {
	if a := req.ApprovalPolicy; a != "" {
		if !slices.Contains(api.ApprovalPolicies(), a) {
			return errdefs.InvalidArgument("approvalPolicy: unknown policy %q (want %s)", a, strings.Join(api.ApprovalPolicies(), ", "))
		}
		if !caps.Approvals {
			return errdefs.InvalidArgument("approvalPolicy: provider %s does not ask for approvals; leave approvalPolicy empty", req.Provider)
		}
	}
	if e := req.ReasoningEffort; e != "" && !slices.Contains(caps.Efforts, e) {
		if len(caps.Efforts) == 0 {
			return errdefs.InvalidArgument("reasoningEffort: provider %s declares no reasoning efforts; leave reasoningEffort empty", req.Provider)
		}
		return errdefs.InvalidArgument("reasoningEffort: unknown effort %q for provider %s (want %s)", e, req.Provider, strings.Join(caps.Efforts, ", "))
	}
	return nil
}

func (s *Server) handleListChats(w http.ResponseWriter, r *http.Request) error {
	all, err := s.store.Chats()
	if err != nil {
		return fmt.Errorf("list chats: %w", err)
	}
	owner := UserFrom(r.Context())
	out := []api.Chat{}
	for _, c := range all {
		if c.Owner == owner {
			s.workspace.Decorate(&c)
			out = append(out, c)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetChat(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	c.Attention = s.workspace.AttentionOf(c.ID)
	return writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleDeleteChat(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	if c.Running {
		return fmt.Errorf("chat %s has a running prompt; cancel it first: %w", c.ID, errdefs.ErrConflict)
	}
	if err := s.store.DeleteChat(c.ID); err != nil {
		return fmt.Errorf("delete chat %s: %w", c.ID, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleUpdateChat renames a chat (PATCH /v1/chats/{id}).
func (s *Server) handleUpdateChat(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	var req api.UpdateChatRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Title == nil {
		return writeJSON(w, http.StatusOK, c)
	}
	if len(*req.Title) > maxTitle || !utf8.ValidString(*req.Title) {
		return errdefs.InvalidArgument("title: at most %d bytes of UTF-8", maxTitle)
	}
	c, err = s.store.UpdateChat(c.ID, func(c *api.Chat) error {
		c.Title = *req.Title
		return nil
	})
	if err != nil {
		return fmt.Errorf("rename chat: %w", err)
	}
	c.Running = s.hub.Running(c.ID)
	s.hub.Sync(c.ID) // a title change, outside any run (docs/api.md)
	return writeJSON(w, http.StatusOK, c)
}

// forkRequest is the optional body of POST /v1/chats/{id}/fork.
type forkRequest struct {
	Title string `json:"title,omitempty"`
	// AtSeq forks the visible history before the turn holding this seq;
	// WithContainer also copies that turn's checkpoint into a new
	// project (checkpoints.go).
	AtSeq         int64 `json:"atSeq,omitempty"`
	WithContainer bool  `json:"withContainer,omitempty"`
}

// forkAt forks src at a turn (package fork) and answers 201 with the fork.
func (s *Server) forkAt(w http.ResponseWriter, r *http.Request, src api.Chat, req forkRequest) error {
	f := fork.Forker{Store: s.store, Log: s.log}
	if pr := s.containerForks.Load(); pr != nil {
		f.Containers = *pr
	}
	c, err := f.At(r.Context(), UserFrom(r.Context()), src, fork.Request{AtSeq: req.AtSeq, Title: req.Title, WithContainer: req.WithContainer})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, c)
}

// handleFork copies a chat and its events (S27): the provider session is
// kept and marked ForkPending only when the provider declares native fork
// (and resume); otherwise the copy starts fresh from visible history.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) error {
	src, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	var req forkRequest
	data, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := decodeStrict(data, &req); err != nil {
			return err
		}
	}
	if len(req.Title) > maxTitle || !utf8.ValidString(req.Title) {
		return errdefs.InvalidArgument("title: at most %d bytes of UTF-8", maxTitle)
	}
	if req.AtSeq != 0 || req.WithContainer {
		return s.forkAt(w, r, src, req)
	}
	var caps providers.Capabilities
	if p, err := s.reg.Get(src.Provider); err == nil {
		caps, _ = p.Capabilities(r.Context(), providers.CapabilityRequest{ProjectID: src.Project})
	}
	fork := src
	fork.ID = runhub.NewID(6)
	fork.Running, fork.Queued = false, 0
	fork.CreatedAt = time.Now().UTC()
	fork.LastMessageAt = time.Time{}
	fork.Title = req.Title
	if fork.Title == "" && src.Title != "" {
		fork.Title = src.Title + " (fork)"
	}
	session := prompt.SessionID(src, src.Provider)
	fork.Sessions, fork.ClaudeSessionID, fork.CodexSessionID, fork.KimiSessionID, fork.AntigravitySessionID = nil, "", "", "", ""
	fork.ForkPending = false
	if session != "" && caps.Resume && caps.Fork {
		prompt.SetSession(&fork, src.Provider, session)
		fork.ForkPending = true
	}
	if err := s.store.CreateChat(fork); err != nil {
		return fmt.Errorf("create fork of chat %s: %w", src.ID, err)
	}
	if err := s.store.CopyEvents(src.ID, fork.ID); err != nil {
		if derr := s.store.DeleteChat(fork.ID); derr != nil {
			s.log.Error("remove half-made fork", "chat", fork.ID, "error", derr)
		}
		return fmt.Errorf("copy events of chat %s to its fork: %w", src.ID, err)
	}
	if fork.ForkPending { // the fork continues the session and its running cost
		if err := s.store.CopyUsageMarks(src.ID, fork.ID); err != nil {
			s.log.Warn("fork: cost marks not copied; the fork's first run may be charged the parent's cost", "chat", fork.ID, "error", err)
		}
	}
	return writeJSON(w, http.StatusCreated, fork)
}

func (s *Server) handlePrompt(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	var req api.PromptRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	in := prompt.Input{Text: req.Text, Mode: req.Mode, Skills: req.Skills, Synthetic: req.Synthetic}
	if req.Queue {
		return s.queuePrompt(w, r, c, in)
	}
	runID, err := s.svc.Start(r.Context(), c.ID, in)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, api.PromptResponse{RunID: runID})
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	if err := s.svc.Cancel(c.ID); err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, struct{}{})
}

func (s *Server) handleInteraction(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	var req api.InteractionRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	err = s.svc.Respond(c.ID, providers.InteractionResponse{ID: req.InteractionID, Result: req.Result, Error: req.Error})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, struct{}{})
}
