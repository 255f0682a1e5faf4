package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"remote/providers"
)

// render shows the fields of an event that a parser test pins.
func render(e providers.Event) string {
	var b strings.Builder
	b.WriteString(string(e.Type))
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	add("session", e.SessionID)
	add("model", e.Model)
	add("msg", e.MessageID)
	add("item", e.ItemID)
	add("kind", e.ItemKind)
	add("subtype", e.Subtype)
	add("tool", e.ToolName)
	add("input", string(e.Input))
	if e.Type == providers.EventToolCompleted {
		fmt.Fprintf(&b, " output=%q error=%v", e.Output, e.IsError)
	}
	if e.Text != "" {
		fmt.Fprintf(&b, " text=%q", e.Text)
	}
	add("message", e.Message)
	add("usage", string(e.Usage))
	if e.Native != nil {
		fmt.Fprintf(&b, " native=%s/%s/%s", e.Native.Method, e.Native.ThreadID, e.Native.Payload)
	}
	if e.Type == providers.EventSystem && len(e.Data) == 0 {
		b.WriteString(" nodata")
	}
	return b.String()
}

func parseAll(t *testing.T, p *Parser, lines ...string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		evs, err := p.ParseLine([]byte(l))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "claude stream-json line: ") {
				t.Errorf("error %q does not name the line kind", err)
			}
			out = append(out, "ERR")
			continue
		}
		for _, e := range evs {
			out = append(out, render(e))
		}
	}
	return out
}

const (
	initLine  = `{"type":"system","subtype":"init","session_id":"s1","model":"claude-x","cwd":"/w","tools":["Bash"]}`
	startLine = `{"type":"stream_event","session_id":"s1","event":{"type":"message_start","message":{"id":"m1","model":"claude-x"}}}`
)

func TestParser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		resume string
		lines  []string
		want   []string
	}{
		{
			name:  "init: session then system",
			lines: []string{initLine},
			want:  []string{"session.updated session=s1 model=claude-x", "system subtype=init"},
		},
		{
			name:   "resumed session id is not a change",
			resume: "s1",
			lines:  []string{initLine},
			want:   []string{"system subtype=init"},
		},
		{
			name: "changed session id later in the stream",
			lines: []string{initLine,
				`{"type":"system","subtype":"status","status":"requesting","session_id":"s2"}`},
			want: []string{"session.updated session=s1 model=claude-x", "system subtype=init",
				"session.updated session=s2 model=claude-x", "system subtype=status"},
		},
		{
			name: "text and thinking deltas, other deltas ignored",
			lines: []string{startLine,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hel"}}}`,
				`{"type":"stream_event","session_id":"s1","api_message_id":"m2","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"message_stop"}}`,
			},
			want: []string{"session.updated session=s1",
				`reasoning.delta msg=m1 kind=reasoning text="hmm"`,
				`assistant.delta msg=m1 kind=message text="hel"`,
				`assistant.delta msg=m2 kind=message text="lo"`},
		},
		{
			name: "assistant record after streaming does not repeat text or thinking",
			lines: []string{startLine,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}}`,
				`{"type":"assistant","session_id":"s1","message":{"id":"m1","model":"claude-x","content":[{"type":"thinking","thinking":"hmm","signature":"x"}]}}`,
				`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}}`,
				`{"type":"assistant","session_id":"s1","message":{"id":"m1","model":"claude-x","content":[{"type":"text","text":"hi"}]}}`,
			},
			want: []string{"session.updated session=s1",
				`reasoning.delta msg=m1 kind=reasoning text="hmm"`,
				`assistant.delta msg=m1 kind=message text="hi"`},
		},
		{
			name: "assistant record without streaming (non-streaming retry) gives text and thinking",
			lines: []string{
				`{"type":"assistant","session_id":"s1","message":{"id":"m9","model":"claude-y","content":[{"type":"thinking","thinking":"deep","text":"WRONG"},{"type":"text","text":"final"},{"type":"redacted_thinking","data":"x"}]}}`,
			},
			want: []string{"session.updated session=s1",
				`reasoning.delta msg=m9 kind=reasoning text="deep"`,
				`assistant.delta msg=m9 kind=message text="final"`},
		},
		{
			name: "synthetic API error message is left to the result",
			lines: []string{
				`{"type":"assistant","session_id":"s1","error":"authentication_failed","message":{"id":"u1","model":"<synthetic>","content":[{"type":"text","text":"Invalid API key"}]}}`,
			},
			want: []string{"session.updated session=s1"},
		},
		{
			name: "tool use and results correlated by id, is_error honoured, array content joined",
			lines: []string{
				`{"type":"assistant","session_id":"s1","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"server_tool_use","id":"t2","name":"web_search","input":{"q":"x"}},{"type":"tool_use","name":"NoID"}]}}`,
				`{"type":"user","session_id":"s1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a\nb","is_error":false},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"one"},{"type":"image"},{"type":"text","text":"two"}],"is_error":true},{"type":"text","text":"ignored"}]}}`,
				`{"type":"user","session_id":"s1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"unknown","content":"x"}]}}`,
			},
			want: []string{"session.updated session=s1",
				`tool.started msg=m1 item=t1 kind=tool_call tool=Bash input={"command":"ls"}`,
				`tool.started msg=m1 item=t2 kind=tool_call tool=web_search input={"q":"x"}`,
				`tool.completed item=t1 kind=tool_call tool=Bash output="a\nb" error=false`,
				`tool.completed item=t2 kind=tool_call tool=web_search output="one\n[image]\ntwo" error=true`,
				`tool.completed item=unknown kind=tool_call output="x" error=false`},
		},
		{
			name:  "user text echo ignored",
			lines: []string{`{"type":"user","session_id":"s1","message":{"role":"user","content":"hello"}}`},
			want:  []string{"session.updated session=s1"},
		},
		{
			name: "result success: run.completed with normalized usage and cost",
			lines: []string{initLine,
				`{"type":"result","subtype":"success","is_error":false,"session_id":"s1","duration_ms":1200,"num_turns":2,"total_cost_usd":0.25,"usage":{"input_tokens":3,"cache_read_input_tokens":100,"cache_creation_input_tokens":7,"output_tokens":24},"result":"Hi"}`},
			want: []string{"session.updated session=s1 model=claude-x", "system subtype=init",
				`run.completed session=s1 model=claude-x usage={"inputTokens":3,"cachedInputTokens":100,"cacheWriteInputTokens":7,"outputTokens":24,"totalTokens":134,"costUsd":0.25,"durationMs":1200,"turns":2}`},
		},
		{
			name: "result is_error: API error with status",
			lines: []string{
				`{"type":"result","subtype":"success","is_error":true,"session_id":"s1","result":"Invalid API key · Fix external API key","api_error_status":401,"terminal_reason":"api_error"}`},
			want: []string{"session.updated session=s1",
				"run.failed session=s1 message=Invalid API key · Fix external API key (HTTP 401)"},
		},
		{
			name: "result is_error: errors array",
			lines: []string{
				`{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s1","errors":["too many turns","second"]}`},
			want: []string{"session.updated session=s1", "run.failed session=s1 message=too many turns; second"},
		},
		{
			name:  "result is_error without detail",
			lines: []string{`{"type":"result","subtype":"error_during_execution","is_error":true}`},
			want:  []string{"run.failed message=claude run failed: error_during_execution"},
		},
		{
			name:   "unknown session on resume: no run.failed",
			resume: "3f0e2a5c-1111-4222-8333-944455556666",
			lines: []string{
				`{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"f00","errors":["No conversation found with session ID: 3f0e2a5c-1111-4222-8333-944455556666"]}`},
			want: nil,
		},
		{
			name:  "rate limit event kept as native",
			lines: []string{`{"type":"rate_limit_event","session_id":"s1","rate_limit_info":{"status":"allowed_warning","utilization":0.9}}`},
			want: []string{"session.updated session=s1",
				`provider.native native=rate_limit_event/s1/{"status":"allowed_warning","utilization":0.9}`},
		},
		{
			name:  "unknown record type kept as native",
			lines: []string{`{"type":"subagent_token_usage","tokens":5}`},
			want:  []string{`provider.native native=subagent_token_usage//{"type":"subagent_token_usage","tokens":5}`},
		},
		{
			name: "malformed top-level JSON is an error",
			lines: []string{`{"type":"assistant",`, `not json`, `[]`, `{"no":"type"}`, `"str"`,
				`{"type":"system","x":tru}`, `{"type":5}`, `{"type":"result","is_error":"yes"}`, `{"type":"x"} {}`,
				"{\"type\":\"a\tb\"}", `{"type":"\q"}`},
			want: []string{"ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR"},
		},
		{
			name: "malformed nested message keeps the session event of its line",
			lines: []string{
				`{"type":"assistant","session_id":"s1","message":"oops"}`,
				`{"type":"assistant","session_id":"s2","message":{"id":"m","content":"not an array"}}`,
				`{"type":"user","session_id":"s3","message":{"content":[{"type":"tool_result","tool_use_id":5}]}}`,
				`{"type":"stream_event","session_id":"s4","event":[1,2]}`,
				`{"type":"stream_event","session_id":"s5"}`,
				`{"type":"result","session_id":"s6","is_error":false,"usage":"bad"}`,
			},
			want: []string{
				"session.updated session=s1", "session.updated session=s2", "session.updated session=s3",
				"session.updated session=s4", "session.updated session=s5", "session.updated session=s6",
				`run.completed session=s6 usage={"inputTokens":0,"cachedInputTokens":0,"outputTokens":0,"totalTokens":0,"costUsd":0}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := NewParser(tt.resume)
			got := parseAll(t, p, tt.lines...)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestParserSessionNotFoundFlag(t *testing.T) {
	t.Parallel()
	p := NewParser("x")
	parseAll(t, p, `{"type":"result","is_error":true,"errors":["No conversation found with session ID: x"]}`)
	if !p.SessionNotFound() {
		t.Fatal("SessionNotFound = false")
	}
	p = NewParser("")
	parseAll(t, p, `{"type":"result","is_error":true,"errors":["other"]}`, initLine)
	if p.SessionNotFound() || p.SessionID() != "s1" {
		t.Fatalf("SessionNotFound %v SessionID %q", p.SessionNotFound(), p.SessionID())
	}
}

func TestParserBounds(t *testing.T) {
	t.Parallel()
	p := NewParser("")
	huge := strings.Repeat("é", MaxToolOutput)
	line, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "t", "content": huge},
	}}})
	evs, err := p.ParseLine(line)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %d", err, len(evs))
	}
	if out := evs[0].Output; len(out) > MaxToolOutput+32 || !strings.HasSuffix(out, "…[truncated]") || !json.Valid([]byte(`"`+strings.TrimSuffix(out, "\n…[truncated]")+`"`)) {
		t.Fatalf("output %d bytes", len(out))
	}
	bigSys := []byte(`{"type":"system","subtype":"init","x":"` + strings.Repeat("a", providers.MaxNativePayload) + `"}`)
	evs, _ = p.ParseLine(bigSys)
	if len(evs) != 1 || evs[0].Data != nil {
		t.Fatalf("oversized system data kept")
	}
	bigInput := []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"W","input":{"x":"` + strings.Repeat("a", providers.MaxNativePayload) + `"}}]}}`)
	evs, _ = p.ParseLine(bigInput)
	if len(evs) != 1 || !bytes.Equal(evs[0].Input, []byte("{}")) {
		t.Fatalf("oversized tool input kept")
	}
}
