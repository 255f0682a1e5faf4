package daemon

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
	"remote/internal/testkit"
	"remote/providers"
)

// TestAttackRootByName: "root" is a name a browser user may have. A
// frontend (nobody, listed in frontend_uids) naming "root", and root
// itself relaying a browser user through the frontend mark (remote-web
// running as root), see only the usage and runs of the user called root;
// root acting as itself (remotectl as root) sees everyone's.
func TestAttackRootByName(t *testing.T) {
	release := make(chan struct{})
	claude := &fakeProvider{id: "claude", run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		if strings.HasSuffix(req.Prompt, "wait") {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		emit(providers.Event{Type: providers.EventRunCompleted, Usage: json.RawMessage(`{"inputTokens":10,"outputTokens":5,"totalTokens":15}`)})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{claude}, func(o *Options) {
		o.Access = Access{Frontends: []int{65534}}
	})
	t.Cleanup(func() { close(release) })
	run := asNobody(t, ts)
	for _, user := range []string{"alice", "root"} {
		c := ts.createChat(user, "claude")
		for _, text := range []string{"done", "wait"} {
			if st, body := ts.do("POST", "/v1/chats/"+c.ID+"/prompt", user, api.PromptRequest{Text: text}); st != http.StatusAccepted {
				t.Fatalf("prompt %s: %d %s", user, st, body)
			}
			if text == "done" {
				ts.waitIdle(c.ID)
			}
		}
	}
	owners := func(body string, field string) []string {
		t.Helper()
		var out []string
		if field == "runs" {
			var runs []api.Run
			if err := json.Unmarshal([]byte(body), &runs); err != nil {
				t.Fatalf("runs %s: %v", body, err)
			}
			for _, r := range runs {
				out = append(out, r.Owner)
			}
			return out
		}
		var u api.UsageResponse
		if err := json.Unmarshal([]byte(body), &u); err != nil {
			t.Fatalf("usage %s: %v", body, err)
		}
		for _, r := range u.Rows {
			out = append(out, r.Key)
		}
		return out
	}
	// Both runs in flight, as root acting as itself sees them.
	testkit.Eventually(t, 10*time.Second, func() error {
		_, body := ts.do("GET", "/v1/runs", "root", nil)
		if got := strings.Join(owners(string(body), "runs"), ","); got != "alice,root" && got != "root,alice" {
			return fmt.Errorf("runs %s", body)
		}
		return nil
	}, "root acting as itself sees alice's and root's runs")
	if _, body := ts.do("GET", "/v1/usage?by=user", "root", nil); strings.Join(owners(string(body), "usage"), ",") != "alice,root" {
		t.Fatalf("root acting as itself: usage %s, want alice's and root's rows", body)
	}

	// The attack: a browser user called root, through a frontend.
	got := run(
		peerRequest{Method: "GET", Path: "/v1/usage?by=user", User: "root", Frontend: true},
		peerRequest{Method: "GET", Path: "/v1/runs", User: "root", Frontend: true},
		peerRequest{Method: "GET", Path: "/v1/usage?by=user", User: "root"},
		peerRequest{Method: "GET", Path: "/v1/runs", User: "root"},
	)
	for i, field := range []string{"usage", "runs", "usage", "runs"} {
		if got[i].Status != http.StatusOK || strings.Join(owners(got[i].Body, field), ",") != "root" {
			t.Errorf("frontend (uid 65534) naming root, %s: %d %s, want only root's own", field, got[i].Status, got[i].Body)
		}
	}
	// remote-web running as root relays its browser user "root".
	for _, field := range []string{"usage", "runs"} {
		path := "/v1/runs"
		if field == "usage" {
			path = "/v1/usage?by=user"
		}
		req, _ := http.NewRequest("GET", "http://remoted"+path, nil)
		req.Header.Set(api.HeaderUser, "root")
		req.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Join(owners(string(body), field), ",") != "root" {
			t.Errorf("uid 0 relaying browser user root, %s: %d %s, want only root's own", field, resp.StatusCode, body)
		}
	}
}
