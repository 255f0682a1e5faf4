package forge

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeAnswer feeds arbitrary answers of every dialect and status to
// decodeAnswer: it never panics, an error never carries the token and
// stays bounded, and a result is always an absolute http(s) URL without
// the token and a positive number.
func FuzzDecodeAnswer(f *testing.F) {
	const tok = "ghp_S3cretT0ken42"
	for _, seed := range []struct {
		kind   string
		status int
		body   string
	}{
		{"github", 201, `{"html_url":"https://github.com/o/r/pull/1","number":1}`},
		{"gitlab", 201, `{"web_url":"https://gitlab.com/g/r/-/merge_requests/2","iid":2}`},
		{"gitea", 201, `{"html_url":"https://gitea.example/o/r/pulls/3","number":3}`},
		{"github", 422, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:b."}]}`},
		{"github", 422, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}]}`},
		{"gitlab", 409, `{"message":["Another open merge request already exists for this source branch: !1"]}`},
		{"gitlab", 400, `{"message":{"title":["can't be blank"],"source_branch":["is invalid"]}}`},
		{"gitlab", 400, `{"error":"source_branch is missing"}`},
		{"gitea", 422, `{"message":"Invalid PullRequest: There are no changes between the head and the base","url":"https://gitea.example/api/swagger"}`},
		{"github", 401, `{"message":"Bearer ghp_S3cretT0ken42 is not valid"}`},
		{"gitlab", 401, `{"message":{"private_token":["ghp_S3cretT0ken42"]}}`},
		{"github", 201, `{"html_url":"https://x/ghp_S3cretT0ken42","number":1}`},
		{"github", 500, `<html>ghp_S3cretT0ken42</html>`},
		{"github", 401, `{"message":"ghp_S3cretT\u00b0ken ghp_S3cretT0ke` + "\x01" + `n"}`},
		{"gitea", 400, `{"message":[[[[[[[[[[["deep"]]]]]]]]]]]}`},
	} {
		f.Add(seed.kind, seed.status, []byte(seed.body), tok)
	}
	f.Fuzz(func(t *testing.T, kind string, status int, body []byte, token string) {
		if !tokenLike.MatchString(token) {
			return // real tokens; checkToken refuses spaces and control characters
		}
		r, err := decodeAnswer(Kind(kind), status, body, token)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, token) || len(msg) > 1024+len(kind) {
				t.Fatalf("error of %d bytes carries the token %q or is unbounded: %q", len(msg), token, msg)
			}
			var e *APIError
			if errors.As(err, &e) && (len(e.Message) > maxMessageBytes || !utf8.ValidString(e.Message)) {
				t.Fatalf("message is %d bytes or not UTF-8: %q", len(e.Message), e.Message)
			}
			return
		}
		u, perr := url.Parse(r.URL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || r.Number <= 0 || strings.Contains(r.URL, token) {
			t.Fatalf("result %+v from status %d body %q", r, status, body)
		}
		if status < 200 || status > 299 {
			t.Fatalf("status %d gave a result", status)
		}
	})
}

// tokenLike is what forge tokens look like (ghp_…, glpat-…, Gitea's hex),
// long enough that no fixed text of an error holds one by chance.
var tokenLike = regexp.MustCompile(`^[A-Za-z0-9_-]{16,256}$`)
