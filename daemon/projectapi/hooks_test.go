package projectapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/config"
	"remote/daemon/repoapi"
	"remote/forge"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeforge"
)

// hooksFor is cmd/remoted's adapter of package forge to the webhook
// intake (cmd/remoted's HookForge).
func hooksFor(forges map[string]config.Forge) func(repoURL string) (repoapi.HookForge, error) {
	return func(repoURL string) (repoapi.HookForge, error) {
		f, repo, err := forge.ForRepo(forges, repoURL)
		if err != nil {
			return nil, err
		}
		return hookForge{f: f, path: repo}, nil
	}
}

type hookForge struct {
	f    forge.Forge
	path string
}

func (h hookForge) Kind() string { return string(h.f.Kind) }
func (h hookForge) Repo() string { return h.path }
func (h hookForge) Verify(secret string, hd http.Header, body []byte) (string, error) {
	return forge.VerifyWebhook(h.f.Kind, secret, hd, body)
}
func (h hookForge) Parse(hd http.Header, body []byte) (repoapi.ForgeEvent, error) {
	ev, err := forge.ParseEvent(h.f.Kind, hd, body)
	return repoapi.ForgeEvent(ev), err
}
func (h hookForge) Comment(ctx context.Context, token string, issue int, body string) (string, error) {
	return h.f.Comment(ctx, token, h.path, issue, body)
}
func (h hookForge) CanWrite(ctx context.Context, token, user string) (bool, error) {
	return h.f.CanWrite(ctx, token, h.path, user)
}
func (h hookForge) OpenPullRequest(ctx context.Context, token string, pr repoapi.PullRequest) (string, int, error) {
	res, err := h.f.OpenPullRequest(ctx, token, forge.PullRequest{Repo: h.path, Head: pr.Head, Base: pr.Base, Title: pr.Title, Body: pr.Body, Draft: pr.Draft})
	return res.URL, res.Number, err
}

const (
	hookToken  = "tok_5e4d3c2b1a09f8e7d6c5b4a3"
	hookSecret = "whsec_0a1b2c3d4e5f60718293a4b5"
)

// hookProject is alice's project on e's git server's acme/calc with the
// token and the webhook secret set.
func (e *repoEnv) hookProject(t *testing.T, repo api.ProjectRepo) (api.Project, string) {
	t.Helper()
	url := e.git.NewRepo(t, "acme/calc", map[string]string{"calc.py": calcPy, "test_calc.py": testCalcPy})
	repo.URL, repo.TokenSecret, repo.WebhookSecret = url, "GIT_TOKEN", "HOOK_SECRET"
	proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("hook"), Image: devImage, Repo: &repo})
	for k, v := range map[string]string{"GIT_TOKEN": hookToken, "HOOK_SECRET": hookSecret} {
		if status, body := e.call(t, "PUT", "/v1/projects/"+proj.Name+"/secrets/"+k, "alice", api.PutSecretRequest{Value: v}); status != http.StatusNoContent && status != http.StatusOK {
			t.Fatalf("put secret %s: %d %s", k, status, body)
		}
	}
	return proj, url
}

// deliver posts a forge delivery to the daemon's route as remote-web
// relays it.
func (e *repoEnv) deliver(t *testing.T, project, kind string, d fakeforge.Delivery) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://remoted/v1/projects/"+project+"/forge-events?forge="+kind, strings.NewReader(string(d.Body)))
	req.Header = d.Header.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// projectChats lists the chats of project.
func (e *repoEnv) projectChats(t *testing.T, project string) []api.Chat {
	t.Helper()
	chats, err := e.st.Chats()
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Chat
	for _, c := range chats {
		if c.Project == project {
			out = append(out, c)
		}
	}
	return out
}

func requestsTo(fg *fakeforge.Server, method, suffix string) []fakeforge.Request {
	var out []fakeforge.Request
	for _, r := range fg.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// TestForgeIssueBecomesPullRequest: the GitHub stand-in's documented
// "issues" delivery (opened with the trigger label, by a user with write
// access, signed with X-Hub-Signature-256) makes a chat in the project
// on branch remote/issue-7 whose first prompt is the issue; the issue
// gets a comment naming the chat; the turn's change is pushed to
// remote/issue-7, a draft pull request saying "Fixes #7" is opened, and
// its link is commented on the issue. The same delivery again (a
// replay) creates nothing. A comment with @remote starts the next turn
// (pushed to the branch); its replay starts none. A comment with the
// phrase on the pull request starts the next.
func TestForgeIssueBecomesPullRequest(t *testing.T) {
	e := newRepoEnv(t, hookToken)
	proj, url := e.hookProject(t, api.ProjectRepo{})
	e.forge.SetPermission("carol", "write")
	d := fakeforge.IssueDelivery("github", hookSecret, fakeforge.Issue{Repo: "acme/calc", CloneURL: url, Number: 7,
		Title: "add subtracts", Body: "test_add fails.\nsed -i 's/a - b/a + b/' calc.py && echo FIXED", Labels: []string{"bug", "remote"}, Sender: "carol"})
	status, body := e.deliver(t, proj.Name, "github", d)
	if status != http.StatusAccepted {
		t.Fatalf("delivery: %d %s", status, body)
	}
	var ans struct{ Status, Chat string }
	if err := json.Unmarshal(body, &ans); err != nil || ans.Status != "accepted" || ans.Chat == "" {
		t.Fatalf("delivery answer %s", body)
	}
	chats := e.projectChats(t, proj.Name)
	if len(chats) != 1 || chats[0].ID != ans.Chat || chats[0].Branch != "remote/issue-7" || chats[0].Owner != "alice" || !chats[0].Worktree {
		t.Fatalf("chats = %+v", chats)
	}
	chat := chats[0]
	// The replay: 200, nothing more.
	if status, body := e.deliver(t, proj.Name, "github", d); status != http.StatusOK || !strings.Contains(string(body), `"duplicate"`) {
		t.Errorf("replayed delivery: %d %s", status, body)
	}
	testkit.Eventually(t, 3*time.Minute, func() bool {
		return len(requestsTo(e.forge, "POST", "/issues/7/comments")) >= 2
	}, "the pull request's link on the issue")
	if n := len(e.projectChats(t, proj.Name)); n != 1 {
		t.Errorf("%d chats after the replay", n)
	}
	evs := e.events(chat.ID)
	user, _ := eventOf(evs, api.EventUser, "")
	if !strings.HasPrefix(user.Text, "Issue #7: add subtracts\n\ntest_add fails.") {
		t.Errorf("first prompt = %q", user.Text)
	}
	comments := requestsTo(e.forge, "POST", "/repos/acme/calc/issues/7/comments")
	for _, c := range comments {
		if c.Problem != "" {
			t.Errorf("comment request: %s", c.Problem)
		}
	}
	if b, _ := comments[0].Fields["body"].(string); !strings.Contains(b, chat.ID) {
		t.Errorf("first comment %q does not name chat %s", b, chat.ID)
	}
	prs := requestsTo(e.forge, "POST", "/repos/acme/calc/pulls")
	if len(prs) != 1 || prs[0].Problem != "" {
		t.Fatalf("pull requests: %+v", prs)
	}
	if f := prs[0].Fields; f["head"] != "remote/issue-7" || f["base"] != "main" || f["draft"] != true || !strings.Contains(fmt.Sprint(f["body"]), "Fixes #7") {
		t.Errorf("pull request fields = %v", f)
	}
	prURL := "http://" + e.forge.Host() + "/acme/calc/pull/1"
	if b, _ := comments[len(comments)-1].Fields["body"].(string); !strings.Contains(b, prURL) {
		t.Errorf("last comment %q has no link to %s", b, prURL)
	}
	if refs := e.git.LsRemote(t, "acme/calc"); !strings.Contains(refs, "refs/heads/remote/issue-7") {
		t.Errorf("ls-remote:\n%s", refs)
	}
	if got := e.git.Git(t, "acme/calc", "show", "remote/issue-7:calc.py"); !strings.Contains(got, "a + b") {
		t.Errorf("pushed calc.py = %q", got)
	}
	// A comment with the trigger phrase starts the next turn in the
	// issue's chat; its replay starts none. The turn's change is pushed
	// to the same branch (the pull request exists already).
	dc := fakeforge.IssueDelivery("github", hookSecret, fakeforge.Issue{Repo: "acme/calc", CloneURL: url, Number: 7, Title: "add subtracts",
		Body: "test_add fails.", Sender: "carol", Comment: "@remote add notes too\necho notes > notes.txt"})
	if status, body := e.deliver(t, proj.Name, "github", dc); status != http.StatusAccepted || !strings.Contains(string(body), chat.ID) {
		t.Fatalf("comment delivery: %d %s", status, body)
	}
	if status, body := e.deliver(t, proj.Name, "github", dc); status != http.StatusOK || !strings.Contains(string(body), `"duplicate"`) {
		t.Errorf("replayed comment: %d %s", status, body)
	}
	testkit.Eventually(t, 3*time.Minute, func() bool {
		return len(requestsTo(e.forge, "POST", "/issues/7/comments")) >= 3
	}, "the second turn's comment")
	users := 0
	for _, ev := range e.events(chat.ID) {
		if ev.Type == api.EventUser {
			users++
		}
	}
	if users != 2 {
		t.Errorf("%d turns in the chat, want 2 (the replayed comment started one)", users)
	}
	if got := e.git.Git(t, "acme/calc", "show", "remote/issue-7:notes.txt"); got != "notes" {
		t.Errorf("pushed notes.txt = %q", got)
	}
	if prs := requestsTo(e.forge, "POST", "/repos/acme/calc/pulls"); len(prs) != 1 {
		t.Errorf("%d pull requests", len(prs))
	}
	// A review comment with the phrase on the pull request the chat
	// opened is the chat's next prompt; on another pull request, nothing.
	onPR := fakeforge.Issue{Repo: "acme/calc", CloneURL: url, Number: 1, Title: "add subtracts (#7)", Sender: "carol",
		Comment: "@remote also a changelog\necho fixed > CHANGES", PullRequest: true}
	if status, body := e.deliver(t, proj.Name, "github", fakeforge.IssueDelivery("github", hookSecret, onPR)); status != http.StatusAccepted || !strings.Contains(string(body), chat.ID) {
		t.Fatalf("pull request comment: %d %s", status, body)
	}
	onPR.Number = 2
	if status, body := e.deliver(t, proj.Name, "github", fakeforge.IssueDelivery("github", hookSecret, onPR)); status != http.StatusOK || !strings.Contains(string(body), "ignored") {
		t.Errorf("another pull request's comment: %d %s", status, body)
	}
	testkit.Eventually(t, 3*time.Minute, func() bool {
		return len(requestsTo(e.forge, "POST", "/issues/7/comments")) >= 4
	}, "the third turn's comment")
	if got := e.git.Git(t, "acme/calc", "show", "remote/issue-7:CHANGES"); got != "fixed" {
		t.Errorf("pushed CHANGES = %q", got)
	}
	// The agent prints its environment into the chat (shellAgent): the
	// webhook secret, like the token, is not in it.
	if all, _ := json.Marshal(e.events(chat.ID)); strings.Contains(string(all), hookSecret) || strings.Contains(string(all), hookToken) {
		t.Error("a secret reached the agent's environment or the chat's events")
	}
	if strings.Contains(e.logs.String(), hookSecret) || strings.Contains(e.logs.String(), hookToken) {
		t.Error("a secret is in the daemon's log")
	}
}

// TestAttackForgeWebhook: deliveries that must create nothing — a forged
// signature (401), one signed with another secret (401), a replay of a
// verified delivery that was ignored, a sender without write access, a
// delivery naming another repository (403) — and GitLab's and Gitea's
// schemes at the route: their valid deliveries pass verification, forged
// ones are 401.
func TestAttackForgeWebhook(t *testing.T) {
	e := newRepoEnv(t, hookToken)
	proj, url := e.hookProject(t, api.ProjectRepo{})
	e.forge.SetPermission("carol", "write")
	e.forge.SetPermission("mallory", "read")
	issue := fakeforge.Issue{Repo: "acme/calc", CloneURL: url, Number: 3, Title: "t", Body: "echo hi", Labels: []string{"remote"}, Sender: "carol"}

	forged := fakeforge.IssueDelivery("github", "not-the-secret", issue)
	if status, body := e.deliver(t, proj.Name, "github", forged); status != http.StatusUnauthorized {
		t.Errorf("forged signature: %d %s", status, body)
	}
	tampered := fakeforge.IssueDelivery("github", hookSecret, issue)
	tampered.Body = []byte(strings.Replace(string(tampered.Body), `"number":3`, `"number":4`, 1))
	if status, body := e.deliver(t, proj.Name, "github", tampered); status != http.StatusUnauthorized {
		t.Errorf("tampered body: %d %s", status, body)
	}
	unsigned := fakeforge.IssueDelivery("github", hookSecret, issue)
	unsigned.Header.Del("X-Hub-Signature-256")
	if status, body := e.deliver(t, proj.Name, "github", unsigned); status != http.StatusUnauthorized {
		t.Errorf("unsigned: %d %s", status, body)
	}
	if !strings.Contains(e.logs.String(), "X-Hub-Signature-256 does not match the body") {
		t.Error("the refusal's reason is not logged")
	}

	// A sender without write access: ignored; the same delivery id again
	// after mallory gained access is a replay, still nothing.
	mal := issue
	mal.Sender = "mallory"
	dm := fakeforge.IssueDelivery("github", hookSecret, mal)
	if status, body := e.deliver(t, proj.Name, "github", dm); status != http.StatusOK || !strings.Contains(string(body), "may not trigger") {
		t.Errorf("mallory's issue: %d %s", status, body)
	}
	if status, body := e.deliver(t, proj.Name, "github", dm); status != http.StatusOK || !strings.Contains(string(body), "duplicate") {
		t.Errorf("replayed delivery: %d %s", status, body)
	}

	// Another repository's delivery, signed with this project's secret.
	other := issue
	other.Repo, other.CloneURL = "acme/other", strings.Replace(url, "acme/calc", "acme/other", 1)
	if status, body := e.deliver(t, proj.Name, "github", fakeforge.IssueDelivery("github", hookSecret, other)); status != http.StatusForbidden {
		t.Errorf("another repository: %d %s", status, body)
	}
	// Another project's forge kind.
	if status, body := e.deliver(t, proj.Name, "gitlab", fakeforge.IssueDelivery("gitlab", hookSecret, issue)); status != http.StatusBadRequest {
		t.Errorf("gitlab delivery to a github project: %d %s", status, body)
	}
	if n := len(e.projectChats(t, proj.Name)); n != 0 {
		t.Fatalf("%d chats were created", n)
	}
	if reqs := requestsTo(e.forge, "POST", "/comments"); len(reqs) != 0 {
		t.Errorf("the forge got comments: %d", len(reqs))
	}
}

// TestAttackForgeWebhookGitLabGitea: at the route, GitLab's
// X-Gitlab-Token and Gitea's X-Gitea-Signature: a delivery with the
// project's secret passes verification (an issue without the trigger
// label is then ignored: 200), a wrong token or signature, a changed body
// (Gitea) or a missing header is 401; nothing is created.
func TestAttackForgeWebhookGitLabGitea(t *testing.T) {
	for _, kind := range []string{"gitlab", "gitea"} {
		t.Run(kind, func(t *testing.T) {
			e := newForgeRepoEnv(t, hookToken, kind)
			proj, url := e.hookProject(t, api.ProjectRepo{})
			iss := fakeforge.Issue{Repo: "acme/calc", CloneURL: url, Number: 5, Title: "t", Body: "echo hi", Labels: []string{"bug"}, Sender: "carol"}
			if status, body := e.deliver(t, proj.Name, kind, fakeforge.IssueDelivery(kind, hookSecret, iss)); status != http.StatusOK || !strings.Contains(string(body), "no trigger") {
				t.Errorf("verified delivery without the label: %d %s", status, body)
			}
			if status, body := e.deliver(t, proj.Name, kind, fakeforge.IssueDelivery(kind, "not-the-secret", iss)); status != http.StatusUnauthorized {
				t.Errorf("wrong secret: %d %s", status, body)
			}
			sig := map[string]string{"gitlab": "X-Gitlab-Token", "gitea": "X-Gitea-Signature"}[kind]
			d := fakeforge.IssueDelivery(kind, hookSecret, iss)
			d.Header.Del(sig)
			if status, body := e.deliver(t, proj.Name, kind, d); status != http.StatusUnauthorized {
				t.Errorf("no %s: %d %s", sig, status, body)
			}
			if kind == "gitea" {
				d := fakeforge.IssueDelivery(kind, hookSecret, fakeforge.Issue{Repo: "acme/calc", CloneURL: url, Number: 5, Title: "t", Body: "echo hi", Sender: "carol"})
				d.Body = []byte(strings.Replace(string(d.Body), `"labels":[]`, `"labels":[{"name":"remote"}]`, 1))
				if status, body := e.deliver(t, proj.Name, kind, d); status != http.StatusUnauthorized {
					t.Errorf("changed body: %d %s", status, body)
				}
			}
			if n := len(e.projectChats(t, proj.Name)); n != 0 {
				t.Errorf("%d chats were created", n)
			}
		})
	}
}
