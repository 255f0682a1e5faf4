package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"remote/api"
)

// TestAttackHookRelay: remote-web relays a forge's webhook without a
// session to the daemon's forge-events route of the project, with the
// forge's headers only: a cookie, an X-Remote-User or an Authorization the
// sender adds never reach the daemon, no user is named, and the relay is
// marked as the frontend's. A body over 1 MiB is 413 and reaches nothing;
// an unknown forge or a project name that is not one is 404.
func TestAttackHookRelay(t *testing.T) {
	h := newHarness(t, false)
	c := h.client(t)
	hdr := map[string]string{"Content-Type": "application/json", "X-GitHub-Event": "issues", "X-GitHub-Delivery": "d-1",
		"X-Hub-Signature-256": "sha256=abc", HeaderUser: "root", "Cookie": "s=stolen", "Authorization": "Bearer x", "X-Other": "y"}
	resp, b := do(t, c, "POST", h.srv.URL+"/hooks/github/calc", `{"action":"opened"}`, hdr)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("relay: %d %s", resp.StatusCode, b)
	}
	var got struct {
		Query  string
		Header http.Header
		Body   string
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Query != "forge=github" || got.Body != `{"action":"opened"}` || h.daemon.last(t).Path != "/v1/projects/calc/forge-events" {
		t.Errorf("daemon saw %s ?%s %q", h.daemon.last(t).Path, got.Query, got.Body)
	}
	for _, k := range []string{"X-Github-Event", "X-Github-Delivery", "X-Hub-Signature-256"} {
		if got.Header.Get(k) == "" {
			t.Errorf("header %s not relayed", k)
		}
	}
	for _, k := range []string{HeaderUser, "Cookie", "Authorization", "X-Other"} {
		if v := got.Header.Get(k); v != "" {
			t.Errorf("header %s reached the daemon: %q", k, v)
		}
	}
	if got.Header.Get(api.HeaderFrontend) != api.FrontendRemoteWeb {
		t.Errorf("frontend mark %q", got.Header.Get(api.HeaderFrontend))
	}
	n := h.daemon.count()
	if resp, b := do(t, c, "POST", h.srv.URL+"/hooks/github/calc", strings.Repeat("x", 1<<20+1), hdr); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized: %d %.200s", resp.StatusCode, b)
	}
	for _, p := range []string{"/hooks/bitbucket/calc", "/hooks/github/Calc_1", "/hooks/github/..%2Fx"} {
		if resp, b := do(t, c, "POST", h.srv.URL+p, "{}", hdr); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
	if h.daemon.count() != n {
		t.Errorf("refused deliveries reached the daemon")
	}
}
