// Package clienttest is a small in-memory fake of remoted's API on a real
// Unix socket, speaking the docs/api.md contract closely enough to test
// clients of it (package client, remotectl, remote-web) without a daemon.
// It imports only api and the standard library.
package clienttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"remote/api"
)

// Server is the fake daemon. Its exported fields may be set before the
// first request.
type Server struct {
	// Socket is the path of the Unix socket it listens on.
	Socket string

	// Script returns what a prompt's run emits after the user event; the
	// default answers "echo: TEXT" in two assistant_text pieces, then
	// complete. Events are appended in order, seq and t are set by the fake.
	Script func(api.PromptRequest) []api.Event
	// HoldRuns keeps every run open after its script until Cancel.
	HoldRuns bool
	// Exec answers an exec request with frames; the default echoes the
	// command to stdout and exits 0.
	Exec func(api.ExecRequest) []api.ExecFrame

	mu       sync.Mutex
	chats    map[string]*chat
	projects map[string]*project
	nextID   int
	reqs     []Request
}

// Request is one request the fake received.
type Request struct {
	Method, Path, User string
}

type chat struct {
	api.Chat
	events []api.Event
	subs   map[chan api.Event]struct{}
	cancel chan struct{} // non-nil while a run is active
}

type project struct {
	api.Project
	secrets map[string]time.Time
}

// New starts a fake on a socket in t.TempDir(); it stops when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		Socket:   filepath.Join(t.TempDir(), "remoted.sock"),
		chats:    map[string]*chat{},
		projects: map[string]*project{},
	}
	ln, err := net.Listen("unix", s.Socket)
	if err != nil {
		t.Fatalf("fake daemon: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: s.routes(), BaseContext: func(net.Listener) context.Context { return ctx }}
	go srv.Serve(ln)
	t.Cleanup(func() {
		cancel()
		srv.Close()
	})
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// AddChat stores a chat with events directly, for tests that need history.
func (s *Server) AddChat(c api.Chat, events ...api.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := &chat{Chat: c, subs: map[chan api.Event]struct{}{}}
	s.chats[c.ID] = ch
	for _, ev := range events {
		s.appendLocked(ch, ev)
	}
}

type handler func(w http.ResponseWriter, r *http.Request) error

// apiError is an error answer.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errf(status int, code, format string, args ...any) error {
	return &apiError{status, code, fmt.Sprintf(format, args...)}
}

var chatIDRe = regexp.MustCompile(`^[0-9a-f]{4,32}$`)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range map[string]handler{
		"GET /v1/info":                             s.info,
		"GET /v1/providers":                        s.providers,
		"POST /v1/chats":                           s.createChat,
		"GET /v1/chats":                            s.listChats,
		"GET /v1/chats/{id}":                       s.getChat,
		"DELETE /v1/chats/{id}":                    s.deleteChat,
		"POST /v1/chats/{id}/fork":                 s.fork,
		"GET /v1/chats/{id}/events":                s.events,
		"POST /v1/chats/{id}/prompt":               s.prompt,
		"POST /v1/chats/{id}/cancel":               s.cancelRun,
		"POST /v1/chats/{id}/interactions":         s.interaction,
		"POST /v1/projects":                        s.createProject,
		"GET /v1/projects":                         s.listProjects,
		"GET /v1/projects/{name}":                  s.getProject,
		"DELETE /v1/projects/{name}":               s.deleteProject,
		"POST /v1/projects/{name}/start":           s.startStop("running"),
		"POST /v1/projects/{name}/stop":            s.startStop("stopped"),
		"PUT /v1/projects/{name}/secrets/{key}":    s.putSecret,
		"GET /v1/projects/{name}/secrets":          s.listSecrets,
		"DELETE /v1/projects/{name}/secrets/{key}": s.deleteSecret,
		"POST /v1/projects/{name}/exec":            s.exec,
	} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.reqs = append(s.reqs, Request{r.Method, r.URL.Path, r.Header.Get(api.HeaderUser)})
			s.mu.Unlock()
			if r.Header.Get(api.HeaderUser) == "" {
				writeErr(w, errf(http.StatusUnauthorized, api.CodeUnauthorized, "%s header is required", api.HeaderUser))
				return
			}
			if err := h(w, r); err != nil {
				writeErr(w, err)
			}
		})
	}
	return mux
}

func writeErr(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		e = &apiError{http.StatusInternalServerError, api.CodeInternal, err.Error()}
	}
	writeJSON(w, e.status, api.ErrorResponse{Error: api.ErrorBody{Code: e.code, Message: e.msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errf(http.StatusBadRequest, api.CodeBadRequest, "request body: %v", err)
	}
	return nil
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) error {
	ps, _ := s.providerList()
	return writeJSON(w, http.StatusOK, api.Info{Version: "fake", UptimeSeconds: 42, LXD: api.LXDInfo{Reachable: true, ServerVersion: "5.0.2"}, Providers: ps})
}

func (s *Server) providerList() ([]api.ProviderInfo, error) {
	return []api.ProviderInfo{
		{ID: "claude", Label: "Claude Code", Enabled: true, Capabilities: json.RawMessage(`{"resume":true,"fork":true}`)},
		{ID: "codex", Label: "Codex", Enabled: true, Capabilities: json.RawMessage(`{"resume":true}`)},
	}, nil
}

func (s *Server) providers(w http.ResponseWriter, r *http.Request) error {
	ps, _ := s.providerList()
	return writeJSON(w, http.StatusOK, ps)
}

// lookup returns the caller's chat; another user's chat is not found.
func (s *Server) lookup(r *http.Request) (*chat, error) {
	id := r.PathValue("id")
	if !chatIDRe.MatchString(id) {
		return nil, errf(http.StatusBadRequest, api.CodeBadRequest, "invalid chat id %q", id)
	}
	c, ok := s.chats[id]
	if !ok || (c.Owner != "" && c.Owner != r.Header.Get(api.HeaderUser)) {
		return nil, errf(http.StatusNotFound, api.CodeNotFound, "chat %q not found", id)
	}
	return c, nil
}

func (s *Server) newChatLocked(c api.Chat) *chat {
	s.nextID++
	c.ID = fmt.Sprintf("%012x", 0xc0ffee000000+s.nextID)
	c.CreatedAt = time.Date(2026, 1, 1, 0, 0, s.nextID, 0, time.UTC)
	ch := &chat{Chat: c, subs: map[chan api.Event]struct{}{}}
	s.chats[c.ID] = ch
	return ch
}

func (s *Server) createChat(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateChatRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Provider != "claude" && req.Provider != "codex" {
		return errf(http.StatusBadRequest, api.CodeBadRequest, "provider: unknown provider %q", req.Provider)
	}
	if req.ApprovalPolicy != "" && (req.Provider != "codex" || !slices.Contains(api.ApprovalPolicies(), req.ApprovalPolicy)) {
		return errf(http.StatusBadRequest, api.CodeBadRequest, "approvalPolicy: %q not accepted for provider %s", req.ApprovalPolicy, req.Provider)
	}
	s.mu.Lock()
	ch := s.newChatLocked(api.Chat{Title: req.Title, Owner: r.Header.Get(api.HeaderUser), Provider: req.Provider, Project: req.Project, Cwd: req.Cwd, Model: req.Model,
		ApprovalPolicy: req.ApprovalPolicy, ReasoningEffort: req.ReasoningEffort})
	c := ch.Chat
	s.mu.Unlock()
	return writeJSON(w, http.StatusCreated, c)
}

func (s *Server) listChats(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	out := []api.Chat{}
	for _, c := range s.chats {
		if c.Owner == "" || c.Owner == r.Header.Get(api.HeaderUser) {
			out = append(out, c.Chat)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getChat(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	c, err := s.lookup(r)
	var out api.Chat
	if err == nil {
		out = c.Chat
		out.Running = c.cancel != nil
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteChat(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	c, err := s.lookup(r)
	if err == nil {
		delete(s.chats, c.ID)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	c, err := s.lookup(r)
	var out api.Chat
	if err == nil {
		n := s.newChatLocked(c.Chat)
		n.Title = c.Title + " (fork)"
		n.ForkPending = true
		n.events = append([]api.Event(nil), c.events...)
		out = n.Chat
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, out)
}

// appendLocked stores ev (unless transient) and sends it to subscribers.
func (s *Server) appendLocked(c *chat, ev api.Event) {
	if ev.Type != api.EventSync {
		ev.Seq = int64(len(c.events) + 1)
		if ev.T == 0 {
			ev.T = time.Now().UnixMilli()
		}
		c.events = append(c.events, ev)
	}
	for sub := range c.subs {
		select {
		case sub <- ev:
		default: // too slow: dropped, as the daemon does
			close(sub)
			delete(c.subs, sub)
		}
	}
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	since := int64(0)
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errf(http.StatusBadRequest, api.CodeBadRequest, "since: want a non-negative integer, got %q", v)
		}
		since = n
	}
	s.mu.Lock()
	c, err := s.lookup(r)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	var replay []api.Event
	for _, ev := range c.events {
		if ev.Seq > since {
			replay = append(replay, ev)
		}
	}
	if r.URL.Query().Get("follow") != "true" {
		s.mu.Unlock()
		if replay == nil {
			replay = []api.Event{}
		}
		return writeJSON(w, http.StatusOK, replay)
	}
	sub := make(chan api.Event, 1024)
	c.subs[sub] = struct{}{}
	running := c.cancel != nil
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(c.subs, sub)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for _, ev := range replay {
		enc.Encode(ev)
	}
	enc.Encode(api.Event{Type: api.EventSync, Running: running})
	rc.Flush()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case ev, ok := <-sub:
			if !ok {
				return nil
			}
			if err := enc.Encode(ev); err != nil {
				return nil
			}
			rc.Flush()
		}
	}
}

func (s *Server) prompt(w http.ResponseWriter, r *http.Request) error {
	var req api.PromptRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Text == "" {
		return errf(http.StatusBadRequest, api.CodeBadRequest, "text: must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.lookup(r)
	if err != nil {
		return err
	}
	if c.cancel != nil {
		return errf(http.StatusConflict, api.CodePromptAlreadyRunning, "a prompt is already running in chat %q", c.ID)
	}
	cancel := make(chan struct{})
	c.cancel = cancel
	s.appendLocked(c, api.Event{Type: api.EventUser, Text: req.Text})
	s.appendLocked(c, api.Event{Type: api.EventSync, Running: true})
	script := s.Script
	if script == nil {
		script = func(req api.PromptRequest) []api.Event {
			return []api.Event{
				{Type: api.EventAssistantText, MessageID: "m1", Text: "echo: "},
				{Type: api.EventAssistantText, MessageID: "m1", Text: req.Text},
				{Type: api.EventComplete, Provider: c.Provider},
			}
		}
	}
	evs, hold := script(req), s.HoldRuns
	go func() {
		s.mu.Lock()
		for _, ev := range evs {
			s.appendLocked(c, ev)
		}
		s.mu.Unlock()
		if hold {
			<-cancel
		}
		s.mu.Lock()
		if hold {
			s.appendLocked(c, api.Event{Type: api.EventError, Message: "run cancelled"})
		}
		c.cancel = nil
		s.appendLocked(c, api.Event{Type: api.EventSync})
		s.mu.Unlock()
	}()
	return writeJSON(w, http.StatusAccepted, api.PromptResponse{RunID: fmt.Sprintf("run-%d", len(c.events))})
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	c, err := s.lookup(r)
	if err == nil && c.cancel == nil {
		err = errf(http.StatusNotFound, api.CodeNotFound, "no prompt is currently running in chat %q", c.ID)
	}
	if err == nil {
		select {
		case <-c.cancel:
		default:
			close(c.cancel)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, struct{}{})
}

func (s *Server) interaction(w http.ResponseWriter, r *http.Request) error {
	var req api.InteractionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.lookup(r)
	if err != nil {
		return err
	}
	// A stored interaction_request without its interaction_resolved is
	// pending: the answer resolves it ("approved" for an accept result).
	pending := false
	for _, ev := range c.events {
		if ev.InteractionID == req.InteractionID {
			pending = ev.Type == api.EventInteractionRequest
		}
	}
	if !pending {
		return errf(http.StatusNotFound, api.CodeNotFound, "no pending interaction %q", req.InteractionID)
	}
	status := "answered"
	var res struct {
		Decision string `json:"decision"`
	}
	if json.Unmarshal(req.Result, &res) == nil && res.Decision == "accept" {
		status = "approved"
	}
	s.appendLocked(c, api.Event{Type: api.EventInteractionResolved, InteractionID: req.InteractionID, Status: status, Data: req.Result})
	return writeJSON(w, http.StatusAccepted, struct{}{})
}

func (s *Server) projectLocked(r *http.Request) (*project, error) {
	p, ok := s.projects[r.PathValue("name")]
	if !ok {
		return nil, errf(http.StatusNotFound, api.CodeNotFound, "project %q not found", r.PathValue("name"))
	}
	return p, nil
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateProjectRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.projects[req.Name]; ok {
		return errf(http.StatusConflict, api.CodeConflict, "project %q already exists", req.Name)
	}
	p := &project{Project: api.Project{Name: req.Name, Owner: r.Header.Get(api.HeaderUser), Container: "remote-" + req.Name,
		Image: req.Image, Provider: req.Provider, Ports: req.Ports, Autostart: req.Autostart == nil || *req.Autostart, Status: "stopped"},
		secrets: map[string]time.Time{}}
	s.projects[req.Name] = p
	return writeJSON(w, http.StatusCreated, p.Project)
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	out := []api.Project{}
	for _, p := range s.projects {
		out = append(out, p.Project)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.projectLocked(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p.Project)
}

func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.projectLocked(r)
	if err != nil {
		return err
	}
	delete(s.projects, p.Name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) startStop(status string) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, err := s.projectLocked(r)
		if err != nil {
			return err
		}
		p.Status = status
		return writeJSON(w, http.StatusOK, p.Project)
	}
}

var secretKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) error {
	var req api.PutSecretRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	key := r.PathValue("key")
	if !secretKeyRe.MatchString(key) {
		return errf(http.StatusBadRequest, api.CodeBadRequest, "secret key %q: must match ^[A-Za-z_][A-Za-z0-9_]*$", key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.projectLocked(r)
	if err != nil {
		return err
	}
	p.secrets[key] = time.Now().UTC()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.projectLocked(r)
	if err != nil {
		return err
	}
	out := []api.SecretInfo{}
	for k, t := range p.secrets {
		out = append(out, api.SecretInfo{Key: k, UpdatedAt: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.projectLocked(r)
	if err != nil {
		return err
	}
	key := r.PathValue("key")
	if _, ok := p.secrets[key]; !ok {
		return errf(http.StatusNotFound, api.CodeNotFound, "secret %q of project %q not found", key, p.Name)
	}
	delete(p.secrets, key)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Command) == 0 {
		return errf(http.StatusBadRequest, api.CodeBadRequest, "command: must name a program")
	}
	s.mu.Lock()
	_, err := s.projectLocked(r)
	script := s.Exec
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if script == nil {
		script = func(req api.ExecRequest) []api.ExecFrame {
			zero := 0
			b, _ := json.Marshal(req.Command)
			return []api.ExecFrame{{Stream: "stdout", Data: append(b, '\n')}, {ExitCode: &zero}}
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, f := range script(req) {
		enc.Encode(f)
	}
	return nil
}
