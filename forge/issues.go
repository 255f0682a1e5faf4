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
)

// maxCommentBytes bounds a comment (GitHub's limit is 65,536 characters).
const maxCommentBytes = 65536

// Comment posts body as a comment on issue number n of repo with token
// and returns the comment's page (html_url; GitLab's notes have none, ""):
//   - GitHub: POST /repos/{owner}/{repo}/issues/{n}/comments {body}
//     (https://docs.github.com/en/rest/issues/comments#create-an-issue-comment);
//   - GitLab: POST /projects/{id}/issues/{iid}/notes {body}
//     (https://docs.gitlab.com/api/notes/#create-new-issue-note);
//   - Gitea: POST /repos/{owner}/{repo}/issues/{index}/comments {body}
//     (swagger: issueCreateComment, CreateIssueCommentOption).
func (f Forge) Comment(ctx context.Context, token, repo string, n int, body string) (string, error) {
	if err := f.precheck(token, repo); err != nil {
		return "", err
	}
	if n <= 0 {
		return "", invalid("issue number %d is not positive", n)
	}
	if strings.TrimSpace(body) == "" || len(body) > maxCommentBytes {
		return "", invalid("a comment must be 1 to %d bytes", maxCommentBytes)
	}
	endpoint := f.repoPath(repo) + fmt.Sprintf("/issues/%d/comments", n)
	if f.Kind == GitLab {
		endpoint = f.repoPath(repo) + fmt.Sprintf("/issues/%d/notes", n)
	}
	status, data, err := f.call(ctx, token, http.MethodPost, endpoint, struct {
		Body string `json:"body"`
	}{body})
	if err != nil {
		return "", err
	}
	if status < 200 || status > 299 {
		return "", &APIError{Kind: f.Kind, Host: f.host(), Status: status, Message: forgeMessage(data, token)}
	}
	var a struct {
		HTMLURL string `json:"html_url"`
	}
	_ = json.Unmarshal(data, &a)
	return a.HTMLURL, nil
}

// CanWrite reports whether forge user may push to repo, asked with token:
//   - GitHub: GET /repos/{owner}/{repo}/collaborators/{username}/permission,
//     "permission" admin, maintain or write (role_name too)
//     (https://docs.github.com/en/rest/collaborators/collaborators#get-repository-permissions-for-a-user);
//   - GitLab: GET /projects/{id}/members/all?query=… is imprecise, so
//     GET /users?username={user} then GET /projects/{id}/members/all/{user_id},
//     access_level ≥ 30 (Developer)
//     (https://docs.gitlab.com/api/members/#get-a-member-of-a-group-or-project-including-inherited-and-invited-members);
//   - Gitea: GET /repos/{owner}/{repo}/collaborators/{collaborator}/permission,
//     "permission" admin, owner or write (swagger: repoGetRepoPermissions).
//
// A 404 (not a collaborator, no such user) is false without error.
func (f Forge) CanWrite(ctx context.Context, token, repo, user string) (bool, error) {
	if err := f.precheck(token, repo); err != nil {
		return false, err
	}
	if !validSegment(user) {
		return false, invalid("user %q is not a forge user name", user)
	}
	if f.Kind == GitLab {
		status, data, err := f.call(ctx, token, http.MethodGet, strings.TrimSuffix(f.API, "/")+"/users?username="+url.QueryEscape(user), nil)
		if err != nil {
			return false, err
		}
		if status != http.StatusOK {
			return false, &APIError{Kind: f.Kind, Host: f.host(), Status: status, Message: forgeMessage(data, token)}
		}
		var users []struct {
			ID       int    `json:"id"`
			Username string `json:"username"`
		}
		if json.Unmarshal(data, &users) != nil {
			return false, &Error{Kind: f.Kind, Host: f.host(), Msg: "the users answer is not a JSON array"}
		}
		id := 0
		for _, u := range users {
			if strings.EqualFold(u.Username, user) {
				id = u.ID
			}
		}
		if id <= 0 {
			return false, nil
		}
		status, data, err = f.call(ctx, token, http.MethodGet, f.repoPath(repo)+fmt.Sprintf("/members/all/%d", id), nil)
		if err != nil || status == http.StatusNotFound {
			return false, err
		}
		if status != http.StatusOK {
			return false, &APIError{Kind: f.Kind, Host: f.host(), Status: status, Message: forgeMessage(data, token)}
		}
		var m struct {
			AccessLevel int `json:"access_level"`
		}
		if json.Unmarshal(data, &m) != nil {
			return false, &Error{Kind: f.Kind, Host: f.host(), Msg: "the member answer is not a JSON object"}
		}
		return m.AccessLevel >= 30, nil
	}
	status, data, err := f.call(ctx, token, http.MethodGet, f.repoPath(repo)+"/collaborators/"+url.PathEscape(user)+"/permission", nil)
	if err != nil || status == http.StatusNotFound {
		return false, err
	}
	if status != http.StatusOK {
		return false, &APIError{Kind: f.Kind, Host: f.host(), Status: status, Message: forgeMessage(data, token)}
	}
	var p struct {
		Permission string `json:"permission"`
	}
	if json.Unmarshal(data, &p) != nil {
		return false, &Error{Kind: f.Kind, Host: f.host(), Msg: "the permission answer is not a JSON object"}
	}
	switch p.Permission {
	case "admin", "maintain", "write", "owner":
		return true, nil
	}
	return false, nil
}

func (f Forge) precheck(token, repo string) error {
	if err := f.check(); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return err
	}
	return checkRepoPath(f.Kind, repo)
}

func (f Forge) host() string {
	u, _ := url.Parse(f.API)
	return u.Host
}

// repoPath is the API's URL of repo: /repos/owner/name, GitLab's
// /projects/<url-encoded path>.
func (f Forge) repoPath(repo string) string {
	api := strings.TrimSuffix(f.API, "/")
	if f.Kind == GitLab {
		return api + "/projects/" + url.PathEscape(repo)
	}
	owner, name, _ := strings.Cut(repo, "/")
	return api + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)
}

// call sends one request in f's dialect (headers as OpenPullRequest
// sends them) and returns the status and the bounded body.
func (f Forge) call(ctx context.Context, token, method, endpoint string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, invalid("%s: encode request: %v", f.Kind, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		return 0, nil, invalid("%s: build request: %v", f.Kind, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	f.authorize(req, token)
	base, _ := url.Parse(f.API)
	resp, err := f.client(base).Do(req)
	if err != nil {
		err = transportError(f.Kind, err, token)
		var fe *Error
		if errors.As(err, &fe) {
			fe.Host = base.Host
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return 0, nil, &Error{Kind: f.Kind, Host: base.Host, Msg: "reading the answer failed: " + redact(err.Error(), token), unavailable: true}
	}
	if len(data) > maxAnswerBytes {
		return 0, nil, &Error{Kind: f.Kind, Host: base.Host, Msg: fmt.Sprintf("the %d answer is larger than %d bytes", resp.StatusCode, maxAnswerBytes)}
	}
	return resp.StatusCode, data, nil
}

// authorize sets the dialect's headers and token.
func (f Forge) authorize(req *http.Request, token string) {
	req.Header.Set("User-Agent", "remoted") // GitHub refuses requests without one
	switch f.Kind {
	case GitHub:
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	case GitLab:
		req.Header.Set("Accept", "application/json")
		req.Header.Set("PRIVATE-TOKEN", token)
	case Gitea:
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Authorization", "token "+token)
	}
}
