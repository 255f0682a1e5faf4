package projection

import (
	"encoding/json"
	"time"

	"remote/api"
	"remote/providers"
)

// Event turns one normalized agent event into the chat event the
// table in docs/api.md prescribes (S17). ok is false for agent events that
// are not projected (run.started and unknown types). provider fills an
// empty ev.Provider; now stamps events that carry no time.
func Event(ev providers.Event, provider providers.ProviderID, now time.Time) (api.Event, bool) {
	if ev.Provider == "" {
		ev.Provider = provider
	}
	out := api.Event{T: ev.T, InteractionID: ev.InteractionID, Status: ev.Status}
	if out.T == 0 {
		out.T = now.UnixMilli()
	}
	if ev.Native != nil {
		if b, err := json.Marshal(ev.Native); err == nil {
			out.Native = b
		}
		out.TurnID = ev.Native.TurnID
	}
	switch ev.Type {
	case providers.EventSessionUpdated:
		out.Type = api.EventSession
		out.Provider = string(ev.Provider)
		out.SessionID = ev.SessionID
	case providers.EventSystem:
		out.Type = api.EventSystem
		out.Subtype = ev.Subtype
		out.Data = ev.Data
	case providers.EventAssistantDelta, providers.EventReasoningDelta:
		out.Type = api.EventAssistantText
		if ev.Type == providers.EventReasoningDelta {
			out.Type = api.EventThinking
		}
		out.Text = ev.Text
		out.MessageID = ev.MessageID
		if out.MessageID == "" {
			out.MessageID = ev.ItemID
		}
	case providers.EventToolStarted:
		out.Type = api.EventToolUseStart
		out.ID = ev.ItemID
		out.Name = ev.ToolName
		out.Input = jsonObject(ev.Input)
	case providers.EventToolCompleted:
		out.Type = api.EventToolUseEnd
		out.ID = ev.ItemID
		out.Output = ev.Output
		out.IsError = ev.IsError
	case providers.EventInteractionRequest:
		out.Type = api.EventInteractionRequest
		out.ID = ev.InteractionID
		out.Name = ev.ToolName
		out.Input = ev.Input
	case providers.EventInteractionResolved:
		out.Type = api.EventInteractionResolved
		out.ID = ev.InteractionID
		out.Name = ev.ToolName
	case providers.EventTurnStatus, providers.EventRunInterrupted:
		out.Type = api.EventTurnStatus
		out.Provider = string(ev.Provider)
		out.Data = ev.Data
		if ev.Type == providers.EventRunInterrupted && out.Status == "" {
			out.Status = "interrupted"
		}
	case providers.EventCollaboration:
		out.Type = api.EventCollaboration
		out.ID = ev.ItemID
		out.Name = ev.ToolName
		out.Data = ev.Data
	case providers.EventProviderNative:
		out.Type = api.EventProviderEvent
		if ev.Native != nil {
			out.Name = ev.Native.Method
		}
		out.Data = ev.Data
	case providers.EventUsageUpdated:
		out.Type = api.EventUsageUpdate
		out.Usage = wireUsage(ev.Usage)
	case providers.EventRunCompleted:
		out.Type = api.EventComplete
		out.Provider = string(ev.Provider)
		out.Usage = wireUsage(ev.Usage)
	case providers.EventRunFailed, providers.EventError:
		out.Type = api.EventError
		out.Message = ev.Message
		if out.Message == "" {
			out.Message = ev.Text
		}
		if out.Message == "" {
			out.Message = string(ev.Provider) + " run failed"
		}
	default: // run.started and anything unknown are not projected
		return api.Event{}, false
	}
	return out, true
}

// jsonObject keeps raw when it is a JSON object, wraps another valid JSON
// value as {"value": raw} and turns nothing or invalid JSON into {},
// because clients rely on tool_use_start.input being an object.
func jsonObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil && m != nil {
		return raw
	}
	if !json.Valid(raw) {
		return json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"value": raw})
	return b
}

// usageNames maps the providers' normalized token counts to the names the
// original frontend reads on complete and usage_update events (docs/api.md).
var usageNames = map[string]string{
	"inputTokens":           "input_tokens",
	"outputTokens":          "output_tokens",
	"cachedInputTokens":     "cache_read_input_tokens",
	"cacheWriteInputTokens": "cache_creation_input_tokens",
}

// wireUsage renames the token counts of a usage object to the wire names;
// other fields stay as they are. Anything but a JSON object passes through.
func wireUsage(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	for from, to := range usageNames {
		if v, ok := m[from]; ok {
			delete(m, from)
			if _, taken := m[to]; !taken {
				m[to] = v
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}
