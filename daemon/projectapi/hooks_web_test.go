package projectapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeforge"
	"remote/web"
)

// viaWeb serves remote-web's handler in front of e's daemon socket and
// returns a function posting a forge delivery to its
// /hooks/{kind}/{project}, as the forge does (no session).
func (e *repoEnv) viaWeb(t *testing.T) func(kind, project string, d fakeforge.Delivery) (int, []byte) {
	t.Helper()
	w, err := web.New(web.Options{Socket: e.sock, SessionTTL: time.Hour, Logger: testkit.Logger(t, "remote-web")})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(w)
	t.Cleanup(hs.Close)
	return func(kind, project string, d fakeforge.Delivery) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/hooks/"+kind+"/"+project, bytes.NewReader(d.Body))
		req.Header = d.Header.Clone()
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
}

// TestAttackForgeWebhookViaRemoteWeb: GitLab's and Gitea's documented
// deliveries through the real remote-web (/hooks/{forge}/{project}) to
// the daemon: an issue labelled "remote" ("Issue Hook" with
// X-Gitlab-Token; "issues" with X-Gitea-Signature, the hex HMAC-SHA256
// of the body, and X-Gitea-Delivery) makes a chat in the project whose
// first prompt is the issue, and a comment naming it on the forge's
// issue; a comment with the trigger phrase ("Note Hook";
// "issue_comment") is the chat's next turn. A mis-signed delivery (a
// wrong token or signature, or a body changed after signing) is 401, a
// replayed one 200 "duplicate": neither creates a chat, a turn or a
// comment.
func TestAttackForgeWebhookViaRemoteWeb(t *testing.T) {
	for _, kind := range []string{"gitlab", "gitea"} {
		t.Run(kind, func(t *testing.T) {
			e := newForgeRepoEnv(t, hookToken, kind)
			proj, url := e.hookProject(t, api.ProjectRepo{})
			e.forge.SetPermission("carol", map[string]string{"gitlab": "30", "gitea": "write"}[kind])
			post := e.viaWeb(t)
			commentPath := map[string]string{"gitlab": "/issues/9/notes", "gitea": "/issues/9/comments"}[kind]
			comments := func() []fakeforge.Request { return requestsTo(e.forge, "POST", commentPath) }
			iss := fakeforge.Issue{Repo: "acme/calc", CloneURL: url, Number: 9, Title: "say hi", Body: "echo hi-from-" + kind,
				Labels: []string{"remote"}, Sender: "carol"}

			// Mis-signed first: nothing may come of them.
			forged := fakeforge.IssueDelivery(kind, "not-the-secret", iss)
			if status, body := post(kind, proj.Name, forged); status != http.StatusUnauthorized {
				t.Errorf("delivery with another secret: %d %s", status, body)
			}
			if kind == "gitea" {
				changed := fakeforge.IssueDelivery(kind, hookSecret, iss)
				changed.Body = bytes.Replace(changed.Body, []byte("echo hi-from-gitea"), []byte("echo owned"), 1)
				if status, body := post(kind, proj.Name, changed); status != http.StatusUnauthorized {
					t.Errorf("body changed after signing: %d %s", status, body)
				}
			}
			if n := len(e.projectChats(t, proj.Name)); n != 0 {
				t.Fatalf("mis-signed deliveries made %d chats", n)
			}

			d := fakeforge.IssueDelivery(kind, hookSecret, iss)
			status, body := post(kind, proj.Name, d)
			if status != http.StatusAccepted || !strings.Contains(string(body), `"accepted"`) {
				t.Fatalf("labelled issue: %d %s", status, body)
			}
			chats := e.projectChats(t, proj.Name)
			if len(chats) != 1 || chats[0].Branch != "remote/issue-9" || chats[0].Owner != "alice" || !strings.Contains(string(body), chats[0].ID) {
				t.Fatalf("chats %+v after %s", chats, body)
			}
			chat := chats[0]
			if status, body := post(kind, proj.Name, d); status != http.StatusOK || !strings.Contains(string(body), `"duplicate"`) {
				t.Errorf("replayed delivery: %d %s", status, body)
			}
			testkit.Eventually(t, 3*time.Minute, func() bool { return len(comments()) >= 1 }, "a comment on the %s issue", kind)
			first := comments()[0]
			if b, _ := first.Fields["body"].(string); first.Problem != "" || !strings.Contains(b, chat.ID) {
				t.Errorf("first comment %+v does not name chat %s", first, chat.ID)
			}
			user, _ := eventOf(e.events(chat.ID), api.EventUser, "")
			if !strings.HasPrefix(user.Text, "Issue #9: say hi") {
				t.Errorf("first prompt %q", user.Text)
			}

			// The comment with the trigger phrase: the next turn, once.
			users := func() int {
				n := 0
				for _, ev := range e.events(chat.ID) {
					if ev.Type == api.EventUser {
						n++
					}
				}
				return n
			}
			testkit.Eventually(t, 3*time.Minute, func() bool { return !e.hub.Running(chat.ID) }, "the first turn ends")
			note := iss
			note.Comment = "@remote once more\necho again-from-" + kind
			dc := fakeforge.IssueDelivery(kind, hookSecret, note)
			forgedNote := fakeforge.IssueDelivery(kind, "not-the-secret", note)
			if status, body := post(kind, proj.Name, forgedNote); status != http.StatusUnauthorized {
				t.Errorf("mis-signed comment: %d %s", status, body)
			}
			if status, body := post(kind, proj.Name, dc); status != http.StatusAccepted || !strings.Contains(string(body), chat.ID) {
				t.Fatalf("comment delivery: %d %s", status, body)
			}
			if status, body := post(kind, proj.Name, dc); status != http.StatusOK || !strings.Contains(string(body), `"duplicate"`) {
				t.Errorf("replayed comment: %d %s", status, body)
			}
			testkit.Eventually(t, 3*time.Minute, func() bool { return !e.hub.Running(chat.ID) && users() >= 2 }, "the comment's turn ends")
			if n := users(); n != 2 {
				t.Errorf("%d turns in the chat, want 2 (a replayed or mis-signed delivery started one)", n)
			}
			if n := len(e.projectChats(t, proj.Name)); n != 1 {
				t.Errorf("%d chats in the project, want 1", n)
			}
		})
	}
}
