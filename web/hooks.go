package web

import (
	"bytes"
	"io"
	"net/http"
	"net/url"

	"remote/api"
	"remote/internal/lazyre"
)

// maxHookBody bounds a forge's webhook delivery (the daemon's bound too).
const maxHookBody = 1 << 20

// hookProjectRE is a project name (the daemon's rule).
var hookProjectRE = lazyre.New(`^[a-z0-9](?:[a-z0-9-]{0,54}[a-z0-9])?$`)

// hookHeaders are the forges' webhook headers, the only ones relayed.
var hookHeaders = []string{
	"Content-Type",
	"X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256",
	"X-Gitlab-Event", "X-Gitlab-Event-UUID", "X-Gitlab-Token",
	"X-Gitea-Event", "X-Gitea-Delivery", "X-Gitea-Signature",
	"X-Forgejo-Event", "X-Forgejo-Delivery", "X-Forgejo-Signature",
}

// serveHook relays POST /hooks/{forge}/{project}, a forge's webhook, to
// the daemon's POST /v1/projects/{project}/forge-events?forge=…: no
// session (the forge has none), the body bounded, only the forge's
// headers. The daemon verifies the delivery with the project's secret;
// nothing here knows it.
func (s *Server) serveHook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "a forge webhook is a POST")
		return
	}
	kind, project := r.PathValue("forge"), r.PathValue("project")
	switch kind {
	case "github", "gitlab", "gitea":
	default:
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such forge: want /hooks/github|gitlab|gitea/{project}")
		return
	}
	if !hookProjectRE.MatchString(project) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such project")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHookBody))
	if err != nil {
		s.log.Warn("forge webhook refused: body too large", "forge", kind, "project", project, "remote", s.clientAddr(r))
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "the delivery is larger than 1 MiB")
		return
	}
	out := r.Clone(r.Context())
	out.URL = &url.URL{Path: "/v1/projects/" + project + "/forge-events", RawQuery: "forge=" + kind}
	out.RequestURI = ""
	out.Header = http.Header{}
	for _, h := range hookHeaders {
		if v := r.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	s.proxy.ServeHTTP(w, out)
}
