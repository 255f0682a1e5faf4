package projectapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"remote/api"
)

// TestAttackTerminalGET: a plain GET of a project's terminal (an <img src>
// in agent Markdown) is refused before anything happens: no container is
// created or started (real LXD).
func TestAttackTerminalGET(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{})
	name := uniqueProject("termget")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
	if _, _, err := e.lxd.Instance(context.Background(), p.Container); !errorsIsNotFound(err) {
		t.Fatalf("precondition: container %s exists right after create (%v); the test needs a lazily created one", p.Container, err)
	}
	for _, hdr := range []map[string]string{
		nil, // <img src>
		{"Accept": "image/avif,image/webp,*/*"},
		{"Connection": "Upgrade", "Upgrade": "websocket"}, // no key, no version
	} {
		req, _ := http.NewRequest("GET", "http://remoted/v1/projects/"+name+"/terminal", bytes.NewReader(nil))
		req.Header.Set(api.HeaderUser, "alice")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"bad_request"`) || !strings.Contains(string(body), "WebSocket endpoint") {
			t.Errorf("GET terminal with %v: %d %s; want 400 naming the WebSocket endpoint", hdr, resp.StatusCode, body)
		}
	}
	if _, _, err := e.lxd.Instance(context.Background(), p.Container); !errorsIsNotFound(err) {
		t.Fatalf("a plain GET created container %s (%v)", p.Container, err)
	}
}
