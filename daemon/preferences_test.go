package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"remote/api"
	"remote/providers"
)

// TestChatPreferences: a chat's approvalPolicy and reasoningEffort are
// validated at create against the provider's capabilities, stored on the
// chat, copied on fork and passed to the provider in
// RunRequest.Preferences on every turn.
func TestChatPreferences(t *testing.T) {
	codex := &fakeProvider{id: providers.Codex, caps: providers.Capabilities{Approvals: true, Efforts: []string{"low", "high"}}}
	claude := &fakeProvider{id: providers.Claude, caps: providers.Capabilities{Efforts: []string{"low"}}}
	kimi := &fakeProvider{id: providers.Kimi}
	ts := newTestServer(t, []providers.Provider{codex, claude, kimi})

	t.Run("create validates", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			provider string
			approval string
			effort   string
			status   int
			msg      []string
		}{
			{"codex on-request", "codex", "on-request", "high", 201, nil},
			{"codex every policy", "codex", "untrusted", "", 201, nil},
			{"codex never", "codex", "never", "", 201, nil},
			{"codex on-failure", "codex", "on-failure", "low", 201, nil},
			{"claude effort only", "claude", "", "low", 201, nil},
			{"unknown policy", "codex", "always", "", 400, []string{"approvalPolicy", `"always"`, "untrusted, on-failure, on-request, never"}},
			{"camelCase policy", "codex", "onRequest", "", 400, []string{"approvalPolicy", `"onRequest"`}},
			{"provider without approvals", "claude", "on-request", "", 400, []string{"approvalPolicy", "claude", "does not ask for approvals"}},
			{"unknown effort", "codex", "", "max", 400, []string{"reasoningEffort", `"max"`, "low, high"}},
			{"provider without efforts", "kimi", "", "low", 400, []string{"reasoningEffort", "kimi", "no reasoning efforts"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				before := ts.snapshot()
				req := api.CreateChatRequest{Provider: tt.provider, Cwd: ts.dir, ApprovalPolicy: tt.approval, ReasoningEffort: tt.effort}
				st, body := ts.do("POST", "/v1/chats", "alice", req)
				if st != tt.status {
					t.Fatalf("create: %d %s, want %d", st, body, tt.status)
				}
				if tt.status != http.StatusCreated {
					if code := errorCode(t, body); code != api.CodeBadRequest {
						t.Errorf("code %q", code)
					}
					var e api.ErrorResponse
					_ = json.Unmarshal(body, &e)
					for _, m := range tt.msg {
						if !strings.Contains(e.Error.Message, m) {
							t.Errorf("error %q does not name %s", e.Error.Message, m)
						}
					}
					if ts.snapshot() != before {
						t.Error("a refused create stored something")
					}
					return
				}
				var c api.Chat
				if err := json.Unmarshal(body, &c); err != nil {
					t.Fatal(err)
				}
				stored, err := ts.st.Chat(c.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, got := range []api.Chat{c, stored} {
					if got.ApprovalPolicy != tt.approval || got.ReasoningEffort != tt.effort {
						t.Errorf("chat has approval %q effort %q, want %q %q", got.ApprovalPolicy, got.ReasoningEffort, tt.approval, tt.effort)
					}
				}
			})
		}
	})

	t.Run("reach the provider and survive a fork", func(t *testing.T) {
		st, body := ts.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "codex", Cwd: ts.dir, ApprovalPolicy: "on-request", ReasoningEffort: "high"})
		if st != http.StatusCreated {
			t.Fatalf("create: %d %s", st, body)
		}
		var chat api.Chat
		_ = json.Unmarshal(body, &chat)
		st, body = ts.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", nil)
		if st != http.StatusCreated {
			t.Fatalf("fork: %d %s", st, body)
		}
		var fork api.Chat
		_ = json.Unmarshal(body, &fork)
		if fork.ApprovalPolicy != "on-request" || fork.ReasoningEffort != "high" {
			t.Errorf("fork has approval %q effort %q", fork.ApprovalPolicy, fork.ReasoningEffort)
		}
		want := providers.RunPreferences{ApprovalPolicy: "on-request", ReasoningEffort: "high"}
		for _, id := range []string{chat.ID, fork.ID} {
			n := len(codex.requests())
			if st, body := ts.do("POST", "/v1/chats/"+id+"/prompt", "alice", api.PromptRequest{Text: "hi"}); st != http.StatusAccepted {
				t.Fatalf("prompt %s: %d %s", id, st, body)
			}
			ts.waitIdle(id)
			reqs := codex.requests()
			if len(reqs) != n+1 {
				t.Fatalf("chat %s: %d runs, want %d", id, len(reqs), n+1)
			}
			if got := reqs[n].Preferences; got != want {
				t.Errorf("chat %s: provider got preferences %+v, want %+v", id, got, want)
			}
		}
	})

	t.Run("absent means the provider's default", func(t *testing.T) {
		chat := ts.createChat("alice", "codex")
		n := len(codex.requests())
		ts.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"})
		ts.waitIdle(chat.ID)
		if got := codex.requests()[n].Preferences; got != (providers.RunPreferences{}) {
			t.Errorf("provider got preferences %+v, want none", got)
		}
		raw, _ := json.Marshal(chat)
		if strings.Contains(string(raw), "approvalPolicy") || strings.Contains(string(raw), "reasoningEffort") {
			t.Errorf("empty preferences are not omitted: %s", raw)
		}
	})
}
