package claude

import (
	"encoding/json"
	"fmt"
	"strings"

	"remote/providers"
	"remote/providers/runner"
)

// MaxToolOutput bounds tool.completed Output; longer output is cut on a
// UTF-8 boundary and marked.
const MaxToolOutput = 256 << 10

// maxTracked bounds the per-run correlation maps (tool names, streamed
// messages); a full map is cleared, so a runaway stream cannot grow it.
const maxTracked = 4096

// sessionNotFoundText is the CLI's message for --resume of an unknown
// session; matching this upstream text is how S23 recognises a lost session.
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
	buf             []providers.Event // reused result slice
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

// envelope is the top level of every stream-json line. Raw fields alias
// the line, which RunProcess reuses: never keep them in an event.
type envelope struct {
	Type, Subtype, SessionID, Model, APIMessageID, TerminalReason string

	// The parser's current ids: an equal value reuses the string.
	lastSession, lastMsgID string

	Event, Message, Error, Result, Errors, APIErrorStatus, Usage, RateLimitInfo []byte

	IsError      bool
	TotalCostUSD float64
	DurationMs   int64
	NumTurns     int64
}

func (env *envelope) decode(line []byte) error {
	return walkObject(line, func(k []byte, v []byte) error {
		var err error
		switch string(k) {
		case "type":
			env.Type, err = jsonStringLike("type", v, recordTypes...)
		case "subtype":
			env.Subtype, err = jsonString("subtype", v)
		case "session_id":
			env.SessionID, err = jsonStringLike("session_id", v, env.lastSession)
		case "model":
			env.Model, err = jsonString("model", v)
		case "api_message_id":
			env.APIMessageID, err = jsonStringLike("api_message_id", v, env.lastMsgID)
		case "terminal_reason":
			env.TerminalReason, err = jsonString("terminal_reason", v)
		case "event":
			env.Event = v
		case "message":
			env.Message = v
		case "error":
			env.Error = v
		case "result":
			env.Result = v
		case "errors":
			env.Errors = v
		case "api_error_status":
			env.APIErrorStatus = v
		case "usage":
			env.Usage = v
		case "rate_limit_info":
			env.RateLimitInfo = v
		case "is_error":
			env.IsError, err = jsonBool("is_error", v)
		case "total_cost_usd":
			env.TotalCostUSD, err = jsonFloat("total_cost_usd", v)
		case "duration_ms":
			env.DurationMs, err = jsonInt("duration_ms", v)
		case "num_turns":
			env.NumTurns, err = jsonInt("num_turns", v)
		}
		return err
	})
}

type streamEvent struct {
	Type       string
	Message    []byte
	DeltaType  string
	DeltaText  string // text_delta text or thinking_delta thinking
	HasMessage bool
}

// recordTypes and eventTypes are the type names the parser meets on
// nearly every line; decoding them reuses these strings.
var (
	recordTypes = []string{"stream_event", "assistant", "user", "system", "result"}
	eventTypes  = []string{"content_block_delta", "content_block_start", "content_block_stop", "message_start", "message_delta", "message_stop"}
	deltaTypes  = []string{"text_delta", "thinking_delta", "input_json_delta", "signature_delta"}
)

func (se *streamEvent) decode(raw []byte) error {
	var delta []byte
	err := walkObject(raw, func(k []byte, v []byte) error {
		var err error
		switch string(k) {
		case "type":
			se.Type, err = jsonStringLike("type", v, eventTypes...)
		case "message":
			se.Message = v
		case "delta":
			delta = v
		}
		return err
	})
	if err != nil || delta == nil || string(delta) == "null" {
		return err
	}
	var text, thinking []byte
	err = walkObject(delta, func(k []byte, v []byte) error {
		var err error
		switch string(k) {
		case "type":
			se.DeltaType, err = jsonStringLike("type", v, deltaTypes...)
		case "text":
			text = v
		case "thinking":
			thinking = v
		}
		return err
	})
	if err != nil {
		return err
	}
	switch se.DeltaType {
	case "text_delta":
		se.DeltaText, err = jsonString("text", text)
	case "thinking_delta":
		se.DeltaText, err = jsonString("thinking", thinking)
	}
	return err
}

// contentBlock is one block of a message's content. Text and Thinking
// stay raw until needed; raw fields alias the line.
type contentBlock struct {
	Type, ID, Name, ToolUseID string
	Text, Thinking, Input     []byte
	Content                   []byte
	IsError                   bool
}

func (b *contentBlock) decode(raw []byte) error {
	return walkObject(raw, func(k []byte, v []byte) error {
		var err error
		switch string(k) {
		case "type":
			b.Type, err = jsonString("type", v)
		case "id":
			b.ID, err = jsonString("id", v)
		case "name":
			b.Name, err = jsonString("name", v)
		case "tool_use_id":
			b.ToolUseID, err = jsonString("tool_use_id", v)
		case "text":
			b.Text = v
		case "thinking":
			b.Thinking = v
		case "input":
			b.Input = v
		case "content":
			b.Content = v
		case "is_error":
			b.IsError, err = jsonBool("is_error", v)
		}
		return err
	})
}

// message is the message of an assistant or user record.
type message struct {
	ID, Model string
	Content   []byte
}

func (m *message) decode(raw []byte) error {
	return walkObject(raw, func(k []byte, v []byte) error {
		var err error
		switch string(k) {
		case "id":
			m.ID, err = jsonString("id", v)
		case "model":
			m.Model, err = jsonString("model", v)
		case "content":
			m.Content = v
		}
		return err
	})
}

// blocks decodes content as an array of blocks; a malformed array or
// block fails the whole content, as a malformed nested message.
func blocks(content []byte) ([]contentBlock, error) {
	var out []contentBlock
	err := walkArray(content, func(v []byte) error {
		var b contentBlock
		if err := b.decode(v); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

// ParseLine parses one stream-json line. Invalid top-level JSON is an
// error (RunProcess logs and skips the line); a malformed nested message
// yields only the session event already derived from the line.
//
// The returned slice is reused by the next call (RunProcess emits the
// events before reading on); copy it to keep it.
func (p *Parser) ParseLine(line []byte) ([]providers.Event, error) {
	evs, err := p.parse(line, p.buf[:0])
	if cap(evs) <= 16 { // bounded: a rare huge line does not pin memory
		p.buf = evs[:0]
	}
	return evs, err
}

func (p *Parser) parse(line []byte, evs []providers.Event) ([]providers.Event, error) {
	env := envelope{lastSession: p.sessionID, lastMsgID: p.msgID}
	if err := env.decode(line); err != nil {
		return nil, fmt.Errorf("claude stream-json line: %w", err)
	}
	if env.Type == "" {
		return nil, fmt.Errorf("claude stream-json line: no type")
	}
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
	if len(env.Event) == 0 || se.decode(env.Event) != nil {
		return evs
	}
	if env.APIMessageID != "" {
		p.msgID = env.APIMessageID
	}
	switch se.Type {
	case "message_start":
		var m message
		if m.decode(se.Message) != nil {
			return evs
		}
		if m.ID != "" {
			p.msgID = m.ID
		}
		if m.Model != "" {
			p.model = m.Model
		}
	case "content_block_delta":
		if se.DeltaText == "" {
			return evs
		}
		switch se.DeltaType {
		case "text_delta":
			p.markStreamed(streamedText)
			return append(evs, providers.Event{Type: providers.EventAssistantDelta, MessageID: p.msgID, ItemKind: "message", Role: "assistant", Text: se.DeltaText})
		case "thinking_delta":
			p.markStreamed(streamedThinking)
			return append(evs, providers.Event{Type: providers.EventReasoningDelta, MessageID: p.msgID, ItemKind: "reasoning", Text: se.DeltaText})
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
	if len(env.Message) == 0 || m.decode(env.Message) != nil {
		return evs
	}
	blocks, err := blocks(m.Content)
	if err != nil {
		return evs
	}
	if m.Model != "" && m.Model != "<synthetic>" {
		p.model = m.Model
	}
	// A synthetic API-error message repeats what the result record
	// reports as run.failed.
	synthetic := m.Model == "<synthetic>" || (len(env.Error) > 0 && string(env.Error) != "null")
	streamed := p.streamed[m.ID]
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if synthetic || streamed&streamedText != 0 {
				continue
			}
			if text, _ := jsonString("text", b.Text); text != "" {
				evs = append(evs, providers.Event{Type: providers.EventAssistantDelta, MessageID: m.ID, ItemKind: "message", Role: "assistant", Text: text})
			}
		case "thinking":
			if streamed&streamedThinking != 0 {
				continue
			}
			if thinking, _ := jsonString("thinking", b.Thinking); thinking != "" {
				evs = append(evs, providers.Event{Type: providers.EventReasoningDelta, MessageID: m.ID, ItemKind: "reasoning", Text: thinking})
			}
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
	if len(env.Message) == 0 || m.decode(env.Message) != nil {
		return evs
	}
	if len(m.Content) == 0 || m.Content[0] != '[' {
		return evs // a plain user text echo
	}
	blocks, err := blocks(m.Content)
	if err != nil {
		return evs
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
func toolOutput(raw []byte) string {
	s, err := jsonString("content", raw)
	if err != nil {
		parts, _ := blocks(raw)
		texts := make([]string, 0, len(parts))
		for _, part := range parts {
			switch part.Type {
			case "text":
				text, _ := jsonString("text", part.Text)
				texts = append(texts, text)
			case "image":
				texts = append(texts, "[image]")
			}
		}
		s = strings.Join(texts, "\n")
	}
	return runner.TruncateOutput(s, MaxToolOutput)
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
				// The id on this line is not a session the user can
				// resume: report nothing, the adapter returns
				// ErrSessionNotFound.
				p.sessionNotFound = true
				return nil
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
	return runner.TruncateOutput(msg, maxFailure)
}
