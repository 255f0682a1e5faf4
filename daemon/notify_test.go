package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/webhook"
	"remote/internal/testkit"
	"remote/providers"
)

// receiver is a local webhook receiver that records what it was sent.
type receiver struct {
	mu     sync.Mutex
	got    []map[string]any
	header []http.Header
	arrive chan struct{}
}

func newReceiver(t *testing.T, fail int) (*receiver, *httptest.Server) {
	rc := &receiver{arrive: make(chan struct{}, 64)}
	failures := fail
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if failures > 0 {
			failures--
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		var m map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("webhook body %q: %v", body, err)
		}
		rc.got = append(rc.got, m)
		rc.header = append(rc.header, r.Header.Clone())
		rc.arrive <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *receiver) wait(t *testing.T, n int) []map[string]any {
	t.Helper()
	for range n {
		select {
		case <-rc.arrive:
		case <-time.After(60 * time.Second):
			t.Fatalf("webhook: fewer than %d notifications arrived", n)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// TestNotifyWebhook: approval waiting, run completed and run failed reach a
// local receiver as docs/api.md's JSON, with the configured headers, retried
// after failures; no agent text beyond the chat's title is sent.
func TestNotifyWebhook(t *testing.T) {
	rc, hook := newReceiver(t, 2) // the first two POSTs fail: retried
	p := &fakeProvider{id: "codex", run: func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		emit(providers.Event{Type: providers.EventAssistantDelta, Text: "AGENT-SECRET-TEXT", MessageID: "m"})
		if req.Prompt == "fail" || strings.HasSuffix(req.Prompt, "fail") {
			emit(providers.Event{Type: providers.EventRunFailed, Message: "model refused"})
			return providers.ErrRunFailed
		}
		emit(providers.Event{Type: providers.EventInteractionRequest, InteractionID: "7", ToolName: "item/commandExecution/requestApproval", Input: json.RawMessage(`{"command":"rm -rf AGENT-SECRET-TEXT"}`)})
		select {
		case <-req.InteractionResponses:
		case <-ctx.Done():
		}
		emit(providers.Event{Type: providers.EventRunCompleted})
		return nil
	}}
	ts := newTestServer(t, []providers.Provider{p}, func(o *Options) {
		o.Notify = webhook.NotifierOptions{URL: hook.URL + "/hook", Headers: map[string]string{"Authorization": "Bearer hook-token"}, Backoff: 10 * time.Millisecond}
	})
	chat := ts.createChat("alice", "codex")
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "deploy it"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	got := rc.wait(t, 1)
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/interactions", "alice", api.InteractionRequest{InteractionID: "7", Result: json.RawMessage(`{"decision":"accept"}`)}); st != http.StatusAccepted {
		t.Fatalf("answer: %d %s", st, body)
	}
	ts.waitIdle(chat.ID)
	if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "fail"}); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, body)
	}
	ts.waitIdle(chat.ID)
	got = append(got[:0], rc.wait(t, 2)...)
	var events []string
	for _, m := range got {
		events = append(events, m["event"].(string))
		if m["chatId"] != chat.ID || m["title"] != "deploy it" || m["owner"] != "alice" {
			t.Errorf("notification %v: want chatId %s, title %q, owner alice", m, chat.ID, "deploy it")
		}
		if _, err := time.Parse(time.RFC3339Nano, m["at"].(string)); err != nil || m["seq"].(float64) < 1 {
			t.Errorf("notification %v: bad at or seq", m)
		}
		raw, _ := json.Marshal(m)
		if bytes.Contains(raw, []byte("AGENT-SECRET-TEXT")) {
			t.Errorf("notification carries agent text: %s", raw)
		}
	}
	if !slices.Equal(events, []string{"approval_waiting", "run_completed", "run_failed"}) {
		t.Fatalf("events %v", events)
	}
	if h := rc.header[0]; h.Get("Authorization") != "Bearer hook-token" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
}

// TestNotifyDeadReceiverNeverSlowsRuns: a receiver that never answers
// holds no run back, and a full queue drops notifications with a log line
// that shows neither the header's secret nor the URL's token.
func TestNotifyDeadReceiverNeverSlowsRuns(t *testing.T) {
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hook.Close()
	defer close(release)
	var logBuf syncBuffer
	ts := newTestServer(t, []providers.Provider{&fakeProvider{id: "claude"}}, func(o *Options) {
		o.Notify = webhook.NotifierOptions{URL: hook.URL + "/?token=url-secret", Headers: map[string]string{"X-Key": "header-secret"},
			QueueLen: 2, Attempts: 1, Client: &http.Client{Timeout: 200 * time.Millisecond},
			Logger: hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Debug})}
	})
	chat := ts.createChat("alice", "claude")
	for range 10 {
		if st, body := ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "go"}); st != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", st, body)
		}
		ts.waitIdle(chat.ID) // each run ends though the receiver hangs
	}
	if n := len(ts.events(chat.ID)); n != 30 {
		t.Fatalf("%d events stored, want 30", n)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(logBuf.String(), "notification not delivered") },
		"a delivery failure logged")
	logs := logBuf.String()
	if !strings.Contains(logs, "notification dropped: queue full") {
		t.Errorf("a full queue was not logged: %s", logs)
	}
	for _, secret := range []string{"url-secret", "header-secret"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log shows %q: %s", secret, logs)
		}
	}
}
