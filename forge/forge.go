package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Kind is a forge's API dialect.
type Kind string

// The dialects. Forgejo speaks Gitea's API.
const (
	GitHub Kind = "github"
	GitLab Kind = "gitlab"
	Gitea  Kind = "gitea"
)

// Forge is one configured forge: its dialect and the base URL of its REST
// API (https://api.github.com, https://gitlab.com/api/v4,
// https://gitea.example/api/v1). API comes from the operator's
// configuration only.
type Forge struct {
	Kind Kind
	API  string
	// HTTP is the client requests go through; nil: one with a 30 s
	// timeout. Its CheckRedirect is never used: redirects are followed
	// only to the API's own scheme and host.
	HTTP *http.Client
}

// PullRequest is what to open.
type PullRequest struct {
	// Repo is "owner/name"; on GitLab the project's full namespace path
	// ("group/subgroup/name"), sent URL-encoded as the :id.
	Repo  string
	Head  string // the pushed branch
	Base  string // the branch to merge into
	Title string
	Body  string
	// Draft opens it as a draft where the forge has drafts: GitHub's
	// "draft": true, GitLab's "Draft: " title prefix, Gitea's "WIP: "
	// title prefix (its default WORK_IN_PROGRESS_PREFIXES; its API has
	// no draft field).
	Draft bool
}

// Result is the opened pull request: its page (html_url, GitLab's web_url)
// and number (GitLab's iid).
type Result struct {
	URL    string
	Number int
}

// Bounds on what is sent and read.
const (
	defaultTimeout = 30 * time.Second
	maxAnswerBytes = 1 << 20 // a pull request's JSON is tens of KiB
	maxRedirects   = 5
	maxTitleBytes  = 1024
	maxBodyBytes   = 1 << 20 // GitLab's description limit is 1,048,576 characters
	maxBranchBytes = 255
)

// OpenPullRequest opens pr on f with token, the user's token for the
// forge, and returns the pull request's page and number. The token is sent
// only in the dialect's header, only to f.API's scheme and host; it never
// appears in an error. A forge's refusal is an *APIError.
//
// The requests follow the forges' documentation:
//   - GitHub: https://docs.github.com/en/rest/pulls/pulls#create-a-pull-request
//     (headers per https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api
//     and https://docs.github.com/en/rest/about-the-rest-api/api-versions);
//   - GitLab: https://docs.gitlab.com/api/merge_requests/#create-mr, the
//     PRIVATE-TOKEN header per https://docs.gitlab.com/api/rest/authentication/,
//     the path's :id URL-encoded per https://docs.gitlab.com/api/rest/#namespaced-paths;
//   - Gitea/Forgejo: https://docs.gitea.com/development/api-usage
//     ("Authorization: token …") and the swagger's repoCreatePullRequest
//     (CreatePullRequestOption: head, base, title, body).
func (f Forge) OpenPullRequest(ctx context.Context, token string, pr PullRequest) (Result, error) {
	if err := f.check(); err != nil {
		return Result{}, err
	}
	if err := checkToken(token); err != nil {
		return Result{}, err
	}
	if err := pr.check(f.Kind); err != nil {
		return Result{}, err
	}
	base, _ := url.Parse(f.API) // checked by f.check
	endpoint, body, err := f.request(pr)
	if err != nil {
		return Result{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return Result{}, invalid("%s: build request: %v", f.Kind, err)
	}
	req.Header.Set("Content-Type", "application/json")
	f.authorize(req, token)
	r, err := f.do(req, base, token)
	var ae *APIError
	var fe *Error
	switch {
	case errors.As(err, &ae):
		ae.Host = base.Host
	case errors.As(err, &fe):
		fe.Host = base.Host
	}
	return r, err
}

func (f Forge) do(req *http.Request, base *url.URL, token string) (Result, error) {
	resp, err := f.client(base).Do(req)
	if err != nil {
		return Result{}, transportError(f.Kind, err, token)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return Result{}, &Error{Kind: f.Kind, Msg: "reading the answer failed: " + redact(err.Error(), token), unavailable: true}
	}
	if len(data) > maxAnswerBytes {
		return Result{}, &Error{Kind: f.Kind, Msg: fmt.Sprintf("the %d answer is larger than %d bytes", resp.StatusCode, maxAnswerBytes)}
	}
	return decodeAnswer(f.Kind, resp.StatusCode, data, token)
}

// request returns the endpoint and JSON body of pr in f's dialect.
func (f Forge) request(pr PullRequest) (string, []byte, error) {
	api := strings.TrimSuffix(f.API, "/")
	var endpoint string
	var body any
	switch f.Kind {
	case GitHub, Gitea:
		owner, name, _ := strings.Cut(pr.Repo, "/")
		endpoint = api + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/pulls"
		title := pr.Title
		if pr.Draft && f.Kind == Gitea {
			title = "WIP: " + title
		}
		body = struct {
			Title string `json:"title"`
			Head  string `json:"head"`
			Base  string `json:"base"`
			Body  string `json:"body,omitempty"`
			Draft bool   `json:"draft,omitempty"`
		}{title, pr.Head, pr.Base, pr.Body, pr.Draft && f.Kind == GitHub}
	case GitLab:
		// The project path is one segment: its slashes are %2F.
		endpoint = api + "/projects/" + url.PathEscape(pr.Repo) + "/merge_requests"
		if pr.Draft {
			pr.Title = "Draft: " + pr.Title
		}
		body = struct {
			SourceBranch string `json:"source_branch"`
			TargetBranch string `json:"target_branch"`
			Title        string `json:"title"`
			Description  string `json:"description,omitempty"`
		}{pr.Head, pr.Base, pr.Title, pr.Body}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return "", nil, invalid("%s: encode request: %v", f.Kind, err)
	}
	return endpoint, data, nil
}

// client is f.HTTP (or the default) with a redirect rule of its own: a
// redirect is followed only to base's scheme and host, where the token's
// header goes with it; anywhere else the request stops unsent. (Go drops
// Authorization on a redirect to another domain, but not PRIVATE-TOKEN,
// and it keeps both on a redirect to another port.)
func (f Forge) client(base *url.URL) *http.Client {
	c := &http.Client{Timeout: defaultTimeout}
	if f.HTTP != nil {
		cp := *f.HTTP
		c = &cp
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != base.Scheme || !strings.EqualFold(req.URL.Host, base.Host) {
			return &redirectError{host: req.URL.Host}
		}
		if len(via) >= maxRedirects {
			return errors.New("too many redirects")
		}
		return nil
	}
	return c
}

// redirectError is a redirect away from the API's host, not followed.
type redirectError struct{ host string }

func (e *redirectError) Error() string {
	return fmt.Sprintf("the forge redirected to another host (%q); not followed, the token goes only to the configured api", e.host)
}

// transportError reports a failed request without the URL (which
// url.Error repeats) and without the token.
func transportError(kind Kind, err error, token string) error {
	var re *redirectError
	if errors.As(err, &re) {
		return &Error{Kind: kind, Msg: re.Error()}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &Error{Kind: kind, Msg: "request failed: " + redact(err.Error(), token), unavailable: true}
}

// check refuses a Forge the configuration could not have produced.
func (f Forge) check() error {
	switch f.Kind {
	case GitHub, GitLab, Gitea:
	default:
		return invalid("forge kind %q is not one of github, gitlab, gitea", f.Kind)
	}
	u, err := url.Parse(f.API)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return invalid("%s: api is not an absolute http(s) URL without user, query or fragment", f.Kind)
	}
	return nil
}

func checkToken(token string) error {
	if token == "" {
		return invalid("no token for the forge")
	}
	for _, c := range token {
		if c < 0x21 || c == 0x7f {
			return invalid("the forge token contains a space or control character") // never shown
		}
	}
	return nil
}

// check refuses a pull request no forge would take, naming the field.
func (pr PullRequest) check(kind Kind) error {
	if err := checkRepoPath(kind, pr.Repo); err != nil {
		return err
	}
	for _, b := range []struct{ name, v string }{{"head", pr.Head}, {"base", pr.Base}} {
		if err := checkBranch(b.name, b.v); err != nil {
			return err
		}
	}
	if pr.Head == pr.Base {
		return invalid("head and base are the same branch %q", pr.Head)
	}
	switch {
	case strings.TrimSpace(pr.Title) == "":
		return invalid("title must not be empty")
	case len(pr.Title) > maxTitleBytes:
		return invalid("title is longer than %d bytes", maxTitleBytes)
	case len(pr.Body) > maxBodyBytes:
		return invalid("body is longer than %d bytes", maxBodyBytes)
	}
	return nil
}

// checkBranch accepts what git check-ref-format allows of a branch name,
// roughly: no control characters, spaces, "..", "~^:?*[\", leading "-".
func checkBranch(field, b string) error {
	switch {
	case b == "":
		return invalid("%s: the branch must not be empty", field)
	case len(b) > maxBranchBytes:
		return invalid("%s: the branch is longer than %d bytes", field, maxBranchBytes)
	case strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".") || strings.HasSuffix(b, ".lock") || strings.Contains(b, "..") ||
		strings.Contains(b, "//") || strings.Contains(b, "@{") || strings.ContainsAny(b, " ~^:?*[\\\x7f"):
		return invalid("%s: %q is not a branch name", field, b)
	}
	for _, c := range b {
		if c < 0x20 {
			return invalid("%s: the branch contains a control character", field)
		}
	}
	return nil
}

// checkRepoPath accepts "owner/name" (GitLab: "group/…/name"): segments
// of letters, digits, '.', '_' and '-', none "." or "..", so the path
// cannot climb out of /repos/ or /projects/ on the forge.
func checkRepoPath(kind Kind, repo string) error {
	segs := strings.Split(repo, "/")
	switch {
	case kind == GitLab && len(segs) < 2:
		return invalid("repo %q is not a project path like group/name", repo)
	case kind != GitLab && len(segs) != 2:
		return invalid("repo %q is not owner/name", repo)
	}
	for _, s := range segs {
		if !validSegment(s) {
			return invalid("repo %q: %q is not a valid owner, group or repository name", repo, s)
		}
	}
	return nil
}

func validSegment(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 255 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
