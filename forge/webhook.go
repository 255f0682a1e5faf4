package forge

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// ErrBadSignature is the class of VerifyWebhook's refusals: a missing or
// wrong signature or token (errors.Is finds it).
var ErrBadSignature = errors.New("webhook signature")

// sigError names what was wrong with a delivery's signature, never the
// secret or the expected value.
type sigError struct{ msg string }

func (e *sigError) Error() string        { return e.msg }
func (e *sigError) Is(target error) bool { return target == ErrBadSignature }

// Unauthenticated marks the refusal (errdefs.IsUnauthenticated).
func (e *sigError) Unauthenticated() bool { return true }

func badSig(msg string) error { return &sigError{msg: msg} }

func hmacHex(secret string, b []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(b)
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

// VerifyWebhook checks a delivery of kind's webhooks with the shared
// secret, each forge's own documented scheme, and returns the delivery's
// id (the header each forge sends it in):
//   - GitHub: X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>, id in
//     X-GitHub-Delivery (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries);
//   - GitLab: X-Gitlab-Token: <secret>, compared in constant time, id in
//     X-Gitlab-Event-UUID (https://docs.gitlab.com/user/project/integrations/webhooks/);
//   - Gitea/Forgejo: X-Gitea-Signature: <hex HMAC-SHA256 of the body>, id in
//     X-Gitea-Delivery (https://docs.gitea.com/usage/webhooks).
//
// An empty secret verifies nothing. The error never holds the secret nor
// the signature expected.
func VerifyWebhook(kind Kind, secret string, h http.Header, body []byte) (string, error) {
	if secret == "" {
		return "", badSig("no webhook secret is set for the project")
	}
	var delivery string
	switch kind {
	case GitHub:
		got, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
		if !ok || got == "" {
			return "", badSig("X-Hub-Signature-256 is missing or not sha256=<hex>")
		}
		if !hmac.Equal([]byte(strings.ToLower(got)), hmacHex(secret, body)) {
			return "", badSig("X-Hub-Signature-256 does not match the body")
		}
		delivery = h.Get("X-GitHub-Delivery")
	case GitLab:
		got := h.Get("X-Gitlab-Token")
		if got == "" {
			return "", badSig("X-Gitlab-Token is missing")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
			return "", badSig("X-Gitlab-Token is not the project's webhook secret")
		}
		delivery = h.Get("X-Gitlab-Event-UUID")
	case Gitea:
		got := h.Get("X-Gitea-Signature")
		if got == "" {
			got = h.Get("X-Forgejo-Signature")
		}
		if got == "" {
			return "", badSig("X-Gitea-Signature is missing")
		}
		if !hmac.Equal([]byte(strings.ToLower(got)), hmacHex(secret, body)) {
			return "", badSig("X-Gitea-Signature does not match the body")
		}
		delivery = h.Get("X-Gitea-Delivery")
		if delivery == "" {
			delivery = h.Get("X-Forgejo-Delivery")
		}
	default:
		return "", invalid("forge kind %q is not one of github, gitlab, gitea", kind)
	}
	if delivery == "" || len(delivery) > 128 {
		return "", invalid("%s: the delivery id header is missing or longer than 128 bytes", kind)
	}
	return delivery, nil
}

// SignWebhook is the GitHub and Gitea signature of body with secret
// (lower-case hex HMAC-SHA256), for tests and stand-ins.
func SignWebhook(secret string, body []byte) string { return string(hmacHex(secret, body)) }

// Event is a webhook delivery's meaning, the same for the three forges:
// an issue opened or labeled, or a comment on an issue or pull request.
type Event struct {
	// Type is "issue" or "comment"; "" for an event Remote does not act on.
	Type string
	// Action is the forge's ("opened", "labeled", "created"; GitLab's "open").
	Action string
	// Repo is the repository's path on the forge (full_name,
	// path_with_namespace); CloneURL its http(s) clone URL.
	Repo, CloneURL string
	// Issue is the issue's (or pull request's) number (GitLab's iid).
	Issue       int
	Title, Body string
	// Labels are the issue's labels; Label the one just added (GitHub's
	// "labeled", GitLab's update adding one label), "" otherwise (Gitea
	// sends the whole set).
	Labels []string
	Label  string
	// Comment is a comment's text; PullRequest says it is on a pull request.
	Comment     string
	PullRequest bool
	// Sender is the forge user who acted (login, GitLab's username).
	Sender string
}

// ParseEvent reads a verified delivery of kind: the event header
// (X-GitHub-Event, X-Gitlab-Event, X-Gitea-Event) and the JSON body in
// the forge's documented shape. An event Remote does not act on has Type
// "".
func ParseEvent(kind Kind, h http.Header, body []byte) (Event, error) {
	switch kind {
	case GitHub, Gitea:
		return parseHub(kind, h, body)
	case GitLab:
		return parseGitLab(h, body)
	}
	return Event{}, invalid("forge kind %q is not one of github, gitlab, gitea", kind)
}

type hubLabel struct {
	Name string `json:"name"`
}
type hubUser struct {
	Login string `json:"login"`
}

func parseHub(kind Kind, h http.Header, body []byte) (Event, error) {
	name := h.Get("X-GitHub-Event")
	if kind == Gitea {
		name = h.Get("X-Gitea-Event")
		if name == "" {
			name = h.Get("X-Forgejo-Event")
		}
	}
	var p struct {
		Action string `json:"action"`
		Issue  struct {
			Number      int             `json:"number"`
			Title       string          `json:"title"`
			Body        string          `json:"body"`
			Labels      []hubLabel      `json:"labels"`
			PullRequest json.RawMessage `json:"pull_request"`
		} `json:"issue"`
		Label   *hubLabel `json:"label"`
		Comment struct {
			Body string  `json:"body"`
			User hubUser `json:"user"`
		} `json:"comment"`
		IsPull     bool `json:"is_pull"` // Gitea's issue_comment
		Repository struct {
			FullName string `json:"full_name"`
			CloneURL string `json:"clone_url"`
		} `json:"repository"`
		Sender hubUser `json:"sender"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, invalid("%s: the %q payload is not the documented JSON object", kind, name)
	}
	ev := Event{Action: p.Action, Repo: p.Repository.FullName, CloneURL: p.Repository.CloneURL, Issue: p.Issue.Number,
		Title: p.Issue.Title, Body: p.Issue.Body, Sender: p.Sender.Login}
	for _, l := range p.Issue.Labels {
		ev.Labels = append(ev.Labels, l.Name)
	}
	if p.Label != nil {
		ev.Label = p.Label.Name
	}
	switch name {
	case "issues":
		ev.Type = "issue"
		if kind == Gitea && p.Action == "label_updated" {
			ev.Action = "labeled" // Gitea sends the whole label set
		}
	case "issue_comment":
		ev.Type = "comment"
		ev.Comment = p.Comment.Body
		ev.PullRequest = len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null" || p.IsPull
		if p.Comment.User.Login != "" {
			ev.Sender = p.Comment.User.Login
		}
	}
	return ev, nil
}

func parseGitLab(h http.Header, body []byte) (Event, error) {
	var p struct {
		ObjectKind string `json:"object_kind"`
		User       struct {
			Username string `json:"username"`
		} `json:"user"`
		Project struct {
			Path       string `json:"path_with_namespace"`
			GitHTTPURL string `json:"git_http_url"`
		} `json:"project"`
		Attrs struct {
			IID          int    `json:"iid"`
			Title        string `json:"title"`
			Description  string `json:"description"`
			Action       string `json:"action"`
			Note         string `json:"note"`
			NoteableType string `json:"noteable_type"`
		} `json:"object_attributes"`
		Labels []struct {
			Title string `json:"title"`
		} `json:"labels"`
		Changes struct {
			Labels *struct {
				Previous []struct {
					Title string `json:"title"`
				} `json:"previous"`
			} `json:"labels"`
		} `json:"changes"`
		Issue struct {
			IID         int    `json:"iid"`
			Title       string `json:"title"`
			Description string `json:"description"`
		} `json:"issue"`
		MergeRequest struct {
			IID int `json:"iid"`
		} `json:"merge_request"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, invalid("gitlab: the %q payload is not the documented JSON object", h.Get("X-Gitlab-Event"))
	}
	ev := Event{Repo: p.Project.Path, CloneURL: p.Project.GitHTTPURL, Sender: p.User.Username, Action: p.Attrs.Action}
	switch p.ObjectKind {
	case "issue":
		ev.Type, ev.Issue, ev.Title, ev.Body = "issue", p.Attrs.IID, p.Attrs.Title, p.Attrs.Description
		for _, l := range p.Labels {
			ev.Labels = append(ev.Labels, l.Title)
		}
		switch {
		case p.Attrs.Action == "open":
			ev.Action = "opened"
		case p.Attrs.Action == "update" && p.Changes.Labels != nil:
			ev.Action = "labeled"
			prev := map[string]bool{}
			for _, l := range p.Changes.Labels.Previous {
				prev[l.Title] = true
			}
			var added []string
			for _, l := range ev.Labels {
				if !prev[l] {
					added = append(added, l)
				}
			}
			if len(added) == 1 {
				ev.Label = added[0] // the label this update added; several: "" (Labels says which are set)
			}
		}
	case "note":
		ev.Type, ev.Comment = "comment", p.Attrs.Note
		switch p.Attrs.NoteableType {
		case "Issue":
			ev.Issue, ev.Title, ev.Body = p.Issue.IID, p.Issue.Title, p.Issue.Description
		case "MergeRequest":
			ev.Issue, ev.PullRequest = p.MergeRequest.IID, true
		default:
			ev.Type = ""
		}
		ev.Action = "created"
	}
	return ev, nil
}
