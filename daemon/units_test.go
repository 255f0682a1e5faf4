package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"remote/api"
	"remote/providers"
)

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
