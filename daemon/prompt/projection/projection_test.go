package projection

import (
	"encoding/json"
	"testing"
	"time"

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
			got, ok := Event(tt.in, providers.Claude, now)
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

// TestWireUsageRenames: the token counts get their wire names; a wire name
// already present wins; anything but a JSON object passes through.
func TestWireUsageRenames(t *testing.T) {
	for in, want := range map[string]string{
		`{"inputTokens":5,"outputTokens":7,"cachedInputTokens":1,"cacheWriteInputTokens":2,"other":3}`: `{"cache_creation_input_tokens":2,"cache_read_input_tokens":1,"input_tokens":5,"other":3,"output_tokens":7}`,
		`{"inputTokens":5,"input_tokens":9}`: `{"input_tokens":9}`,
		`null`:                               `null`,
		`[1,2]`:                              `[1,2]`,
		`{}`:                                 `{}`,
		``:                                   ``,
	} {
		if got := string(wireUsage([]byte(in))); got != want {
			t.Errorf("wireUsage(%s) = %s, want %s", in, got, want)
		}
	}
}
