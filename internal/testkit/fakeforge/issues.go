package fakeforge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// SetPermission gives forge user perm on every repository: GitHub and
// Gitea "admin", "maintain", "write", "read"; GitLab an access level
// ("30" is Developer). A user never given one is not a collaborator.
func (s *Server) SetPermission(user, perm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perms[user] = perm
}

var (
	hubComment = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/issues/([0-9]+)/comments$`)
	hubPerm    = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/collaborators/([^/]+)/permission$`)
	labNote    = regexp.MustCompile(`^/projects/([^/]+)/issues/([0-9]+)/notes$`)
	labMember  = regexp.MustCompile(`^/projects/([^/]+)/members/all/([0-9]+)$`)
)

// serveIssues answers the issue comment and permission endpoints;
// false when the path is none of them.
func (s *Server) serveIssues(w http.ResponseWriter, r *http.Request, body []byte, token string, rec *Request, queued *Answer) bool {
	path := strings.TrimPrefix(strings.TrimPrefix(r.URL.EscapedPath(), "/api/v4"), "/api/v1")
	var m []string
	kind := ""
	for _, c := range []struct {
		re   *regexp.Regexp
		name string
	}{{hubComment, "comment"}, {hubPerm, "permission"}, {labNote, "comment"}, {labMember, "member"}} {
		if m = c.re.FindStringSubmatch(path); m != nil {
			kind = c.name
			break
		}
	}
	if path == "/users" && s.kind == "gitlab" {
		kind = "users"
	}
	if kind == "" {
		return false
	}
	rec.Repo, _ = url.PathUnescape(strings.TrimSuffix(firstOr(m, 1), ""))
	status, problem := s.checkAuth(r, token)
	wantMethod := http.MethodGet
	if kind == "comment" {
		wantMethod = http.MethodPost
	}
	if problem == "" && r.Method != wantMethod {
		status, problem = http.StatusMethodNotAllowed, "method "+r.Method+", want "+wantMethod
	}
	if problem == "" && kind == "comment" {
		var obj map[string]any
		if r.Header.Get("Content-Type") != "application/json" {
			status, problem = http.StatusUnsupportedMediaType, "Content-Type "+r.Header.Get("Content-Type")+", want application/json"
		} else if json.Unmarshal(body, &obj) != nil || len(obj) != 1 {
			status, problem = http.StatusUnprocessableEntity, "want exactly the field body"
		} else if b, _ := obj["body"].(string); b == "" {
			status, problem = http.StatusUnprocessableEntity, "field \"body\" is missing"
		}
	}
	rec.Problem = problem
	s.mu.Lock()
	s.reqs = append(s.reqs, *rec)
	s.mu.Unlock()
	switch {
	case queued != nil && queued.Handler != nil:
		queued.Handler(w, r)
		return true
	case queued != nil:
		s.writeError(w, queued.Status, queued.Message)
		return true
	case problem != "":
		s.writeError(w, status, problem)
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case "comment":
		s.comments++
		web := fmt.Sprintf("%s/%s/issues/%s#issuecomment-%d", s.srv.URL, rec.Repo, m[2], s.comments)
		writeJSON(w, http.StatusCreated, map[string]any{"id": s.comments, "body": rec.Fields["body"], "html_url": web})
	case "permission":
		p, ok := s.perms[m[2]]
		if !ok {
			s.writeError(w, http.StatusNotFound, m[2]+" is not a user")
			return true
		}
		writeJSON(w, http.StatusOK, map[string]any{"permission": p, "role_name": p, "user": map[string]any{"login": m[2]}})
	case "users":
		name := r.URL.Query().Get("username")
		var out []any
		i := 0
		for u := range s.perms {
			i++
			if u == name {
				out = append(out, map[string]any{"id": userID(u), "username": u})
			}
		}
		writeJSON(w, http.StatusOK, append([]any{}, out...))
	case "member":
		for u, p := range s.perms {
			if strconv.Itoa(userID(u)) == m[2] {
				lvl, _ := strconv.Atoi(p)
				writeJSON(w, http.StatusOK, map[string]any{"id": userID(u), "username": u, "access_level": lvl})
				return true
			}
		}
		s.writeError(w, http.StatusNotFound, "404 Not found")
	}
	return true
}

func firstOr(m []string, i int) string {
	if len(m) > i {
		return m[i]
	}
	return ""
}

// userID is a stable id of a GitLab user name.
func userID(u string) int {
	h := sha256.Sum256([]byte(u))
	return int(h[0])<<8 | int(h[1]) + 1
}

// checkAuth is the dialect's token check.
func (s *Server) checkAuth(r *http.Request, token string) (int, string) {
	switch s.kind {
	case "github":
		if r.Header.Get("Authorization") != "Bearer "+token {
			return http.StatusUnauthorized, "Bad credentials"
		}
		if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
			return http.StatusBadRequest, "Accept or X-GitHub-Api-Version is not the documented value"
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
	return 0, ""
}

// Issue is what a webhook delivery says of an issue (or comment).
type Issue struct {
	Repo     string // "owner/name", GitLab's path_with_namespace
	CloneURL string
	Number   int
	Title    string
	Body     string
	Labels   []string
	Label    string // the label just added (a "labeled" event)
	Sender   string
	Comment  string // set: an issue_comment (GitLab: a note) on the issue
	// PullRequest makes Number a pull request's (GitLab: a merge
	// request's note), for a Comment.
	PullRequest bool
}

// Delivery is a webhook delivery as the forge sends it: its headers
// (event, delivery id, signature or token) and JSON body.
type Delivery struct {
	Header http.Header
	Body   []byte
}

// IssueDelivery builds the documented webhook delivery of kind for iss,
// signed with secret: GitHub's "issues" (action opened, or labeled when
// Label is set) or "issue_comment" with X-GitHub-Event, X-GitHub-Delivery
// and X-Hub-Signature-256; GitLab's "Issue Hook"/"Note Hook" with
// X-Gitlab-Event, X-Gitlab-Event-UUID and X-Gitlab-Token; Gitea's
// "issues"/"issue_comment" with X-Gitea-Event, X-Gitea-Delivery and
// X-Gitea-Signature. Each call has a new delivery id.
func IssueDelivery(kind, secret string, iss Issue) Delivery {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	labels := func(key string) []any {
		var out []any
		for _, l := range iss.Labels {
			out = append(out, map[string]any{"id": userID(l), key: l})
		}
		return append([]any{}, out...)
	}
	var payload map[string]any
	switch kind {
	case "gitlab":
		user := map[string]any{"id": userID(iss.Sender), "username": iss.Sender, "name": iss.Sender}
		project := map[string]any{"id": 1, "path_with_namespace": iss.Repo, "git_http_url": iss.CloneURL}
		issue := map[string]any{"iid": iss.Number, "title": iss.Title, "description": iss.Body}
		if iss.Comment != "" {
			h.Set("X-Gitlab-Event", "Note Hook")
			payload = map[string]any{"object_kind": "note", "event_type": "note", "user": user, "project": project,
				"object_attributes": map[string]any{"note": iss.Comment, "noteable_type": "Issue"}, "issue": issue}
			if iss.PullRequest {
				payload["object_attributes"] = map[string]any{"note": iss.Comment, "noteable_type": "MergeRequest"}
				payload["merge_request"] = map[string]any{"iid": iss.Number, "title": iss.Title}
				delete(payload, "issue")
			}
		} else {
			h.Set("X-Gitlab-Event", "Issue Hook")
			attrs := map[string]any{"iid": iss.Number, "title": iss.Title, "description": iss.Body, "action": "open"}
			payload = map[string]any{"object_kind": "issue", "event_type": "issue", "user": user, "project": project,
				"object_attributes": attrs, "labels": labels("title")}
			if iss.Label != "" {
				attrs["action"] = "update"
				var prev []any
				for _, l := range iss.Labels {
					if l != iss.Label {
						prev = append(prev, map[string]any{"title": l})
					}
				}
				payload["changes"] = map[string]any{"labels": map[string]any{"previous": append([]any{}, prev...), "current": labels("title")}}
			}
		}
		h.Set("X-Gitlab-Event-UUID", id)
		h.Set("X-Gitlab-Token", secret)
	default:
		event, action := "issues", "opened"
		if iss.Label != "" {
			action = "labeled"
			if kind == "gitea" {
				action = "label_updated"
			}
		}
		issue := map[string]any{"number": iss.Number, "title": iss.Title, "body": iss.Body, "labels": labels("name"),
			"user": map[string]any{"login": iss.Sender}}
		payload = map[string]any{"action": action, "issue": issue,
			"repository": map[string]any{"full_name": iss.Repo, "clone_url": iss.CloneURL},
			"sender":     map[string]any{"login": iss.Sender}}
		if iss.Label != "" && kind == "github" {
			payload["label"] = map[string]any{"name": iss.Label}
		}
		if iss.Comment != "" {
			event = "issue_comment"
			payload["action"] = "created"
			payload["comment"] = map[string]any{"body": iss.Comment, "user": map[string]any{"login": iss.Sender}}
			if iss.PullRequest {
				issue["pull_request"] = map[string]any{"url": fmt.Sprintf("https://forge.example/%s/pulls/%d", iss.Repo, iss.Number)}
				if kind == "gitea" {
					payload["is_pull"] = true
				}
			}
		}
		if kind == "gitea" {
			payload["number"] = iss.Number
			h.Set("X-Gitea-Event", event)
			h.Set("X-Gitea-Delivery", id)
		} else {
			h.Set("X-GitHub-Event", event)
			h.Set("X-GitHub-Delivery", id)
		}
	}
	body, _ := json.Marshal(payload)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	sig := hex.EncodeToString(mac.Sum(nil))
	switch kind {
	case "github":
		h.Set("X-Hub-Signature-256", "sha256="+sig)
	case "gitea":
		h.Set("X-Gitea-Signature", sig)
	}
	return Delivery{Header: h, Body: body}
}
