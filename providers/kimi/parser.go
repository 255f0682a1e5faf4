package kimi

import (
	"encoding/json"
	"fmt"
	"strings"

	"remote/providers"
	"remote/providers/runner"
)

// MaxToolOutput bounds tool.completed Output.
const MaxToolOutput = 256 << 10

// maxTracked bounds the tool-call correlation map.
const maxTracked = 4096

// Parser turns Kimi stream-json lines into normalized events. The meta
// session.resume_hint record is Kimi's completion: it yields
// session.updated (when the id is new) and run.completed. It serves one
// run and is not safe for concurrent use.
type Parser struct {
	sessionID string
	completed bool
	tools     map[string]string // tool call id → function name
	msgSeq    int
}

var _ providers.LineParser = (*Parser)(nil)

// NewParser returns a parser for a run that resumes resumeID ("" for a
// fresh one).
func NewParser(resumeID string) *Parser {
	return &Parser{sessionID: resumeID, tools: map[string]string{}}
}

// SessionID returns the session id last reported (or the resume id).
func (p *Parser) SessionID() string { return p.sessionID }

// Completed reports whether the resume hint (the completion) was seen.
func (p *Parser) Completed() bool { return p.completed }

type record struct {
	Role       string          `json:"role"`
	Type       string          `json:"type"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	SessionID  string          `json:"session_id"`
}

type part struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Think string `json:"think"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ParseLine parses one line. Invalid JSON, or JSON that is not an object,
// is an error (the line is skipped); a malformed nested field drops only
// that field's events.
func (p *Parser) ParseLine(line []byte) ([]providers.Event, error) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("kimi stream-json line: %w", err)
	}
	switch r.Role {
	case "assistant":
		return p.assistant(&r), nil
	case "tool":
		if r.ToolCallID == "" {
			return nil, nil
		}
		name := p.tools[r.ToolCallID]
		delete(p.tools, r.ToolCallID)
		text, _ := contentText(r.Content)
		return []providers.Event{{
			Type: providers.EventToolCompleted, ItemID: r.ToolCallID, ItemKind: "tool_call",
			ToolName: name, Output: runner.TruncateOutput(text, MaxToolOutput),
		}}, nil
	case "meta":
		if r.Type == "session.resume_hint" {
			return p.resumeHint(&r), nil
		}
	case "user", "system":
		return nil, nil // echoes of the input
	}
	return []providers.Event{native(r, line)}, nil
}

func native(r record, line []byte) providers.Event {
	method := r.Type
	if method == "" {
		method = r.Role
	}
	if method == "" {
		method = "unknown"
	}
	var payload json.RawMessage
	if len(line) <= providers.MaxNativePayload {
		payload = append(json.RawMessage(nil), line...)
	}
	return providers.Event{Type: providers.EventProviderNative, Native: &providers.NativeEnvelope{
		SchemaVersion: providers.NativeSchemaVersion, Method: method, Payload: payload,
	}}
}

func (p *Parser) resumeHint(r *record) []providers.Event {
	var evs []providers.Event
	if r.SessionID != "" && r.SessionID != p.sessionID {
		p.sessionID = r.SessionID
		evs = append(evs, providers.Event{Type: providers.EventSessionUpdated, SessionID: r.SessionID})
	}
	if p.completed {
		return evs // one completion per run
	}
	p.completed = true
	return append(evs, providers.Event{Type: providers.EventRunCompleted, SessionID: p.sessionID})
}

func (p *Parser) assistant(r *record) []providers.Event {
	p.msgSeq++
	msgID := fmt.Sprintf("kimi-%d", p.msgSeq)
	var evs []providers.Event
	var s string
	if json.Unmarshal(r.Content, &s) == nil {
		if s != "" {
			evs = append(evs, providers.Event{Type: providers.EventAssistantDelta, MessageID: msgID, ItemKind: "message", Role: "assistant", Text: s})
		}
	} else {
		var parts []part
		if json.Unmarshal(r.Content, &parts) == nil {
			for _, pt := range parts {
				switch {
				case pt.Type == "text" && pt.Text != "":
					evs = append(evs, providers.Event{Type: providers.EventAssistantDelta, MessageID: msgID, ItemKind: "message", Role: "assistant", Text: pt.Text})
				case pt.Type == "think" && pt.Think != "":
					evs = append(evs, providers.Event{Type: providers.EventReasoningDelta, MessageID: msgID, ItemKind: "reasoning", Text: pt.Think})
				}
			}
		}
	}
	var calls []toolCall
	if len(r.ToolCalls) > 0 && json.Unmarshal(r.ToolCalls, &calls) == nil {
		for _, c := range calls {
			if c.ID == "" {
				continue
			}
			if len(p.tools) >= maxTracked {
				clear(p.tools)
			}
			p.tools[c.ID] = c.Function.Name
			evs = append(evs, providers.Event{
				Type: providers.EventToolStarted, MessageID: msgID, ItemID: c.ID, ItemKind: "tool_call",
				ToolName: c.Function.Name, Input: arguments(c.Function.Arguments),
			})
		}
	}
	return evs
}

// arguments returns a tool call's arguments as JSON: the documented JSON
// string is unwrapped when it holds JSON, kept as a JSON string otherwise;
// an object passes through. Oversized arguments become {}.
func arguments(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return json.RawMessage("{}")
		}
		if json.Valid([]byte(s)) {
			raw = json.RawMessage(s)
		}
	}
	if len(raw) > providers.MaxNativePayload {
		return json.RawMessage("{}")
	}
	return append(json.RawMessage(nil), raw...)
}

// contentText returns content as text: a string, or the text parts of an
// array joined by newlines.
func contentText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []part
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	texts := make([]string, 0, len(parts))
	for _, pt := range parts {
		if pt.Type == "text" {
			texts = append(texts, pt.Text)
		}
	}
	return strings.Join(texts, "\n"), true
}
