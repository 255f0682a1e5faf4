package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"remote/providers"
)

// MaxToolOutput bounds tool.completed Output; longer output is cut on a
// UTF-8 boundary and marked.
const MaxToolOutput = 256 << 10

// maxTracked bounds the per-run correlation maps (tool names, streamed
// messages); the oldest half is forgotten when full.
const maxTracked = 4096

// sessionNotFoundText is the CLI's message for --resume of an unknown
// session (providers.md §5); the spec allows matching this upstream text.
const sessionNotFoundText = "No conversation found with session ID"

// Usage is the normalized usage carried by run.completed: the run's token
// totals, cost and duration as the CLI's result record reports them.
type Usage struct {
	InputTokens           int64   `json:"inputTokens"`
	CachedInputTokens     int64   `json:"cachedInputTokens"`
	CacheWriteInputTokens int64   `json:"cacheWriteInputTokens,omitempty"`
	OutputTokens          int64   `json:"outputTokens"`
	TotalTokens           int64   `json:"totalTokens"`
	CostUSD               float64 `json:"costUsd"`
	DurationMs            int64   `json:"durationMs,omitempty"`
	Turns                 int64   `json:"turns,omitempty"`
}

// Parser turns Claude Code stream-json lines into normalized events (S18).
// It serves one run and is not safe for concurrent use.
type Parser struct {
	sessionID       string
	model           string
	msgID           string            // message of the current stream events
	streamed        map[string]uint8  // message id → kinds streamed as deltas
	tools           map[string]string // tool_use id → tool name
	sessionNotFound bool
}

const (
	streamedText uint8 = 1 << iota
	streamedThinking
)

// NewParser returns a parser for a run that resumes resumeID (empty for a
// fresh run): a session_id equal to it does not produce session.updated.
func NewParser(resumeID string) *Parser {
	return &Parser{sessionID: resumeID, streamed: map[string]uint8{}, tools: map[string]string{}}
}

// SessionID returns the last native session id seen (or the resume id).
func (p *Parser) SessionID() string { return p.sessionID }

// SessionNotFound reports whether the CLI said the resumed session does not
// exist; the parser then emitted no run.failed for it.
func (p *Parser) SessionNotFound() bool { return p.sessionNotFound }

var _ providers.LineParser = (*Parser)(nil)

// envelope is the top level of every stream-json line.
type envelope struct {
	Type         string          `json:"type"`
	Subtype      string          `json:"subtype"`
	SessionID    string          `json:"session_id"`
	Model        string          `json:"model"`
	APIMessageID string          `json:"api_message_id"`
	Event        json.RawMessage `json:"event"`
	Message      json.RawMessage `json:"message"`
	Error        json.RawMessage `json:"error"`
	// result
	IsError        bool            `json:"is_error"`
	Result         json.RawMessage `json:"result"`
	Errors         json.RawMessage `json:"errors"`
	APIErrorStatus json.RawMessage `json:"api_error_status"`
	TotalCostUSD   float64         `json:"total_cost_usd"`
	DurationMs     int64           `json:"duration_ms"`
	NumTurns       int64           `json:"num_turns"`
	Usage          json.RawMessage `json:"usage"`
	TerminalReason string          `json:"terminal_reason"`
	// rate_limit_event
	RateLimitInfo json.RawMessage `json:"rate_limit_info"`
}

type streamEvent struct {
	Type    string `json:"type"`
	Message struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	} `json:"message"`
	Delta struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"delta"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type message struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
}

// ParseLine parses one stream-json line. Invalid top-level JSON is an
// error (RunProcess logs and skips the line); a malformed nested message
// yields only the session event already derived from the line.
func (p *Parser) ParseLine(line []byte) ([]providers.Event, error) {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("claude stream-json line: %w", err)
	}
	if env.Type == "" {
		return nil, fmt.Errorf("claude stream-json line: no type")
	}
	var evs []providers.Event
	if env.Model != "" && env.Type == "system" {
		p.model = env.Model
	}
	if env.SessionID != "" && env.SessionID != p.sessionID {
		p.sessionID = env.SessionID
		evs = append(evs, providers.Event{Type: providers.EventSessionUpdated, SessionID: env.SessionID, Model: p.model})
	}
	switch env.Type {
	case "stream_event":
		return p.streamEvent(evs, &env), nil
	case "assistant":
		return p.assistant(evs, &env), nil
	case "user":
		return p.user(evs, &env), nil
	case "system":
		return append(evs, providers.Event{Type: providers.EventSystem, Subtype: env.Subtype, Data: boundedRaw(line)}), nil
	case "result":
		return p.result(evs, &env), nil
	default: // rate_limit_event and anything new: keep it, bounded, as native
		payload := env.RateLimitInfo
		if env.Type != "rate_limit_event" || len(payload) == 0 {
			payload = line
		}
		return append(evs, providers.Event{
			Type: providers.EventProviderNative,
			Native: &providers.NativeEnvelope{
				SchemaVersion: providers.NativeSchemaVersion,
				Method:        env.Type,
				ThreadID:      env.SessionID,
				Payload:       boundedRaw(payload),
			},
		}), nil
	}
}

// boundedRaw copies raw when it fits MaxNativePayload, else returns nil.
func boundedRaw(raw []byte) json.RawMessage {
	if len(raw) == 0 || len(raw) > providers.MaxNativePayload {
		return nil
	}
	return append(json.RawMessage(nil), raw...)
}

func (p *Parser) streamEvent(evs []providers.Event, env *envelope) []providers.Event {
	var se streamEvent
	if len(env.Event) == 0 || json.Unmarshal(env.Event, &se) != nil {
		return evs
	}
	if env.APIMessageID != "" {
		p.msgID = env.APIMessageID
	}
	switch se.Type {
	case "message_start":
		if se.Message.ID != "" {
			p.msgID = se.Message.ID
		}
		if se.Message.Model != "" {
			p.model = se.Message.Model
		}
	case "content_block_delta":
		switch se.Delta.Type {
		case "text_delta":
			if se.Delta.Text == "" {
				return evs
			}
			p.markStreamed(streamedText)
			return append(evs, providers.Event{Type: providers.EventAssistantDelta, MessageID: p.msgID, ItemKind: "message", Role: "assistant", Text: se.Delta.Text})
		case "thinking_delta":
			if se.Delta.Thinking == "" {
				return evs
			}
			p.markStreamed(streamedThinking)
			return append(evs, providers.Event{Type: providers.EventReasoningDelta, MessageID: p.msgID, ItemKind: "reasoning", Text: se.Delta.Thinking})
		}
	}
	return evs
}

func (p *Parser) markStreamed(kind uint8) {
	if p.msgID == "" {
		return
	}
	if len(p.streamed) >= maxTracked {
		clear(p.streamed)
	}
	p.streamed[p.msgID] |= kind
}

func (p *Parser) assistant(evs []providers.Event, env *envelope) []providers.Event {
	var m message
	if len(env.Message) == 0 || json.Unmarshal(env.Message, &m) != nil {
		return evs
	}
	var blocks []contentBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return evs
	}
	if m.Model != "" && m.Model != "<synthetic>" {
		p.model = m.Model
	}
	// A synthetic API-error message repeats what the result record
	// reports as run.failed.
	synthetic := m.Model == "<synthetic>" || (len(env.Error) > 0 && !bytes.Equal(env.Error, []byte("null")))
	streamed := p.streamed[m.ID]
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if synthetic || streamed&streamedText != 0 || b.Text == "" {
				continue
			}
			evs = append(evs, providers.Event{Type: providers.EventAssistantDelta, MessageID: m.ID, ItemKind: "message", Role: "assistant", Text: b.Text})
		case "thinking":
			if streamed&streamedThinking != 0 || b.Thinking == "" {
				continue
			}
			evs = append(evs, providers.Event{Type: providers.EventReasoningDelta, MessageID: m.ID, ItemKind: "reasoning", Text: b.Thinking})
		case "tool_use", "server_tool_use":
			if b.ID == "" {
				continue
			}
			if len(p.tools) >= maxTracked {
				clear(p.tools)
			}
			p.tools[b.ID] = b.Name
			input := b.Input
			if len(input) == 0 || len(input) > providers.MaxNativePayload {
				input = json.RawMessage("{}")
			}
			evs = append(evs, providers.Event{
				Type: providers.EventToolStarted, MessageID: m.ID, ItemID: b.ID, ItemKind: "tool_call",
				ToolName: b.Name, Input: append(json.RawMessage(nil), input...),
			})
		}
	}
	return evs
}

func (p *Parser) user(evs []providers.Event, env *envelope) []providers.Event {
	var m message
	if len(env.Message) == 0 || json.Unmarshal(env.Message, &m) != nil {
		return evs
	}
	var blocks []contentBlock
	if len(m.Content) == 0 || m.Content[0] != '[' || json.Unmarshal(m.Content, &blocks) != nil {
		return evs // a plain user text echo, or malformed
	}
	for _, b := range blocks {
		if b.Type != "tool_result" || b.ToolUseID == "" {
			continue
		}
		evs = append(evs, providers.Event{
			Type: providers.EventToolCompleted, ItemID: b.ToolUseID, ItemKind: "tool_call",
			ToolName: p.tools[b.ToolUseID], Output: toolOutput(b.Content), IsError: b.IsError,
		})
		delete(p.tools, b.ToolUseID)
	}
	return evs
}

// toolOutput returns a tool_result's content as text: a string as is, an
// array's text parts joined by newlines, bounded by MaxToolOutput.
func toolOutput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var parts []contentBlock
		if json.Unmarshal(raw, &parts) == nil {
			texts := make([]string, 0, len(parts))
			for _, part := range parts {
				switch part.Type {
				case "text":
					texts = append(texts, part.Text)
				case "image":
					texts = append(texts, "[image]")
				}
			}
			s = strings.Join(texts, "\n")
		}
	}
	return truncate(s, MaxToolOutput)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "\n…[truncated]"
}

type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (p *Parser) result(evs []providers.Event, env *envelope) []providers.Event {
	errs := resultErrors(env.Errors)
	if env.IsError {
		for _, e := range errs {
			if strings.Contains(e, sessionNotFoundText) {
				p.sessionNotFound = true
				return evs
			}
		}
		return append(evs, providers.Event{Type: providers.EventRunFailed, SessionID: env.SessionID, Message: failureMessage(env, errs)})
	}
	var u apiUsage
	_ = json.Unmarshal(env.Usage, &u)
	usage := Usage{
		InputTokens:           u.InputTokens,
		CachedInputTokens:     u.CacheReadInputTokens,
		CacheWriteInputTokens: u.CacheCreationInputTokens,
		OutputTokens:          u.OutputTokens,
		TotalTokens:           u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens + u.OutputTokens,
		CostUSD:               env.TotalCostUSD,
		DurationMs:            env.DurationMs,
		Turns:                 env.NumTurns,
	}
	b, _ := json.Marshal(usage)
	return append(evs, providers.Event{Type: providers.EventRunCompleted, SessionID: env.SessionID, Model: p.model, Usage: b})
}

func resultErrors(raw json.RawMessage) []string {
	var errs []string
	if json.Unmarshal(raw, &errs) == nil {
		return errs
	}
	var objs []struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &objs) == nil {
		for _, o := range objs {
			errs = append(errs, o.Message)
		}
	}
	return errs
}

// maxFailure bounds a run.failed message.
const maxFailure = 4 << 10

func failureMessage(env *envelope, errs []string) string {
	var parts []string
	var result string
	if json.Unmarshal(env.Result, &result) == nil && strings.TrimSpace(result) != "" {
		parts = append(parts, strings.TrimSpace(result))
	}
	for _, e := range errs {
		if e = strings.TrimSpace(e); e != "" && e != result {
			parts = append(parts, e)
		}
	}
	msg := strings.Join(parts, "; ")
	var status int
	if json.Unmarshal(env.APIErrorStatus, &status) == nil && status != 0 {
		if msg == "" {
			msg = fmt.Sprintf("claude API error (HTTP %d)", status)
		} else if !strings.Contains(msg, fmt.Sprint(status)) {
			msg = fmt.Sprintf("%s (HTTP %d)", msg, status)
		}
	}
	if msg == "" {
		msg = "claude run failed"
		if env.Subtype != "" && env.Subtype != "success" {
			msg += ": " + env.Subtype
		} else if env.TerminalReason != "" {
			msg += ": " + env.TerminalReason
		}
	}
	return truncate(msg, maxFailure)
}
