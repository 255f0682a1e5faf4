package codexharness

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"remote/providers"
)

func TestDecodeMessage(t *testing.T) {
	tests := []struct {
		line   string
		kind   MessageKind
		id     string
		method string
		bad    bool
	}{
		{line: `{"id":0,"method":"item/commandExecution/requestApproval","params":{}}`, kind: KindRequest, id: `0`, method: "item/commandExecution/requestApproval"},
		{line: `{"id":"req-42","method":"x"}`, kind: KindRequest, id: `"req-42"`, method: "x"},
		{line: `{"jsonrpc":"2.0","id":"0","method":"x"}`, kind: KindRequest, id: `"0"`, method: "x"},
		{line: `{"method":"turn/started","params":{"threadId":"t"}}`, kind: KindNotification, method: "turn/started"},
		{line: `{"id":null,"method":"n"}`, kind: KindNotification, method: "n"},
		{line: `{"id":3,"result":{"turn":{}}}`, kind: KindResponse, id: `3`},
		{line: `{"id":3}`, kind: KindResponse, id: `3`},
		{line: `{"id":"a\u0062","error":{"code":-32600,"message":"no rollout found"}}`, kind: KindResponse, id: `"ab"`},
		{line: `  {"id":12345678901234567890,"result":1}  `, kind: KindResponse, id: `12345678901234567890`},
		{line: ``, bad: true},
		{line: `[1,2]`, bad: true},
		{line: `{"id":3,"error":"nope"}`, bad: true},
		{line: `{"id":true,"result":1}`, bad: true},
		{line: `{"id":{"a":1},"method":"x"}`, bad: true},
		{line: `{"method":""}`, bad: true},
		{line: `{"method":7}`, bad: true},
		{line: `{"params":{}}`, bad: true},
		{line: `{"id":1,"result":`, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			m, err := DecodeMessage([]byte(tt.line))
			if tt.bad {
				if !errors.Is(err, ErrMalformedMessage) {
					t.Fatalf("DecodeMessage = %+v, %v; want ErrMalformedMessage", m, err)
				}
				return
			}
			if err != nil || m.Kind != tt.kind || m.ID != tt.id || m.Method != tt.method {
				t.Fatalf("DecodeMessage = %+v, %v; want kind %d id %s method %q", m, err, tt.kind, tt.id, tt.method)
			}
		})
	}
}

const pt = `"threadId":"T","turnId":"U"`

func TestParserItems(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{
			name: "file change",
			lines: []string{
				`{"method":"item/started","params":{` + pt + `,"item":{"id":"f","type":"fileChange","status":"inProgress","changes":[{"path":"a.go","kind":{"type":"update"},"diff":"@@"}]}}}`,
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"f","type":"fileChange","status":"completed","changes":[{"path":"a.go","kind":{"type":"update"},"diff":"@@"},{"path":"b.go","kind":"add"}]}}}`,
			},
			want: []string{"tool.started item=f tool=Patch status=inProgress", "tool.completed item=f tool=Patch output=update a.go\nadd b.go\n status=completed"},
		},
		{
			name: "mcp tool ok and failing",
			lines: []string{
				`{"method":"item/started","params":{` + pt + `,"item":{"id":"m","type":"mcpToolCall","server":"fs","tool":"read","status":"inProgress","arguments":{"p":1}}}}`,
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"m","type":"mcpToolCall","server":"fs","tool":"read","status":"completed","result":{"content":[{"type":"text","text":"data"}]}}}}`,
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"m2","type":"mcpToolCall","server":"fs","tool":"read","status":"failed","error":{"message":"denied"}}}}`,
			},
			want: []string{
				"tool.started item=m tool=fs/read status=inProgress",
				"tool.completed item=m tool=fs/read output=data status=completed",
				"tool.started item=m2 tool=fs/read status=failed",
				"tool.completed item=m2 tool=fs/read output=denied status=failed isError=true",
			},
		},
		{
			name: "dynamic tool and web search",
			lines: []string{
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"d","type":"dynamicToolCall","namespace":"remote","tool":"schedule","status":"completed","success":false,"contentItems":[{"type":"inputText","text":"no"}]}}}`,
				`{"method":"item/started","params":{` + pt + `,"item":{"id":"w","type":"webSearch","query":"go fuzz"}}}`,
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"w","type":"webSearch","query":"go fuzz"}}}`,
			},
			want: []string{
				"tool.started item=d tool=remote/schedule status=completed",
				"tool.completed item=d tool=remote/schedule output=no status=completed isError=true",
				"tool.started item=w tool=WebSearch",
				"tool.completed item=w tool=WebSearch",
			},
		},
		{
			name: "plan deltas and snapshot",
			lines: []string{
				`{"method":"item/plan/delta","params":{` + pt + `,"itemId":"p","delta":"1. look"}}`,
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"p","type":"plan","text":"1. look\n2. fix"}}}`,
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"q","type":"agentMessage","text":"never streamed"}}}`,
				`{"method":"item/agentMessage/delta","params":{` + pt + `,"itemId":"r","delta":"abc"}}`,
				`{"method":"item/completed","params":{` + pt + `,"item":{"id":"r","type":"agentMessage","text":"xyz"}}}`,
			},
			want: []string{
				"assistant.delta item=p text=1. look",
				"assistant.delta item=p text=\n2. fix",
				"assistant.delta item=q text=never streamed",
				"assistant.delta item=r text=abc",
			},
		},
		{
			name: "terminal error with another message than the failed turn",
			lines: []string{
				`{"method":"error","params":{"error":{"message":"stream disconnected"},"willRetry":false}}`,
				`{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"U","status":"failed","error":{"message":"quota exceeded"}}}}`,
			},
			want: []string{"error status=terminal message=stream disconnected", "run.failed status=failed message=quota exceeded"},
		},
		{
			name: "unknown turn status fails the run",
			lines: []string{
				`{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"U","status":"exploded"}}}`,
			},
			want: []string{`run.failed status=exploded message=turn ended with status "exploded"`},
		},
		{
			name: "malformed known notifications become native",
			lines: []string{
				`{"method":"item/started","params":{"threadId":"T","item":"not an object"}}`,
				`{"method":"item/completed","params":{"threadId":"T","item":{"id":"x"}}}`,
				`{"method":"turn/completed","params":{"threadId":"T","turn":[1]}}`,
				`{"method":"thread/status/changed","params":{"threadId":"T","status":5}}`,
				`{"method":"error","params":{"error":{}}}`,
				`{"method":"item/agentMessage/delta","params":"scalar"}`,
			},
			want: []string{
				"provider.native method=item/started",
				"provider.native method=item/completed",
				"provider.native method=turn/completed",
				"provider.native method=thread/status/changed",
				"provider.native method=error",
				"provider.native method=item/agentMessage/delta",
			},
		},
		{
			name: "child thread",
			lines: []string{
				`{"method":"item/reasoning/textDelta","params":{"threadId":"C","turnId":"V","itemId":"r","delta":"x"}}`,
				`{"method":"turn/started","params":{"threadId":"C","turn":{"id":"V","status":"inProgress"}}}`,
				`{"method":"item/started","params":{"threadId":"C","turnId":"V","item":{"id":"c","type":"commandExecution","status":"inProgress"}}}`,
				`{"method":"turn/completed","params":{"threadId":"C","turn":{"id":"V","status":"failed"}}}`,
			},
			want: []string{
				"collaboration tool=turn/started status=inProgress",
				"collaboration item=c tool=item/started status=inProgress",
				"collaboration tool=turn/completed status=failed",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(providers.Codex)
			p.SetThread("T")
			p.SetTurn("U")
			var got []string
			for _, l := range tt.lines {
				evs, err := p.ParseLine([]byte(l))
				if err != nil {
					t.Fatalf("ParseLine(%s): %v", l, err)
				}
				for _, ev := range evs {
					got = append(got, summarize(ev))
				}
			}
			diff(t, got, tt.want)
		})
	}
}

func TestParserBoundsPayloads(t *testing.T) {
	p := NewParser(providers.Codex)
	big := strings.Repeat("x", providers.MaxNativePayload+1)
	evs, err := p.ParseLine([]byte(`{"method":"new/thing","params":{"blob":"` + big + `"}}`))
	if err != nil || len(evs) != 1 {
		t.Fatalf("ParseLine: %v %v", evs, err)
	}
	if n := len(evs[0].Native.Payload); n > 1024 || !bytes.Contains(evs[0].Native.Payload, []byte(`"truncated":true`)) {
		t.Fatalf("native payload of %d bytes not bounded: %.80s", n, evs[0].Native.Payload)
	}
	out := strings.Repeat("y", MaxToolOutput+100)
	evs, _ = p.ParseLine([]byte(fmt.Sprintf(`{"method":"item/completed","params":{"threadId":"T","item":{"id":"c","type":"commandExecution","status":"completed","aggregatedOutput":%q}}}`, out)))
	if got := evs[len(evs)-1].Output; len(got) > MaxToolOutput+100 || !strings.Contains(got, "output truncated") {
		t.Fatalf("tool output of %d bytes not truncated", len(got))
	}
}
