package codexharness

import (
	"bytes"
	"encoding/json"
	"testing"

	"remote/providers"
)

var fuzzSeeds = []string{
	`{"id":1,"result":{"userAgent":"x"}}`,
	`{"id":2,"result":{"thread":{"id":"thr"},"model":"m"}}`,
	`{"id":"e","error":{"code":-32600,"message":"no rollout found for thread id x"}}`,
	`{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"T","turnId":"U","itemId":"c","command":"ls"}}`,
	`{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"U","itemId":"m","delta":"hé"}}`,
	`{"method":"item/completed","params":{"threadId":"T","turnId":"U","item":{"id":"m","type":"agentMessage","text":"hé!"}}}`,
	`{"method":"item/reasoning/summaryTextDelta","params":{"threadId":"T","itemId":"r","delta":"a","summaryIndex":3}}`,
	`{"method":"item/completed","params":{"threadId":"T","item":{"id":"r","type":"reasoning","summary":["a","b"],"content":["c"]}}}`,
	`{"method":"item/completed","params":{"threadId":"T","item":{"id":"c","type":"commandExecution","exitCode":2,"aggregatedOutput":"x"}}}`,
	`{"method":"item/completed","params":{"threadId":"T","item":{"id":"f","type":"fileChange","changes":[{"path":"a","kind":{"type":"add"}}]}}}`,
	`{"method":"item/completed","params":{"threadId":"T","item":{"id":"m","type":"mcpToolCall","server":"s","tool":"t","result":{"content":[{"text":"r"}]}}}}`,
	`{"method":"thread/tokenUsage/updated","params":{"threadId":"T","turnId":"U","tokenUsage":{"last":{"inputTokens":1}}}}`,
	`{"method":"thread/status/changed","params":{"threadId":"T","status":{"type":"active","activeFlags":["waitingOnApproval"]}}}`,
	`{"method":"error","params":{"error":{"message":"m"},"willRetry":false}}`,
	`{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"U","status":"failed","error":{"message":"x"}}}}`,
	`{"method":"turn/completed","params":{"threadId":"C","turn":{"id":"V","status":"completed"}}}`,
	`{"method":"configWarning","params":{"summary":"s"}}`,
	`not json`, `{}`, `{"id":[1]}`, `{"method":""}`, `{"id":1.5e3,"result":null}`,
}

// FuzzDecodeMessage: the decoder never panics, and what it accepts has a
// kind, a canonical id that decodes again, and a method where one belongs.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := DecodeMessage(line)
		if err != nil {
			return
		}
		switch m.Kind {
		case KindNotification:
			if m.Method == "" || m.ID != "" {
				t.Fatalf("bad notification %+v", m)
			}
		case KindRequest, KindResponse:
			if m.ID == "" || !json.Valid([]byte(m.ID)) {
				t.Fatalf("bad id %q", m.ID)
			}
			if again, err := canonicalID(json.RawMessage(m.ID)); err != nil || again != m.ID {
				t.Fatalf("id %q not canonical: %q %v", m.ID, again, err)
			}
		default:
			t.Fatalf("no kind: %+v", m)
		}
	})
}

// FuzzParser feeds a stream of lines to one parser: no panic, every event
// has a type, native payloads stay bounded, and a text never streams past
// the snapshot it came from.
func FuzzParser(f *testing.F) {
	f.Add([]byte(fuzzSeeds[4] + "\n" + fuzzSeeds[5] + "\n" + fuzzSeeds[14]))
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		p := NewParser(providers.Codex)
		p.SetThread("T")
		for _, line := range bytes.Split(stream, []byte("\n")) {
			evs, err := p.ParseLine(line)
			if err != nil {
				continue
			}
			for _, ev := range evs {
				if ev.Type == "" {
					t.Fatalf("event without type from %q", line)
				}
				if ev.Native != nil && len(ev.Native.Payload) > providers.MaxNativePayload {
					t.Fatalf("native payload of %d bytes", len(ev.Native.Payload))
				}
				if len(ev.Input) > 0 && !json.Valid(ev.Input) {
					t.Fatalf("invalid input JSON %q", ev.Input)
				}
			}
		}
		_ = p.Flush()
	})
}
