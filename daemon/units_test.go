package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"remote/api"
	"remote/providers"
)

func TestProjectEvent(t *testing.T) {
	now := time.UnixMilli(1234)
	native := &providers.NativeEnvelope{SchemaVersion: 1, Method: "item/x", TurnID: "t1"}
	tests := []struct {
		name string
		in   providers.Event
		want api.Event
		drop bool
	}{
		{"run.started dropped", providers.Event{Type: providers.EventRunStarted}, api.Event{}, true},
		{"unknown dropped", providers.Event{Type: "quota.updated"}, api.Event{}, true},
		{"session", providers.Event{Type: providers.EventSessionUpdated, SessionID: "s1"},
			api.Event{T: 1234, Type: "session", Provider: "claude", SessionID: "s1"}, false},
		{"system", providers.Event{Type: providers.EventSystem, Subtype: "init", Data: json.RawMessage(`{"a":1}`), T: 99},
			api.Event{T: 99, Type: "system", Subtype: "init", Data: json.RawMessage(`{"a":1}`)}, false},
		{"assistant text uses item id", providers.Event{Type: providers.EventAssistantDelta, Text: "hi", ItemID: "i1"},
			api.Event{T: 1234, Type: "assistant_text", Text: "hi", MessageID: "i1"}, false},
		{"thinking", providers.Event{Type: providers.EventReasoningDelta, Text: "hm", MessageID: "m"},
			api.Event{T: 1234, Type: "thinking", Text: "hm", MessageID: "m"}, false},
		{"tool start", providers.Event{Type: providers.EventToolStarted, ItemID: "t", ToolName: "Bash", Input: json.RawMessage(`{"c":1}`)},
			api.Event{T: 1234, Type: "tool_use_start", ID: "t", Name: "Bash", Input: json.RawMessage(`{"c":1}`)}, false},
		{"tool start without input", providers.Event{Type: providers.EventToolStarted, ItemID: "t", ToolName: "X"},
			api.Event{T: 1234, Type: "tool_use_start", ID: "t", Name: "X", Input: json.RawMessage(`{}`)}, false},
		{"tool start scalar input", providers.Event{Type: providers.EventToolStarted, ItemID: "t", Input: json.RawMessage(`"ls"`)},
			api.Event{T: 1234, Type: "tool_use_start", ID: "t", Input: json.RawMessage(`{"value":"ls"}`)}, false},
		{"tool end", providers.Event{Type: providers.EventToolCompleted, ItemID: "t", Output: "out", IsError: true},
			api.Event{T: 1234, Type: "tool_use_end", ID: "t", Output: "out", IsError: true}, false},
		{"interaction request", providers.Event{Type: providers.EventInteractionRequest, InteractionID: "7", ToolName: "approve", Input: json.RawMessage(`{}`)},
			api.Event{T: 1234, Type: "interaction_request", ID: "7", InteractionID: "7", Name: "approve", Input: json.RawMessage(`{}`)}, false},
		{"interaction resolved", providers.Event{Type: providers.EventInteractionResolved, InteractionID: "7", Status: "approved"},
			api.Event{T: 1234, Type: "interaction_resolved", ID: "7", InteractionID: "7", Status: "approved"}, false},
		{"run interrupted", providers.Event{Type: providers.EventRunInterrupted},
			api.Event{T: 1234, Type: "turn_status", Provider: "claude", Status: "interrupted"}, false},
		{"turn status", providers.Event{Type: providers.EventTurnStatus, Status: "busy", Provider: "codex"},
			api.Event{T: 1234, Type: "turn_status", Provider: "codex", Status: "busy"}, false},
		{"collaboration", providers.Event{Type: providers.EventCollaboration, ItemID: "c", ToolName: "spawn", Data: json.RawMessage(`1`)},
			api.Event{T: 1234, Type: "collaboration", ID: "c", Name: "spawn", Data: json.RawMessage(`1`)}, false},
		{"native", providers.Event{Type: providers.EventProviderNative, Native: native, Data: json.RawMessage(`2`)},
			api.Event{T: 1234, Type: "provider_event", Name: "item/x", TurnID: "t1", Data: json.RawMessage(`2`),
				Native: json.RawMessage(`{"schemaVersion":1,"method":"item/x","turnId":"t1"}`)}, false},
		{"usage", providers.Event{Type: providers.EventUsageUpdated, Usage: json.RawMessage(`{"in":1}`)},
			api.Event{T: 1234, Type: "usage_update", Usage: json.RawMessage(`{"in":1}`)}, false},
		{"complete", providers.Event{Type: providers.EventRunCompleted, Usage: json.RawMessage(`{"in":1}`)},
			api.Event{T: 1234, Type: "complete", Provider: "claude", Usage: json.RawMessage(`{"in":1}`)}, false},
		{"run failed", providers.Event{Type: providers.EventRunFailed, Message: "boom"},
			api.Event{T: 1234, Type: "error", Message: "boom"}, false},
		{"error from text", providers.Event{Type: providers.EventError, Text: "bad"},
			api.Event{T: 1234, Type: "error", Message: "bad"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := projectEvent(tt.in, providers.Claude, now)
			if ok == tt.drop {
				t.Fatalf("projected = %v, want %v", ok, !tt.drop)
			}
			if tt.drop {
				return
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tt.want)
			if string(g) != string(w) {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

func TestPromptWithHistory(t *testing.T) {
	history := []api.Event{
		{Type: "user", Text: "first question"},
		{Type: "thinking", Text: "SECRET REASONING"},
		{Type: "assistant_text", Text: "first "},
		{Type: "tool_use_end", Output: "TOOL OUTPUT"},
		{Type: "assistant_text", Text: "answer"},
	}
	got := promptWithHistory(history, "now", 24000)
	if !strings.Contains(got, "User:\nfirst question") || !strings.Contains(got, "Assistant:\nfirst answer") || !strings.HasSuffix(got, "Current user request:\nnow") {
		t.Errorf("prompt lacks the transcript: %q", got)
	}
	if strings.Contains(got, "SECRET") || strings.Contains(got, "TOOL OUTPUT") {
		t.Errorf("prompt includes reasoning or tool output: %q", got)
	}
	if got := promptWithHistory(nil, "now", 24000); got != "now" {
		t.Errorf("empty history changed the prompt: %q", got)
	}

	t.Run("bounded on a rune boundary", func(t *testing.T) {
		long := strings.Repeat("é", 20000) // 40000 bytes
		got := promptWithHistory([]api.Event{{Type: "user", Text: long}}, "q", 24000)
		if !utf8.ValidString(got) {
			t.Fatal("transcript cut inside a rune")
		}
		body := strings.TrimSuffix(got, "\n\nCurrent user request:\nq")
		i := strings.Index(body, "[Earlier visible transcript omitted]\n")
		if i < 0 {
			t.Fatalf("no omission marker")
		}
		tail := body[i+len("[Earlier visible transcript omitted]\n"):]
		if len(tail) > 24000 || len(tail) < 23990 {
			t.Errorf("transcript tail is %d bytes, want <= 24000 and close to it", len(tail))
		}
	})
}

func TestTailUTF8(t *testing.T) {
	for _, tt := range []struct {
		s    string
		max  int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "bc"}, {"aé", 1, ""}, {"aéb", 2, "b"}, {"aéb", 3, "éb"}, {"x", 0, ""}} {
		if got := tailUTF8(tt.s, tt.max); got != tt.want {
			t.Errorf("tailUTF8(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

func TestSkills(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"review", "deploy"} {
		os.MkdirAll(filepath.Join(dir, s), 0o755)
		os.WriteFile(filepath.Join(dir, s, "SKILL.md"), []byte("# "+s), 0o644)
	}
	t.Run("validation", func(t *testing.T) {
		for _, tt := range []struct {
			names []string
			dir   string
			ok    bool
		}{
			{nil, "", true},
			{[]string{"review"}, dir, true},
			{[]string{"review", "deploy"}, dir, true},
			{[]string{"missing"}, dir, false},
			{[]string{"review"}, "", false},
			{[]string{"../etc"}, dir, false},
			{[]string{"a/b"}, dir, false},
			{[]string{".hidden"}, dir, false},
			{[]string{"review", "review"}, dir, false},
			{[]string{""}, dir, false},
		} {
			err := validateSkills(tt.names, tt.dir)
			if (err == nil) != tt.ok {
				t.Errorf("validateSkills(%q, %q) = %v, want ok=%v", tt.names, tt.dir, err, tt.ok)
			}
			var ae *Error
			if err != nil && (!asAPIError(err, &ae) || ae.Status != http.StatusBadRequest) {
				t.Errorf("error %v is not bad_request", err)
			}
		}
	})
	t.Run("strategies", func(t *testing.T) {
		skills := []string{"review", "deploy"}
		for _, tt := range []struct {
			strategy providers.SkillsStrategy
			want     string
		}{
			{providers.SkillsSlashCommand, "/review /deploy\n\ngo"},
			{providers.SkillsDollarMention, "Use these skills: $review, $deploy.\n\ngo"},
			{providers.SkillsInstructions, "Before you start, read and follow these skill instructions:\n- " + filepath.Join(dir, "review", "SKILL.md") + "\n- " + filepath.Join(dir, "deploy", "SKILL.md") + "\n\ngo"},
			{providers.SkillsNone, "go"},
		} {
			if got := promptWithSkills(tt.strategy, skills, dir, "go"); got != tt.want {
				t.Errorf("%s: got %q, want %q", tt.strategy, got, tt.want)
			}
		}
	})
}

func TestSessions(t *testing.T) {
	c := api.Chat{ClaudeSessionID: " legacy ", Sessions: map[string]string{"codex": "cx", "kimi": " "}}
	normalizeSessions(&c)
	if c.Sessions["claude"] != "legacy" || c.Sessions["codex"] != "cx" || c.CodexSessionID != "cx" || c.ClaudeSessionID != "legacy" {
		t.Errorf("normalize: %+v", c)
	}
	if _, ok := c.Sessions["kimi"]; ok {
		t.Errorf("empty session kept: %+v", c.Sessions)
	}
	setSession(&c, "claude", "")
	if c.ClaudeSessionID != "" || c.Sessions["claude"] != "" || c.Sessions["codex"] != "cx" {
		t.Errorf("clear claude: %+v", c)
	}
	setSession(&c, "minimax", "mm")
	if sessionID(c, "minimax") != "mm" {
		t.Errorf("new provider session not kept: %+v", c)
	}
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		body    string
		wantErr string
	}{
		{`{"text":"hi"}`, ""},
		{`{"text":"hi","skills":["a"],"mode":"plan"}`, ""},
		{`{"text":"hi","bogus":1}`, `unknown field "bogus"`},
		{`{"Text":"hi"}`, `unknown field "Text"`},
		{`{"text":1}`, `field "text"`},
		{`{"text":"hi"`, "malformed JSON"},
		{`{"text":"hi"} {}`, "malformed JSON"},
		{`[]`, "want a JSON object"},
		{`null`, "null"},
		{``, "empty"},
		{`"x"`, "want a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var req api.PromptRequest
			err := decodeStrict([]byte(tt.body), &req)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				return
			}
			var ae *Error
			if !asAPIError(err, &ae) || ae.Code != api.CodeBadRequest || !strings.Contains(ae.Message, tt.wantErr) {
				t.Fatalf("decode = %v, want bad_request containing %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{`{"text":"hi","mode":"plan","skills":["a"]}`, `{"provider":"claude","cwd":"/tmp"}`,
		`{"provider":"codex","approvalPolicy":"untrusted","reasoningEffort":"high"}`, `{"provider":"codex","approvalPolicy":"On-Request"}`,
		`{"interactionId":"1","result":{}}`, `{"type":"prompt","clientId":"c"}`, `{"title":"x"}`, `{`, `[]`, `{"a":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		targets := []any{&api.PromptRequest{}, &api.CreateChatRequest{}, &api.InteractionRequest{}, &forkRequest{}}
		for _, v := range targets {
			if err := decodeStrict(data, v); err == nil {
				// Whatever decoded must re-encode and decode to the same value.
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatalf("re-encode %T: %v", v, err)
				}
				if err := decodeStrict(b, v); err != nil {
					t.Fatalf("re-decode %T of %s: %v", v, b, err)
				}
			} else {
				var ae *Error
				if !asAPIError(err, &ae) || ae.Status != http.StatusBadRequest {
					t.Fatalf("error %v is not a bad_request", err)
				}
			}
		}
		var create api.CreateChatRequest
		if decodeStrict(data, &create) == nil {
			// Preferences are accepted only from the allowed sets, and
			// anything else is a bad_request naming the field.
			caps := providers.Capabilities{Approvals: true, Efforts: []string{"low", "high"}}
			err := checkPreferences(create, caps)
			okApproval := create.ApprovalPolicy == "" || slices.Contains(api.ApprovalPolicies(), create.ApprovalPolicy)
			okEffort := create.ReasoningEffort == "" || slices.Contains(caps.Efforts, create.ReasoningEffort)
			var ae *Error
			switch {
			case err == nil && (!okApproval || !okEffort):
				t.Fatalf("accepted approval %q effort %q", create.ApprovalPolicy, create.ReasoningEffort)
			case err != nil && (okApproval && okEffort || !asAPIError(err, &ae) || ae.Code != api.CodeBadRequest):
				t.Fatalf("refused approval %q effort %q: %v", create.ApprovalPolicy, create.ReasoningEffort, err)
			}
		}
		if msg, err := decodeClientMessage(data); err == nil && msg.Type == "" {
			t.Fatalf("client message without type accepted: %s", data)
		}
	})
}

func TestValidateRoutes(t *testing.T) {
	h := func(http.ResponseWriter, *http.Request) error { return nil }
	tests := []struct {
		name   string
		routes []Route
		ok     bool
	}{
		{"good", []Route{{"GET", "/a", AccessPeer, h}, {"POST", "/a", AccessUser, h}}, true},
		{"bad method", []Route{{"FETCH", "/a", AccessPeer, h}}, false},
		{"relative", []Route{{"GET", "a", AccessPeer, h}}, false},
		{"no handler", []Route{{"GET", "/a", AccessPeer, nil}}, false},
		{"no access", []Route{{"GET", "/a", 0, h}}, false},
		{"duplicate", []Route{{"GET", "/a", AccessPeer, h}, {"GET", "/a", AccessUser, h}}, false},
	}
	s := &Server{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.buildMux(tt.routes); (err == nil) != tt.ok {
				t.Errorf("buildMux = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	t.Run("conflicting patterns", func(t *testing.T) {
		_, err := s.buildMux([]Route{{"GET", "/x/{a}", AccessPeer, h}, {"GET", "/x/{b}", AccessPeer, h}})
		if err == nil {
			t.Error("conflicting patterns accepted")
		}
	})
}

func TestAccessAllows(t *testing.T) {
	a := Access{UIDs: []int{1001}, GIDs: []int{2000}, groupsOf: func(uid uint32) []int {
		if uid == 1003 {
			return []int{50, 2000}
		}
		return nil
	}}
	for _, tt := range []struct {
		uid, gid uint32
		want     bool
	}{
		{0, 0, true},
		{uint32(os.Getuid()), 99, true},
		{1001, 99, true},
		{1002, 2000, true},
		{1003, 99, true},
		{1004, 99, false},
		{65534, 65534, false},
	} {
		if got := a.Allows(tt.uid, tt.gid); got != tt.want {
			t.Errorf("Allows(%d, %d) = %v, want %v", tt.uid, tt.gid, got, tt.want)
		}
	}
}

func TestRootsCheck(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(root, "escape"))
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	r := NewRoots([]string{root}, "")
	for _, tt := range []struct {
		cwd string
		ok  bool
	}{
		{root, true},
		{filepath.Join(root, "sub"), true},
		{filepath.Join(root, "sub", ".."), true},
		{filepath.Join(root, "escape"), false},
		{filepath.Join(root, "sub", "..", ".."), false},
		{filepath.Join(root, "missing"), false},
		{filepath.Join(root, "file"), false},
		{"relative", false},
		{outside, false},
	} {
		_, err := r.Check(tt.cwd)
		if (err == nil) != tt.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tt.cwd, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tt.cwd) {
			t.Errorf("error %q does not name the cwd", err)
		}
	}
}

type launcherFunc func(ctx context.Context, cmd providers.Command) (providers.Process, error)

func (f launcherFunc) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	return f(ctx, cmd)
}

func TestHostUserLauncher(t *testing.T) {
	var got providers.Command
	inner := launcherFunc(func(_ context.Context, cmd providers.Command) (providers.Process, error) {
		got = cmd
		return nil, nil
	})
	self, err := LookupHostUser("")
	if err != nil {
		t.Fatal(err)
	}
	HostUserLauncher(inner, self).Start(context.Background(), providers.Command{Env: []string{"HOME=/x"}})
	if got.UID != nil || got.GID != nil || got.Env[0] != "HOME=/x" {
		t.Errorf("own user: %+v", got)
	}
	other := HostUser{Name: "agent", UID: 4242, GID: 4343, Home: "/home/agent"}
	HostUserLauncher(inner, other).Start(context.Background(), providers.Command{Env: []string{"HOME=" + os.Getenv("HOME"), "PATH=/bin", "USER=custom"}})
	if got.UID == nil || *got.UID != 4242 || *got.GID != 4343 {
		t.Fatalf("credentials not set: %+v", got)
	}
	env := strings.Join(got.Env, " ")
	if !strings.Contains(env, "HOME=/home/agent") || !strings.Contains(env, "USER=custom") || !strings.Contains(env, "LOGNAME=agent") || !strings.Contains(env, "PATH=/bin") {
		t.Errorf("env %q", env)
	}
}
