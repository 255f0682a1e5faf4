package forge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"remote/forge"
	"remote/internal/errdefs"
	"remote/internal/testkit/fakeforge"
)

// TestAttackWebhookSignature: each forge's documented delivery, signed
// with the secret, verifies and yields its delivery id and meaning; the
// same delivery with another secret, a changed body, or without its
// signature header is refused (Unauthenticated, the reason named, the
// secret nowhere in the error).
func TestAttackWebhookSignature(t *testing.T) {
	const secret = "whsec_3f2e1d0c9b8a"
	iss := fakeforge.Issue{Repo: "acme/calc", CloneURL: "https://forge.example/acme/calc.git", Number: 12, Title: "T", Body: "B",
		Labels: []string{"remote"}, Sender: "carol"}
	sigHeader := map[forge.Kind]string{forge.GitHub: "X-Hub-Signature-256", forge.GitLab: "X-Gitlab-Token", forge.Gitea: "X-Gitea-Signature"}
	idHeader := map[forge.Kind]string{forge.GitHub: "X-GitHub-Delivery", forge.GitLab: "X-Gitlab-Event-UUID", forge.Gitea: "X-Gitea-Delivery"}
	for _, kind := range []forge.Kind{forge.GitHub, forge.GitLab, forge.Gitea} {
		t.Run(string(kind), func(t *testing.T) {
			d := fakeforge.IssueDelivery(string(kind), secret, iss)
			id, err := forge.VerifyWebhook(kind, secret, d.Header, d.Body)
			if err != nil || id == "" || id != d.Header.Get(idHeader[kind]) {
				t.Fatalf("valid delivery: id %q, %v", id, err)
			}
			ev, err := forge.ParseEvent(kind, d.Header, d.Body)
			if err != nil || ev.Type != "issue" || ev.Action != "opened" || ev.Repo != "acme/calc" || ev.Issue != 12 || ev.Sender != "carol" ||
				ev.Title != "T" || ev.Body != "B" || len(ev.Labels) != 1 || ev.Labels[0] != "remote" {
				t.Errorf("event = %+v, %v", ev, err)
			}
			lab := iss
			lab.Label = "remote"
			dl := fakeforge.IssueDelivery(string(kind), secret, lab)
			if ev, _ := forge.ParseEvent(kind, dl.Header, dl.Body); ev.Action != "labeled" || (kind != forge.Gitea && ev.Label != "remote") {
				t.Errorf("labeled event = %+v", ev)
			}
			com := iss
			com.Comment = "please @remote"
			dc := fakeforge.IssueDelivery(string(kind), secret, com)
			if ev, _ := forge.ParseEvent(kind, dc.Header, dc.Body); ev.Type != "comment" || ev.Comment != "please @remote" || ev.Issue != 12 || ev.Sender != "carol" {
				t.Errorf("comment event = %+v", ev)
			}
			com.PullRequest = true
			dp := fakeforge.IssueDelivery(string(kind), secret, com)
			if ev, _ := forge.ParseEvent(kind, dp.Header, dp.Body); ev.Type != "comment" || !ev.PullRequest || ev.Issue != 12 {
				t.Errorf("pull request comment event = %+v", ev)
			}

			for name, bad := range map[string]func() fakeforge.Delivery{
				"another secret": func() fakeforge.Delivery { return fakeforge.IssueDelivery(string(kind), "guess", iss) },
				"changed body": func() fakeforge.Delivery {
					d := fakeforge.IssueDelivery(string(kind), secret, iss)
					d.Body = []byte(strings.ReplaceAll(string(d.Body), `"carol"`, `"mallo"`))
					if kind == forge.GitLab { // its token does not cover the body: a changed body passes
						d.Header.Set("X-Gitlab-Token", secret+"x")
					}
					return d
				},
				"no signature": func() fakeforge.Delivery {
					d := fakeforge.IssueDelivery(string(kind), secret, iss)
					d.Header.Del(sigHeader[kind])
					return d
				},
			} {
				d := bad()
				_, err := forge.VerifyWebhook(kind, secret, d.Header, d.Body)
				if err == nil || !errdefs.IsUnauthenticated(err) || strings.Contains(err.Error(), secret) {
					t.Errorf("%s: %v", name, err)
				}
			}
			if _, err := forge.VerifyWebhook(kind, "", d.Header, d.Body); err == nil {
				t.Error("an empty secret verified a delivery")
			}
		})
	}
}

// TestCommentAndPermission: an issue comment and a user's write access,
// asked of each forge's stand-in exactly as documented.
func TestCommentAndPermission(t *testing.T) {
	for _, kind := range []string{"github", "gitlab", "gitea"} {
		t.Run(kind, func(t *testing.T) {
			fg := fakeforge.New(t, kind)
			f := forge.Forge{Kind: forge.Kind(kind), API: fg.URL()}
			ctx := context.Background()
			if _, err := f.Comment(ctx, fg.Token(), "acme/calc", 7, "hello"); err != nil {
				t.Fatal(err)
			}
			write, read := "write", "read"
			if kind == "gitlab" {
				write, read = "30", "20"
			}
			fg.SetPermission("carol", write)
			fg.SetPermission("mallory", read)
			for user, want := range map[string]bool{"carol": true, "mallory": false, "nobody": false} {
				if ok, err := f.CanWrite(ctx, fg.Token(), "acme/calc", user); err != nil || ok != want {
					t.Errorf("CanWrite(%s) = %v, %v; want %v", user, ok, err, want)
				}
			}
			if _, err := f.Comment(ctx, "wrong", "acme/calc", 7, "x"); err == nil {
				t.Error("a wrong token's comment succeeded")
			}
			for _, r := range fg.Requests() {
				if r.Problem != "" && r.Header.Get("Authorization") != "token wrong" && r.Header.Get("Authorization") != "Bearer wrong" && r.Header.Get("Private-Token") != "wrong" {
					t.Errorf("%s %s: %s", r.Method, r.Path, r.Problem)
				}
			}
			want := "/repos/acme/calc/issues/7/comments"
			switch kind {
			case "gitlab":
				want = "/api/v4/projects/acme%2Fcalc/issues/7/notes"
			case "gitea":
				want = "/api/v1" + want
			}
			if r := fg.Requests()[0]; r.Method != http.MethodPost || r.Path != want || r.Fields["body"] != "hello" {
				t.Errorf("comment request %s %s %v, want POST %s", r.Method, r.Path, r.Fields, want)
			}
		})
	}
}

// TestDraftPullRequest: a draft is GitHub's "draft": true, GitLab's
// "Draft: " title prefix, Gitea's "WIP: ".
func TestDraftPullRequest(t *testing.T) {
	for kind, check := range map[string]func(map[string]any) bool{
		"github": func(f map[string]any) bool { return f["draft"] == true && f["title"] == "Fix" },
		"gitlab": func(f map[string]any) bool { return f["title"] == "Draft: Fix" },
		"gitea":  func(f map[string]any) bool { return f["title"] == "WIP: Fix" },
	} {
		fg := fakeforge.New(t, kind)
		f := forge.Forge{Kind: forge.Kind(kind), API: fg.URL()}
		if _, err := f.OpenPullRequest(context.Background(), fg.Token(), forge.PullRequest{Repo: "acme/calc", Head: "remote/issue-1", Base: "main", Title: "Fix", Draft: true}); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if r := fg.Requests()[0]; r.Problem != "" || !check(r.Fields) {
			t.Errorf("%s: fields %v, problem %q", kind, r.Fields, r.Problem)
		}
	}
}
