package forge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"remote/forge"
	"remote/internal/errdefs"
	"remote/internal/testkit/fakeforge"
)

// dialect is what each forge's documentation says a pull request request
// looks like, for the repository and branches the tests use.
var dialects = []struct {
	kind    forge.Kind
	repo    string
	path    string            // escaped, as sent
	headers map[string]string // "<token>" stands for the token
	fields  map[string]any
	url     string // the page, after the stand-in's address
}{
	{forge.GitHub, "octo/hello", "/repos/octo/hello/pulls",
		map[string]string{"Accept": "application/vnd.github+json", "Authorization": "Bearer <token>", "X-Github-Api-Version": "2022-11-28", "Content-Type": "application/json"},
		map[string]any{"title": "Fix the failing test", "head": "remote/fix", "base": "main", "body": "The agent fixed it."},
		"/octo/hello/pull/1"},
	{forge.GitLab, "group/sub/hello", "/api/v4/projects/group%2Fsub%2Fhello/merge_requests",
		map[string]string{"Private-Token": "<token>", "Content-Type": "application/json", "Authorization": ""},
		map[string]any{"title": "Fix the failing test", "source_branch": "remote/fix", "target_branch": "main", "description": "The agent fixed it."},
		"/group/sub/hello/-/merge_requests/1"},
	{forge.Gitea, "octo/hello", "/api/v1/repos/octo/hello/pulls",
		map[string]string{"Authorization": "token <token>", "Content-Type": "application/json"},
		map[string]any{"title": "Fix the failing test", "head": "remote/fix", "base": "main", "body": "The agent fixed it."},
		"/octo/hello/pulls/1"},
}

func pr(repo string) forge.PullRequest {
	return forge.PullRequest{Repo: repo, Head: "remote/fix", Base: "main", Title: "Fix the failing test", Body: "The agent fixed it."}
}

// TestOpenPullRequest opens a pull request on each dialect's stand-in and
// checks the request is the documented one (path, headers, JSON fields)
// and the answer's page and number come back; a second one for the same
// branches gets the forge's own "exists already" refusal.
func TestOpenPullRequest(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.kind), func(t *testing.T) {
			fg := fakeforge.New(t, string(d.kind))
			f := forge.Forge{Kind: d.kind, API: fg.URL()}
			got, err := f.OpenPullRequest(context.Background(), fg.Token(), pr(d.repo))
			if err != nil {
				t.Fatalf("OpenPullRequest: %v", err)
			}
			if want := (forge.Result{URL: "http://" + fg.Host() + d.url, Number: 1}); got != want {
				t.Errorf("result = %+v, want %+v", got, want)
			}
			reqs := fg.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Problem != "" || r.Method != "POST" || r.Path != d.path {
				t.Errorf("request %s %s (problem %q), want POST %s", r.Method, r.Path, r.Problem, d.path)
			}
			for h, want := range d.headers {
				want = strings.ReplaceAll(want, "<token>", fg.Token())
				if got := r.Header.Get(h); got != want {
					t.Errorf("header %s = %q, want %q", h, got, want)
				}
			}
			if fmt.Sprint(r.Fields) != fmt.Sprint(d.fields) {
				t.Errorf("fields = %v, want %v", r.Fields, d.fields)
			}

			_, err = f.OpenPullRequest(context.Background(), fg.Token(), pr(d.repo))
			var ae *forge.APIError
			if !errors.As(err, &ae) || !errdefs.IsFailedPrecondition(err) || errdefs.IsUnavailable(err) {
				t.Fatalf("second pull request: %v (%T), want a FailedPrecondition *APIError", err, err)
			}
			want := map[forge.Kind]string{
				forge.GitHub: "forge github (" + fg.Host() + ") answered 422 Unprocessable Entity: Validation Failed: A pull request already exists for octo:remote/fix.",
				forge.GitLab: "forge gitlab (" + fg.Host() + ") answered 409 Conflict: Another open merge request already exists for this source branch: !1",
				forge.Gitea:  "forge gitea (" + fg.Host() + ") answered 409 Conflict: pull request already exists for these targets [id: 1001, issue_id: 1, head_repo_id: 1, base_repo_id: 1, head_branch: remote/fix]",
			}[d.kind]
			if err.Error() != want {
				t.Errorf("error = %q\nwant    %q", err, want)
			}
		})
	}
}

// TestWrongTokenAndServerErrors: a refused token is the forge's 401 with
// its message; a 5xx or 429 is Unavailable.
func TestWrongTokenAndServerErrors(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.kind), func(t *testing.T) {
			fg := fakeforge.New(t, string(d.kind))
			f := forge.Forge{Kind: d.kind, API: fg.URL()}
			_, err := f.OpenPullRequest(context.Background(), "wrong-token-123", pr(d.repo))
			var ae *forge.APIError
			if !errors.As(err, &ae) || ae.Status != 401 || !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("wrong token: %v, want a 401 *APIError", err)
			}
			if strings.Contains(err.Error(), "wrong-token-123") {
				t.Errorf("error carries the token: %v", err)
			}
			for _, status := range []int{500, 502, 429} {
				fg.FailNext(status, "try later")
				_, err := f.OpenPullRequest(context.Background(), fg.Token(), pr(d.repo))
				if !errors.As(err, &ae) || ae.Status != status || !errdefs.IsUnavailable(err) || !strings.HasSuffix(err.Error(), ": try later") {
					t.Errorf("status %d: %v, want an Unavailable *APIError ending in the message", status, err)
				}
			}
		})
	}
}

// TestAttackTokenEchoedIntoErrorIsRedacted: a forge (or a proxy in
// front of it) that echoes the request's credentials into its error
// answer — in message, errors, nested objects, or a huge message — never
// gets the token into the error string.
func TestAttackTokenEchoedIntoErrorIsRedacted(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.kind), func(t *testing.T) {
			fg := fakeforge.New(t, string(d.kind))
			f := forge.Forge{Kind: d.kind, API: fg.URL()}
			echo := func(shape func(creds string) any) fakeforge.Answer {
				return fakeforge.Answer{Handler: func(w http.ResponseWriter, r *http.Request) {
					creds := r.Header.Get("Authorization") + " " + r.Header.Get("Private-Token")
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusUnauthorized)
					_ = json.NewEncoder(w).Encode(shape(creds))
				}}
			}
			fg.Queue(
				echo(func(c string) any { return map[string]any{"message": "bad credentials: " + c} }),
				echo(func(c string) any {
					return map[string]any{"message": "Validation Failed", "errors": []any{map[string]any{"message": c}, c}}
				}),
				echo(func(c string) any { return map[string]any{"message": map[string]any{"private_token": []string{c}}} }),
				echo(func(c string) any { return map[string]any{"error": c} }),
				echo(func(c string) any { return map[string]any{"message": strings.Repeat("x", 500) + c} }),
			)
			for i := range 5 {
				_, err := f.OpenPullRequest(context.Background(), fg.Token(), pr(d.repo))
				if err == nil {
					t.Fatalf("echo %d: no error", i)
				}
				// Failures show the token masked: test output never holds it.
				shown := strings.ReplaceAll(err.Error(), fg.Token(), "<TOKEN>")
				if strings.Contains(err.Error(), fg.Token()) {
					t.Errorf("echo %d: the error carries the token: %s", i, shown)
				}
				if i < 4 && !strings.Contains(err.Error(), "[redacted]") {
					t.Errorf("echo %d: error %q does not show the redaction", i, shown)
				}
				if len(err.Error()) > 700 {
					t.Errorf("echo %d: error is %d bytes, want it bounded", i, len(err.Error()))
				}
			}
		})
	}
}

// TestAttackRedirectToAnotherHostSendsNoToken: a forge answering 307 to
// another server (a different port on the same address: Go's client would
// keep Authorization there, and it never drops PRIVATE-TOKEN) must not
// get the token sent there: the second server sees no request at all.
// A redirect on the API's own host (GitHub's renamed repositories) is
// followed.
func TestAttackRedirectToAnotherHostSendsNoToken(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.kind), func(t *testing.T) {
			var mu sync.Mutex
			var seen []http.Header
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Clone())
				mu.Unlock()
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"html_url":"http://x/1","number":1,"web_url":"http://x/1","iid":1}`))
			}))
			defer other.Close()
			fg := fakeforge.New(t, string(d.kind))
			f := forge.Forge{Kind: d.kind, API: fg.URL()}
			for _, code := range []int{307, 308, 302} {
				fg.Queue(fakeforge.Answer{Handler: func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, other.URL+r.URL.Path, code)
				}})
				_, err := f.OpenPullRequest(context.Background(), fg.Token(), pr(d.repo))
				if err == nil || !strings.Contains(err.Error(), "redirected to another host") {
					t.Errorf("%d elsewhere: err = %v, want a refused redirect", code, err)
				}
				if err != nil && strings.Contains(err.Error(), fg.Token()) {
					t.Errorf("error carries the token")
				}
			}
			mu.Lock()
			if len(seen) != 0 {
				t.Errorf("the other host got %d requests (the first with Authorization: %t, PRIVATE-TOKEN: %t), want none",
					len(seen), seen[0].Get("Authorization") != "", seen[0].Get("Private-Token") != "")
			}
			mu.Unlock()

			// Same host: followed, and the request arrives as documented.
			fg.Queue(fakeforge.Answer{Handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, r.URL.EscapedPath(), http.StatusTemporaryRedirect)
			}})
			got, err := f.OpenPullRequest(context.Background(), fg.Token(), pr(d.repo))
			if err != nil || got.Number != 1 {
				t.Fatalf("same-host redirect: %+v, %v", got, err)
			}
			reqs := fg.Requests()
			if last := reqs[len(reqs)-1]; last.Problem != "" {
				t.Errorf("redirected request departs from the documented one: %s", last.Problem)
			}
		})
	}
}

// TestAttackRepoPathClimbsOutOfTheAPI: a repository path with "..",
// extra or empty segments, or escapes is refused before any request (it
// would otherwise reach another endpoint of the forge with the token).
func TestAttackRepoPathClimbsOutOfTheAPI(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.kind), func(t *testing.T) {
			fg := fakeforge.New(t, string(d.kind))
			f := forge.Forge{Kind: d.kind, API: fg.URL()}
			for _, repo := range []string{"octo/..", "../../admin", "octo/../../user/keys", "octo//x", "/octo/x", "octo/x%2f..", "octo/x?y=1", "octo/x#", "octo", ""} {
				_, err := f.OpenPullRequest(context.Background(), fg.Token(), pr(repo))
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "repo ") {
					t.Errorf("repo %q: err = %v, want an invalid argument naming the repo", repo, err)
				}
			}
			if n := len(fg.Requests()); n != 0 {
				t.Errorf("the forge got %d requests, want none", n)
			}
		})
	}
}

// TestBadPullRequestNamesTheField: each bad field is refused naming it,
// before any request.
func TestBadPullRequestNamesTheField(t *testing.T) {
	fg := fakeforge.New(t, "github")
	f := forge.Forge{Kind: forge.GitHub, API: fg.URL()}
	ok := pr("octo/hello")
	for _, tc := range []struct {
		name  string
		token string
		edit  func(*forge.PullRequest)
		want  string
	}{
		{"no title", "t", func(p *forge.PullRequest) { p.Title = " " }, "title must not be empty"},
		{"long title", "t", func(p *forge.PullRequest) { p.Title = strings.Repeat("t", 1025) }, "title is longer than 1024 bytes"},
		{"long body", "t", func(p *forge.PullRequest) { p.Body = strings.Repeat("b", 1<<20+1) }, "body is longer than 1048576 bytes"},
		{"no head", "t", func(p *forge.PullRequest) { p.Head = "" }, "head: the branch must not be empty"},
		{"bad base", "t", func(p *forge.PullRequest) { p.Base = "main..x" }, `base: "main..x" is not a branch name`},
		{"option head", "t", func(p *forge.PullRequest) { p.Head = "--force" }, `head: "--force" is not a branch name`},
		{"same", "t", func(p *forge.PullRequest) { p.Base = p.Head }, `head and base are the same branch "remote/fix"`},
		{"no token", "", func(*forge.PullRequest) {}, "no token for the forge"},
		{"token with a line break", "abc\r\nX-Evil: 1", func(*forge.PullRequest) {}, "the forge token contains a space or control character"},
	} {
		p := ok
		tc.edit(&p)
		_, err := f.OpenPullRequest(context.Background(), tc.token, p)
		if !errdefs.IsInvalidArgument(err) || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want invalid argument %q", tc.name, err, tc.want)
		}
	}
	for _, bad := range []forge.Forge{{Kind: "bitbucket", API: fg.URL()}, {Kind: forge.GitHub, API: "/relative"}, {Kind: forge.GitHub, API: "https://u:p@x"}} {
		if _, err := bad.OpenPullRequest(context.Background(), "t", ok); !errdefs.IsInvalidArgument(err) {
			t.Errorf("forge %+v: err = %v, want invalid argument", bad, err)
		}
	}
	if n := len(fg.Requests()); n != 0 {
		t.Errorf("the forge got %d requests, want none", n)
	}
}

// TestAnswersThatAreNotTheDocumentedOne: a success answer without a page,
// with a javascript: page, with the token in the page, too large, or not
// JSON is an error, never a result; an unreachable forge is Unavailable.
func TestAnswersThatAreNotTheDocumentedOne(t *testing.T) {
	fg := fakeforge.New(t, "github")
	f := forge.Forge{Kind: forge.GitHub, API: fg.URL()}
	answer := func(status int, body string) fakeforge.Answer {
		return fakeforge.Answer{Handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}}
	}
	tok := fg.Token()
	for _, tc := range []struct {
		a    fakeforge.Answer
		want string
	}{
		{answer(201, `{"number":3}`), "the 201 answer has no absolute http(s) html_url"},
		{answer(201, `{"html_url":"javascript:alert(1)","number":3}`), "the 201 answer has no absolute http(s) html_url"},
		{answer(201, `{"html_url":"https://x/pull/3?t=`+tok+`","number":3}`), "the 201 answer's html_url carries the token; refused"},
		{answer(201, `{"html_url":"https://x/pull/3","number":0}`), "the 201 answer has no positive number"},
		{answer(201, `<html>`), "the 201 answer is not a JSON object"},
		{answer(201, `{"html_url":"`+strings.Repeat("a", 2<<20)+`"}`), "the 201 answer is larger than 1048576 bytes"},
		{answer(502, `<html>Bad gateway `+tok+`</html>`), "answered 502 Bad Gateway"},
	} {
		fg.Queue(tc.a)
		_, err := f.OpenPullRequest(context.Background(), tok, pr("octo/hello"))
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) || strings.Contains(err.Error(), tok) {
			shown := "<nil>"
			if err != nil {
				shown = strings.ReplaceAll(err.Error(), tok, "<TOKEN>")
			}
			t.Errorf("err = %s, want it to end in %q", shown, tc.want)
		}
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	_, err := forge.Forge{Kind: forge.Gitea, API: dead.URL + "/api/v1"}.OpenPullRequest(context.Background(), tok, pr("octo/hello"))
	if !errdefs.IsUnavailable(err) || !strings.HasPrefix(err.Error(), "forge gitea ("+strings.TrimPrefix(dead.URL, "http://")+"): request failed: ") {
		t.Errorf("dead forge: %v, want Unavailable naming the forge", err)
	}
}
