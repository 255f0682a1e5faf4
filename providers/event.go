package providers

import "encoding/json"

// EventType is a normalized agent event type (S17).
type EventType string

// The normalized agent event types of S17.
const (
	EventRunStarted          EventType = "run.started"
	EventRunCompleted        EventType = "run.completed"
	EventRunInterrupted      EventType = "run.interrupted"
	EventRunFailed           EventType = "run.failed"
	EventSessionUpdated      EventType = "session.updated"
	EventSystem              EventType = "system"
	EventAssistantDelta      EventType = "assistant.delta"
	EventReasoningDelta      EventType = "reasoning.delta"
	EventToolStarted         EventType = "tool.started"
	EventToolCompleted       EventType = "tool.completed"
	EventUsageUpdated        EventType = "usage.updated"
	EventError               EventType = "error"
	EventProviderNative      EventType = "provider.native"
	EventInteractionRequest  EventType = "interaction.request"
	EventInteractionResolved EventType = "interaction.resolved"
	EventTurnStatus          EventType = "turn.status"
	EventCollaboration       EventType = "collaboration"
)

// NativeSchemaVersion is the version of NativeEnvelope written today.
const NativeSchemaVersion = 1

// MaxNativePayload bounds NativeEnvelope.Payload; adapters truncate or drop
// larger payloads so persisted events stay small.
const MaxNativePayload = 64 << 10

// NativeEnvelope keeps the provider-native data that must survive
// persistence, with its correlation ids, bounded by MaxNativePayload.
type NativeEnvelope struct {
	SchemaVersion int             `json:"schemaVersion"`
	Method        string          `json:"method,omitempty"`
	ThreadID      string          `json:"threadId,omitempty"`
	TurnID        string          `json:"turnId,omitempty"`
	ItemID        string          `json:"itemId,omitempty"`
	RequestID     string          `json:"requestId,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// Event is one normalized agent event. Which fields are set depends on
// Type; the projection into chat events is the table in docs/api.md.
type Event struct {
	T              int64           `json:"t,omitempty"` // unix ms; the daemon fills it when zero
	Type           EventType       `json:"type"`
	Provider       ProviderID      `json:"provider,omitempty"`
	ConversationID string          `json:"conversationId,omitempty"`
	RunID          string          `json:"runId,omitempty"`
	SessionID      string          `json:"sessionId,omitempty"`
	MessageID      string          `json:"messageId,omitempty"`
	ItemID         string          `json:"itemId,omitempty"`
	ItemKind       string          `json:"itemKind,omitempty"`
	Role           string          `json:"role,omitempty"`
	Text           string          `json:"text,omitempty"`
	Message        string          `json:"message,omitempty"`
	Subtype        string          `json:"subtype,omitempty"`
	Model          string          `json:"model,omitempty"`
	ToolName       string          `json:"toolName,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Output         string          `json:"output,omitempty"`
	IsError        bool            `json:"isError,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
	Usage          json.RawMessage `json:"usage,omitempty"`
	// Raw is diagnostic only and never persisted.
	Raw           json.RawMessage `json:"-"`
	Native        *NativeEnvelope `json:"native,omitempty"`
	InteractionID string          `json:"interactionId,omitempty"`
	Status        string          `json:"status,omitempty"`
}

// StampEvents returns an emit that fills, on each event that leaves them
// empty, the provider, and req's conversation and run ids, then passes the
// event to emit. Fields an event already carries are kept.
func StampEvents(emit func(Event), provider ProviderID, req RunRequest) func(Event) {
	conversationID, runID := req.ConversationID, req.RunID
	return func(ev Event) {
		if ev.Provider == "" {
			ev.Provider = provider
		}
		if ev.ConversationID == "" {
			ev.ConversationID = conversationID
		}
		if ev.RunID == "" {
			ev.RunID = runID
		}
		emit(ev)
	}
}
