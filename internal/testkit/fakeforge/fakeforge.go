// Package fakeforge is a forge stand-in for tests: an HTTP server on
// loopback that speaks the pull-request dialects of GitHub, GitLab and
// Gitea/Forgejo as their documentation describes them, checks each request
// strictly (method, path, headers, the token, the JSON fields), records it,
// and answers like the real forge: 201 with the pull request (GitHub and
// Gitea html_url and number, GitLab web_url and iid), or the forge's own
// error bodies (401 for a wrong token, 422/409 for a pull request that
// exists already, 400 naming what the stand-in found wrong). Knobs queue
// error answers or arbitrary handlers for the next requests.
//
//	fg := fakeforge.New(t, "github")
//	// [forges."<fg.Host()>"] kind = "github", api = fg.URL()
//	... open a pull request with fg.Token() ...
//	reqs := fg.Requests() // what arrived, each with Problem "" when it was as documented
//
// It is test support only: it imports nothing of the product and must never
// be imported by product code.
package fakeforge

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Request is one request the stand-in received.
type Request struct {
	Method string
	// Path is the escaped path as sent (GitLab's project id keeps its %2F).
	Path   string
	Header http.Header
	// Body is the raw body; Fields its JSON object (nil when it is not one).
	Body   []byte
	Fields map[string]any
	// Repo is the repository the path names ("owner/name", GitLab's
	// decoded project path); "" when the path is not the dialect's.
	Repo string
	// Problem says how the request departed from the documented one; ""
	// when it was exactly as documented (and the token was right).
	Problem string
}

// Answer is a queued reply to the next request: an error in the forge's
// own format, or a handler of the test's.
type Answer struct {
	Status  int
	Message string           // the forge's error message; a default per status when empty
	Handler http.HandlerFunc // when set, answers the request instead
}

// Server is a running stand-in.
type Server struct {
	kind string
	srv  *httptest.Server

	mu     sync.Mutex
	token  string
	reqs   []Request
	next   []Answer
	number int
	open   map[string]int // "repo head base" → number of an open pull request
	// perms are the forge users' permissions on every repository:
	// GitHub/Gitea "admin", "write", "read"…; GitLab an access level
	// ("30"). A user not listed is no collaborator (404).
	perms    map[string]string
	comments int
}

// New starts a stand-in of kind "github", "gitlab" or "gitea" (Forgejo
// speaks Gitea's API) on loopback, expecting a random token (Token; set
// another with SetToken). It stops when the test ends.
func New(t testing.TB, kind string) *Server {
	t.Helper()
	switch kind {
	case "github", "gitlab", "gitea":
	default:
		t.Fatalf("fakeforge: unknown kind %q (github, gitlab, gitea)", kind)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s := &Server{kind: kind, token: "fk_" + hex.EncodeToString(b), open: map[string]int{}, perms: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL of the stand-in's REST API, as [forges] api takes
// it: the server itself for GitHub, …/api/v4 for GitLab, …/api/v1 for Gitea.
func (s *Server) URL() string {
	switch s.kind {
	case "gitlab":
		return s.srv.URL + "/api/v4"
	case "gitea":
		return s.srv.URL + "/api/v1"
	}
	return s.srv.URL
}

// Host is the stand-in's host:port, the key of its [forges."<host>"] table
// and the host of its pull requests' pages.
func (s *Server) Host() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// Kind is the dialect the stand-in speaks.
func (s *Server) Kind() string { return s.kind }

// Token is the token the stand-in expects.
func (s *Server) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// SetToken makes the stand-in expect token.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// Requests returns copies of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// FailNext answers the next request with status and the forge's own
// error body carrying message (a default per status when empty).
func (s *Server) FailNext(status int, message string) {
	s.Queue(Answer{Status: status, Message: message})
}

// Queue queues answers for the next requests, one each, before the
// stand-in answers on its own again. A queued answer still records the
// request (with its Problem).
func (s *Server) Queue(answers ...Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = append(s.next, answers...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	rec := Request{Method: r.Method, Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body}
	_ = json.Unmarshal(body, &rec.Fields)

	s.mu.Lock()
	token := s.token
	var queued *Answer
	if len(s.next) > 0 {
		queued = &s.next[0]
		s.next = s.next[1:]
	}
	s.mu.Unlock()

	if s.serveIssues(w, r, body, token, &rec, queued) {
		return
	}
	status, problem := s.check(r, body, token, &rec)
	rec.Problem = problem
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()

	switch {
	case queued != nil && queued.Handler != nil:
		queued.Handler(w, r)
	case queued != nil:
		s.writeError(w, queued.Status, queued.Message)
	case problem != "":
		s.writeError(w, status, problem)
	default:
		s.create(w, rec)
	}
}

// check compares the request with the documented one and returns the
// status the real forge would answer and what was wrong ("" when nothing).
func (s *Server) check(r *http.Request, body []byte, token string, rec *Request) (int, string) {
	var ok bool
	rec.Repo, ok = s.repo(r.URL.EscapedPath())
	switch {
	case !ok:
		return http.StatusNotFound, fmt.Sprintf("path %q is not the %s pull request endpoint", r.URL.EscapedPath(), s.kind)
	case r.Method != http.MethodPost:
		return http.StatusMethodNotAllowed, "method " + r.Method + ", want POST"
	}
	// Authentication comes first, as on the real forges.
	switch s.kind {
	case "github":
		if r.Header.Get("Authorization") != "Bearer "+token {
			return http.StatusUnauthorized, "Bad credentials"
		}
	case "gitlab":
		if r.Header.Get("Private-Token") != token || r.Header.Get("Authorization") != "" {
			return http.StatusUnauthorized, "401 Unauthorized"
		}
	case "gitea":
		if r.Header.Get("Authorization") != "token "+token {
			return http.StatusUnauthorized, "token is required"
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q, want application/json", ct)
	}
	if s.kind == "github" {
		for h, want := range map[string]string{"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"} {
			if got := r.Header.Get(h); got != want {
				return http.StatusBadRequest, fmt.Sprintf("header %s is %q, want %q", h, got, want)
			}
		}
		if r.Header.Get("User-Agent") == "" {
			return http.StatusForbidden, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header"
		}
	}
	fields := map[string]bool{"title": true, "head": true, "base": true, "body": false}
	if s.kind == "gitlab" {
		fields = map[string]bool{"title": true, "source_branch": true, "target_branch": true, "description": false}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return http.StatusBadRequest, "Problems parsing JSON"
	}
	if raw, ok := obj["draft"]; ok && s.kind == "github" { // GitHub's only non-string field
		var d bool
		if json.Unmarshal(raw, &d) != nil {
			return http.StatusUnprocessableEntity, `field "draft" is not a boolean`
		}
		delete(obj, "draft")
	}
	for k := range obj {
		if _, known := fields[k]; !known {
			return http.StatusUnprocessableEntity, fmt.Sprintf("field %q is not a documented field", k)
		}
	}
	for k, required := range fields {
		var v string
		if raw, present := obj[k]; present && json.Unmarshal(raw, &v) != nil {
			return http.StatusUnprocessableEntity, fmt.Sprintf("field %q is not a string", k)
		}
		if required && v == "" {
			return http.StatusUnprocessableEntity, fmt.Sprintf("field %q is missing", k)
		}
	}
	return 0, ""
}

// repo returns the repository the escaped path names in the dialect.
func (s *Server) repo(path string) (string, bool) {
	switch s.kind {
	case "gitlab":
		id, ok := strings.CutPrefix(path, "/api/v4/projects/")
		if !ok {
			return "", false
		}
		id, ok = strings.CutSuffix(id, "/merge_requests")
		if !ok || id == "" || strings.Contains(id, "/") {
			return "", false // the namespace path must be one URL-encoded segment
		}
		p, err := url.PathUnescape(id)
		return p, err == nil && strings.Contains(p, "/")
	default:
		prefix := "/repos/"
		if s.kind == "gitea" {
			prefix = "/api/v1/repos/"
		}
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok {
			return "", false
		}
		rest, ok = strings.CutSuffix(rest, "/pulls")
		parts := strings.Split(rest, "/")
		if !ok || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
			return "", false
		}
		return rest, true
	}
}

// create answers 201 with a new pull request, or the forge's error for a
// pull request of the same branches that is open already.
func (s *Server) create(w http.ResponseWriter, rec Request) {
	str := func(k string) string { v, _ := rec.Fields[k].(string); return v }
	head, base, text := str("head"), str("base"), str("body")
	if s.kind == "gitlab" {
		head, base, text = str("source_branch"), str("target_branch"), str("description")
	}
	key := rec.Repo + " " + head + " " + base
	s.mu.Lock()
	if n, exists := s.open[key]; exists {
		s.mu.Unlock()
		s.writeDuplicate(w, rec.Repo, head, n)
		return
	}
	s.number++
	n := s.number
	s.open[key] = n
	s.mu.Unlock()

	web := s.srv.URL + "/" + rec.Repo
	var answer map[string]any
	switch s.kind {
	case "gitlab":
		answer = map[string]any{"id": 1000 + n, "iid": n, "project_id": 1, "title": str("title"), "description": text,
			"state": "opened", "source_branch": head, "target_branch": base, "web_url": fmt.Sprintf("%s/-/merge_requests/%d", web, n)}
	case "gitea":
		answer = map[string]any{"id": 1000 + n, "number": n, "title": str("title"), "body": text, "state": "open",
			"html_url": fmt.Sprintf("%s/pulls/%d", web, n), "url": fmt.Sprintf("%s/pulls/%d", web, n),
			"head": map[string]any{"ref": head}, "base": map[string]any{"ref": base}}
	default:
		answer = map[string]any{"id": 1000 + n, "number": n, "title": str("title"), "body": text, "state": "open",
			"html_url": fmt.Sprintf("%s/pull/%d", web, n), "url": fmt.Sprintf("%s/repos/%s/pulls/%d", s.srv.URL, rec.Repo, n),
			"head": map[string]any{"ref": head}, "base": map[string]any{"ref": base}}
	}
	writeJSON(w, http.StatusCreated, answer)
}

func (s *Server) writeDuplicate(w http.ResponseWriter, repo, head string, n int) {
	switch s.kind {
	case "github":
		owner, _, _ := strings.Cut(repo, "/")
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message": "Validation Failed",
			"errors": []any{map[string]any{"resource": "PullRequest", "code": "custom",
				"message": fmt.Sprintf("A pull request already exists for %s:%s.", owner, head)}},
			"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request", "status": "422"})
	case "gitlab":
		writeJSON(w, http.StatusConflict, map[string]any{
			"message": []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", n)}})
	default:
		writeJSON(w, http.StatusConflict, map[string]any{
			"message": fmt.Sprintf("pull request already exists for these targets [id: %d, issue_id: %d, head_repo_id: 1, base_repo_id: 1, head_branch: %s]", 1000+n, n, head),
			"url":     s.srv.URL + "/api/swagger"})
	}
}

// writeError writes the forge's own error body for status.
func (s *Server) writeError(w http.ResponseWriter, status int, message string) {
	if message == "" {
		message = http.StatusText(status)
	}
	switch s.kind {
	case "github":
		writeJSON(w, status, map[string]any{"message": message,
			"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request", "status": fmt.Sprint(status)})
	case "gitlab":
		writeJSON(w, status, map[string]any{"message": message})
	default:
		writeJSON(w, status, map[string]any{"message": message, "url": s.srv.URL + "/api/swagger"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
