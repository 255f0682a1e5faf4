package claude

import (
	"bytes"
	"encoding/json"
	"testing"

	"remote/providers"
)

// FuzzParser feeds arbitrary stream-json to the parser: it must never
// panic, and every event must stay within the documented bounds.
func FuzzParser(f *testing.F) {
	for _, seed := range []string{
		initLine, startLine,
		`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"t"}}}`,
		`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"text","text":"x"},{"type":"thinking","thinking":"y"}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"o"}],"is_error":true}]}}`,
		`{"type":"result","subtype":"success","is_error":false,"usage":{"input_tokens":1},"total_cost_usd":0.1}`,
		`{"type":"result","is_error":true,"errors":["No conversation found with session ID: x"],"api_error_status":529}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}`,
		`{"type":"assistant","session_id":"s","message":"oops"}`,
		`{"type":"x"}`, `{`, `null`, `[]`, "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := NewParser("")
		for _, line := range bytes.Split(data, []byte("\n")) {
			evs, err := p.ParseLine(line)
			if err != nil && len(evs) != 0 {
				t.Fatalf("events with an error")
			}
			for _, e := range evs {
				if len(e.Data) > providers.MaxNativePayload || len(e.Input) > providers.MaxNativePayload ||
					len(e.Output) > MaxToolOutput+32 || len(e.Message) > maxFailure+32 ||
					(e.Native != nil && len(e.Native.Payload) > providers.MaxNativePayload) {
					t.Fatalf("unbounded event %s", e.Type)
				}
				if e.Type == "" {
					t.Fatalf("event without type")
				}
			}
		}
	})
}

// FuzzScan checks the validating scanner against encoding/json: it must
// accept exactly the valid JSON objects, and decode strings identically.
func FuzzScan(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, `{"a":-0.5e+3}`, `{"a":tru}`,
		`{"a":01}`, `{"a":"\q"}`, "{\"a\":\"\x01\"}", `{"a":1,}`, `[1]`, ` {"a":true} `, `{"a":1}x`,
		`{"\u0074ype":"x"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		wantOK := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '{'
		var got map[string]string
		err := walkObject(data, func(kb, v []byte) error {
			k := string(kb)
			if got == nil {
				got = map[string]string{}
			}
			if len(v) > 0 && v[0] == '"' {
				s, err := jsonString(k, v)
				if err != nil {
					return err
				}
				got[k] = s
			}
			return nil
		})
		if (err == nil) != wantOK {
			t.Fatalf("walkObject(%q) = %v, json.Valid object = %v", data, err, wantOK)
		}
		if err != nil {
			return
		}
		var want map[string]any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		for k, v := range got {
			if ws, ok := want[k].(string); ok && ws != v {
				// encoding/json keeps the last duplicate key; so do we.
				t.Fatalf("key %q: %q, encoding/json %q", k, v, ws)
			}
		}
	})
}
