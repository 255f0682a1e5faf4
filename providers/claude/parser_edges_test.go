package claude

import (
	"fmt"
	"strings"
	"testing"

	"remote/providers"
)

// The stream-json parser's edges: failure messages, where the model comes
// from, native and stream events, its bounds (at most 4096 tracked), and
// the event slice it reuses.

func TestParserFailureMessages(t *testing.T) {
	t.Parallel()
	tests := []struct{ line, want string }{
		{`{"type":"result","is_error":true,"api_error_status":529}`, "run.failed message=claude API error (HTTP 529)"},
		{`{"type":"result","is_error":true,"result":"API Error: 529 overloaded","api_error_status":529}`,
			"run.failed message=API Error: 529 overloaded"},
		{`{"type":"result","is_error":true,"result":"overloaded","api_error_status":529}`,
			"run.failed message=overloaded (HTTP 529)"},
		{`{"type":"result","is_error":true,"result":"boom","errors":["boom"," other "]}`,
			"run.failed message=boom; other"},
		{`{"type":"result","is_error":true,"result":"  ","errors":["  "]}`, "run.failed message=claude run failed"},
		{`{"type":"result","is_error":true,"errors":[{"message":"from an object"}]}`,
			"run.failed message=from an object"},
		{`{"type":"result","subtype":"success","is_error":true,"terminal_reason":"max_turns"}`,
			"run.failed message=claude run failed: max_turns"},
		{`{"type":"result","is_error":true,"terminal_reason":"aborted"}`, "run.failed message=claude run failed: aborted"},
		{`{"type":"result","subtype":"error_x","is_error":true,"terminal_reason":"aborted"}`,
			"run.failed message=claude run failed: error_x"},
		{`{"type":"result","is_error":true,"api_error_status":0}`, "run.failed message=claude run failed"},
		{`{"type":"result","is_error":true,"errors":[{"message":"No conversation found with session ID: s"}]}`, ""},
	}
	for _, tt := range tests {
		got := strings.Join(parseAll(t, NewParser(""), tt.line), "|")
		if got != tt.want {
			t.Errorf("%s\n got %q\nwant %q", tt.line, got, tt.want)
		}
	}
	long := `{"type":"result","is_error":true,"result":"` + strings.Repeat("x", 5000) + `"}`
	evs, err := NewParser("").ParseLine([]byte(long))
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %d", err, len(evs))
	}
	if msg := evs[0].Message; !strings.HasPrefix(msg, strings.Repeat("x", 4096)) || strings.HasPrefix(msg, strings.Repeat("x", 4097)) ||
		!strings.HasSuffix(msg, "…[truncated]") {
		t.Errorf("a 5000-byte failure is not cut at 4 KiB: %d bytes", len(msg))
	}
}

func TestParserModelOnlyFromSystemAndRealMessages(t *testing.T) {
	t.Parallel()
	got := parseAll(t, NewParser(""),
		initLine,
		`{"type":"rate_limit_event","model":"not-this","rate_limit_info":{"status":"allowed"}}`,
		`{"type":"assistant","session_id":"s1","error":"x","message":{"id":"u","model":"<synthetic>","content":[{"type":"text","text":"E"}]}}`,
		`{"type":"result","is_error":false,"model":"nor-this","session_id":"s1"}`,
		`{"type":"assistant","session_id":"s1","message":{"id":"m2","model":"claude-z","content":[]}}`,
		`{"type":"result","is_error":false,"session_id":"s1"}`,
	)
	want := []string{"session.updated session=s1 model=claude-x", "system subtype=init",
		`provider.native native=rate_limit_event//{"status":"allowed"}`,
		`run.completed session=s1 model=claude-x usage={"inputTokens":0,"cachedInputTokens":0,"outputTokens":0,"totalTokens":0,"costUsd":0}`,
		`run.completed session=s1 model=claude-z usage={"inputTokens":0,"cachedInputTokens":0,"outputTokens":0,"totalTokens":0,"costUsd":0}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParserNativeAndStreamEdges(t *testing.T) {
	t.Parallel()
	got := parseAll(t, NewParser(""),
		`{"type":"rate_limit_event"}`,
		`{"type":"stream_event","event":{"type":"message_start","message":{"model":"m-only"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}}`,
		`{"type":"stream_event","event":{"type":"message_start","message":"bad"}}`,
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m7"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":null}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"t"}}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","content":"no id"}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t9","content":5}]}}`,
		`{"type":"user","message":{"content":[]}}`,
		`{"type":"user","message":{"content":" [not an array"}}`,
		`{"type":"assistant","message":{"id":"a","content":[{"type":"text","text":""},{"type":"thinking","thinking":""},{"type":"tool_use","id":"t","name":"N"}]}}`,
		`{"type":"result","is_error":false,"session_id":"s3"}`,
	)
	want := []string{
		`provider.native native=rate_limit_event//{"type":"rate_limit_event"}`,
		`assistant.delta kind=message text="a"`,
		`reasoning.delta msg=m7 kind=reasoning text="t"`,
		`tool.completed item=t9 kind=tool_call output="" error=false`,
		`tool.started msg=a item=t kind=tool_call tool=N input={}`,
		`session.updated session=s3 model=m-only`,
		`run.completed session=s3 model=m-only usage={"inputTokens":0,"cachedInputTokens":0,"outputTokens":0,"totalTokens":0,"costUsd":0}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The per-run correlation maps hold at most 4096 entries: the 4097th
// clears them, so a runaway stream cannot grow them.
func TestParserTracksAtMost4096(t *testing.T) {
	t.Parallel()
	p := NewParser("")
	for i := range 4097 {
		parseAll(t, p, fmt.Sprintf(`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m%d"}}}`, i),
			`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`)
	}
	// m0 was forgotten when m4096 streamed: its full record shows again;
	// m1 is still known.
	got := parseAll(t, p, `{"type":"assistant","message":{"id":"m0","content":[{"type":"text","text":"full0"}]}}`,
		`{"type":"assistant","message":{"id":"m4096","content":[{"type":"text","text":"full"}]}}`)
	if want := []string{`assistant.delta msg=m0 kind=message text="full0"`}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after 4097 streamed messages: %q, want %q", got, want)
	}
	p = NewParser("")
	for i := range 4097 {
		parseAll(t, p, fmt.Sprintf(`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t%d","name":"Bash"}]}}`, i))
	}
	got = parseAll(t, p, `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t0","content":"o"},{"type":"tool_result","tool_use_id":"t4096","content":"o"}]}}`)
	want := []string{`tool.completed item=t0 kind=tool_call output="o" error=false`,
		`tool.completed item=t4096 kind=tool_call tool=Bash output="o" error=false`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after 4097 tools: %q, want %q", got, want)
	}
}

// Payloads of exactly MaxNativePayload (64 KiB) bytes are kept; one byte
// more is dropped.
func TestParserNativePayloadEdge(t *testing.T) {
	t.Parallel()
	if providers.MaxNativePayload != 64<<10 {
		t.Fatalf("MaxNativePayload = %d, the bound users rely on is 64 KiB", providers.MaxNativePayload)
	}
	for _, n := range []int{64 << 10, 64<<10 + 1} {
		pre := `{"type":"system","subtype":"init","x":"`
		line := pre + strings.Repeat("a", n-len(pre)-2) + `"}`
		evs, err := NewParser("").ParseLine([]byte(line))
		if err != nil || len(evs) != 1 || (len(evs[0].Data) == n) != (n == 64<<10) {
			t.Errorf("system line of %d bytes: %v, %d events, data %d bytes", n, err, len(evs), len(evs[0].Data))
		}
		pre = `{"x":"`
		input := pre + strings.Repeat("a", n-len(pre)-2) + `"}`
		line = `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"W","input":` + input + `}]}}`
		evs, err = NewParser("").ParseLine([]byte(line))
		if err != nil || len(evs) != 1 || (len(evs[0].Input) == n) != (n == 64<<10) {
			t.Errorf("tool input of %d bytes: %v, %d events, input %d bytes", n, err, len(evs), len(evs[0].Input))
		}
	}
}

// A text delta, the line a run streams most, costs one allocation (its
// text): the event slice is reused from line to line.
func TestParserReusesEventSlice(t *testing.T) {
	p := NewParser("s1")
	line := []byte(`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hel"}}}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = p.ParseLine(line) }); n > 1 {
		t.Errorf("a text delta line allocates %v times, want 1", n)
	}
}
