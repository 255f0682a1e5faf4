package codexharness

import (
	"encoding/json"
	"fmt"
	"strings"

	"remote/providers"
)

// MaxToolOutput bounds the output text of one tool.completed event; longer
// output keeps its head and a truncation note.
const MaxToolOutput = 256 << 10

// maxTracked bounds the in-flight items whose emitted text is remembered.
const maxTracked = 1024

// Terminal states of a turn (turn.status on turn/completed).
const (
	StatusCompleted   = "completed"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
)

// StatusRetrying is the transient turn.status of a Codex retry notice
// (an `error` notification with willRetry); its Message is Codex's text.
const StatusRetrying = "retrying"

// Usage is the normalized token usage carried by usage.updated and
// run.completed: the last model call's breakdown (S20) and the context
// window the server reported.
type Usage struct {
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens,omitempty"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	ModelContextWindow    int64 `json:"modelContextWindow,omitempty"`
}

// Parser turns app-server notifications into normalized events (S20). It
// remembers the text already emitted per item so that a completed snapshot
// contributes only its missing suffix, the latest usage, and the parent
// thread's terminal turn state. A Parser serves one run; it is not safe for
// concurrent use.
type Parser struct {
	provider providers.ProviderID
	thread   string                      // the parent thread; empty until known
	turn     string                      // the parent turn; empty until known
	emitted  map[string]*strings.Builder // item key → text emitted so far
	started  map[string]bool             // tool items whose tool.started was emitted
	withheld map[string]bool             // agent messages moderation hid or blocked
	usage    json.RawMessage
	held     *providers.Event // a terminal error, folded into run.failed
	status   string           // terminal turn status once the parent turn completed
}

// NewParser returns a parser whose events name provider.
func NewParser(provider providers.ProviderID) *Parser {
	return &Parser{provider: provider, emitted: map[string]*strings.Builder{}, started: map[string]bool{},
		withheld: map[string]bool{}}
}

// SetThread names the parent thread. Events of other threads become
// collaboration events and never end the run.
func (p *Parser) SetThread(id string) { p.thread = id }

// SetTurn names the parent turn. Token usage reported for another turn (a
// resumed thread replays its last usage) is kept as provider.native so it
// is never counted for this run.
func (p *Parser) SetTurn(id string) { p.turn = id }

// Terminal returns the parent turn's final status after its turn/completed
// was parsed.
func (p *Parser) Terminal() (status string, done bool) { return p.status, p.status != "" }

// Usage returns the last usage seen (nil before any).
func (p *Parser) Usage() json.RawMessage { return p.usage }

// ParseLine implements providers.LineParser for one app-server line:
// notifications are parsed; a server request becomes an interaction.request
// event (Run also keeps it pending); responses yield nothing.
func (p *Parser) ParseLine(line []byte) ([]providers.Event, error) {
	m, err := DecodeMessage(line)
	if err != nil {
		return nil, err
	}
	switch m.Kind {
	case KindNotification:
		return p.Parse(m), nil
	case KindRequest:
		return []providers.Event{p.interactionRequest(m)}, nil
	}
	return nil, nil
}

var _ providers.LineParser = (*Parser)(nil)

// common notification params.
type baseParams struct {
	ThreadID string          `json:"threadId"`
	TurnID   string          `json:"turnId"`
	ItemID   string          `json:"itemId"`
	Delta    string          `json:"delta"`
	Index    *int            `json:"summaryIndex"`
	CIndex   *int            `json:"contentIndex"`
	Item     json.RawMessage `json:"item"`
	Turn     json.RawMessage `json:"turn"`
}

type item struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Summary          []string        `json:"summary"`
	Content          json.RawMessage `json:"content"`
	Status           string          `json:"status"`
	Command          string          `json:"command"`
	Cwd              string          `json:"cwd"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Namespace        string          `json:"namespace"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            json.RawMessage `json:"error"`
	ContentItems     json.RawMessage `json:"contentItems"`
	Success          *bool           `json:"success"`
	Query            string          `json:"query"`
	Moderation       json.RawMessage `json:"moderation"`
}

type turn struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// ignored are known notifications that carry nothing a chat keeps: the
// output deltas of tools (their completed item carries the whole output)
// and the announcement of a reasoning part (its deltas follow).
var ignored = map[string]bool{
	"item/commandExecution/outputDelta": true,
	"item/fileChange/outputDelta":       true,
	"item/reasoning/summaryPartAdded":   true,
}

// childDeltas are streaming notifications dropped for child threads: their
// completed items carry the whole text as collaboration events.
var childDeltas = map[string]bool{
	"item/agentMessage/delta":         true,
	"item/plan/delta":                 true,
	"item/reasoning/summaryTextDelta": true,
	"item/reasoning/textDelta":        true,
}

// Parse maps one notification to events. Unknown methods and item types,
// and known ones whose params do not decode, become provider.native.
func (p *Parser) Parse(m Message) []providers.Event {
	if m.Kind != KindNotification {
		return nil
	}
	var bp baseParams
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &bp) != nil {
		return []providers.Event{p.native(m, bp)}
	}
	if bp.ThreadID == "" && len(bp.Item) == 0 && len(bp.Turn) == 0 && m.Method != "error" &&
		m.Method != "thread/tokenUsage/updated" && !strings.HasPrefix(m.Method, "item/") {
		// Thread-less notifications (warnings, rate limits, ...).
		return []providers.Event{p.native(m, bp)}
	}
	if ignored[m.Method] {
		return nil
	}
	if p.thread != "" && bp.ThreadID != "" && bp.ThreadID != p.thread {
		if childDeltas[m.Method] {
			return nil
		}
		return []providers.Event{p.collaboration(m, bp)}
	}
	switch m.Method {
	case "item/agentMessage/delta", "item/plan/delta":
		if p.withheld[bp.ItemID] {
			return nil // moderation already hid or blocked this answer
		}
		return p.delta(providers.EventAssistantDelta, "message", bp.ItemID, bp.ItemID, bp.Delta, m, bp)
	case "item/reasoning/summaryTextDelta":
		return p.delta(providers.EventReasoningDelta, "reasoning", bp.ItemID, reasoningKey(bp.ItemID, "s", bp.Index), bp.Delta, m, bp)
	case "item/reasoning/textDelta":
		return p.delta(providers.EventReasoningDelta, "reasoning", bp.ItemID, reasoningKey(bp.ItemID, "c", bp.CIndex), bp.Delta, m, bp)
	case "item/started", "item/completed":
		var it item
		if len(bp.Item) == 0 || json.Unmarshal(bp.Item, &it) != nil || it.Type == "" {
			return []providers.Event{p.native(m, bp)}
		}
		return p.item(m, bp, it)
	case "thread/tokenUsage/updated":
		return p.tokenUsage(m, bp)
	case "turn/started":
		var t turn
		_ = json.Unmarshal(bp.Turn, &t)
		if p.turn == "" {
			p.turn = t.ID
		}
		return []providers.Event{{Type: providers.EventTurnStatus, Status: nonEmpty(t.Status, "inProgress"),
			Data: mustJSON(map[string]string{"turnId": t.ID}), Native: p.envelope(m, bp, false)}}
	case "thread/status/changed":
		var sp struct {
			Status json.RawMessage `json:"status"`
		}
		var st struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Params, &sp) != nil || json.Unmarshal(sp.Status, &st) != nil || st.Type == "" {
			return []providers.Event{p.native(m, bp)}
		}
		return []providers.Event{{Type: providers.EventTurnStatus, Status: st.Type,
			Data: bound(sp.Status), Native: p.envelope(m, bp, false)}}
	case "turn/completed":
		return p.turnCompleted(m, bp)
	case "error":
		return p.errorEvent(m, bp)
	}
	return []providers.Event{p.native(m, bp)}
}

func reasoningKey(itemID, kind string, idx *int) string {
	i := 0
	if idx != nil {
		i = *idx
	}
	return fmt.Sprintf("%s/%s/%d", itemID, kind, i)
}

func (p *Parser) delta(typ providers.EventType, kind, itemID, key, text string, m Message, bp baseParams) []providers.Event {
	if text == "" {
		return nil
	}
	b, ok := p.emitted[key]
	if !ok && len(p.emitted) < maxTracked {
		b = &strings.Builder{}
		p.emitted[key] = b
	}
	if b != nil {
		b.WriteString(text)
	}
	return []providers.Event{{Type: typ, ItemID: itemID, MessageID: itemID, ItemKind: kind, Role: "assistant",
		Text: text, Native: p.envelope(m, bp, false)}}
}

// suffix returns the part of a completed snapshot not yet emitted for key
// and forgets key. A snapshot that does not extend what was streamed adds
// nothing: a chat never shows the same text twice.
func (p *Parser) suffix(key, full string) string {
	b, seen := p.emitted[key]
	delete(p.emitted, key)
	if !seen {
		return full
	}
	if prev := b.String(); strings.HasPrefix(full, prev) {
		return full[len(prev):]
	}
	return ""
}

func (p *Parser) item(m Message, bp baseParams, it item) []providers.Event {
	completed := m.Method == "item/completed"
	env := p.envelope(m, bp, false)
	env.ItemID = it.ID
	switch it.Type {
	case "userMessage":
		return nil
	case "agentMessage", "plan":
		var out []providers.Event
		if len(it.Moderation) > 0 && string(it.Moderation) != "null" && !p.withheld[it.ID] {
			ev, withhold := p.moderation(it, env)
			if withhold && len(p.withheld) < maxTracked {
				p.withheld[it.ID] = true
			}
			if ev != nil {
				out = append(out, *ev)
			}
		}
		if p.withheld[it.ID] {
			if completed {
				delete(p.emitted, it.ID)
			}
			return out
		}
		if !completed {
			return out
		}
		if s := p.suffix(it.ID, it.Text); s != "" {
			return append(out, providers.Event{Type: providers.EventAssistantDelta, ItemID: it.ID, MessageID: it.ID,
				ItemKind: "message", Role: "assistant", Text: s, Native: env})
		}
		return out
	case "reasoning":
		if !completed {
			return nil
		}
		var out []providers.Event
		for i, s := range it.Summary {
			if rest := p.suffix(reasoningKey(it.ID, "s", &i), s); rest != "" {
				out = append(out, providers.Event{Type: providers.EventReasoningDelta, ItemID: it.ID, MessageID: it.ID,
					ItemKind: "reasoning", Role: "assistant", Text: rest, Native: env})
			}
		}
		var content []string
		_ = json.Unmarshal(it.Content, &content)
		for i, s := range content {
			if rest := p.suffix(reasoningKey(it.ID, "c", &i), s); rest != "" {
				out = append(out, providers.Event{Type: providers.EventReasoningDelta, ItemID: it.ID, MessageID: it.ID,
					ItemKind: "reasoning", Role: "assistant", Text: rest, Native: env})
			}
		}
		return out
	case "collabAgentToolCall", "collabToolCall":
		return []providers.Event{{Type: providers.EventCollaboration, ItemID: it.ID, ToolName: nonEmpty(it.Tool, it.Type),
			Status: it.Status, Data: bound(bp.Item), Native: env}}
	}
	name, input, ok := toolStart(it)
	if !ok {
		return []providers.Event{p.native(m, bp)}
	}
	start := providers.Event{Type: providers.EventToolStarted, ItemID: it.ID, ItemKind: "tool_call",
		ToolName: name, Input: input, Status: it.Status, Native: env}
	if !completed {
		if len(p.started) < maxTracked {
			p.started[it.ID] = true
		}
		return []providers.Event{start}
	}
	var out []providers.Event
	if !p.started[it.ID] {
		out = append(out, start)
	}
	delete(p.started, it.ID)
	output, isErr := toolResult(it)
	return append(out, providers.Event{Type: providers.EventToolCompleted, ItemID: it.ID, ItemKind: "tool_call",
		ToolName: name, Output: truncate(output, MaxToolOutput), IsError: isErr, Status: it.Status, Native: env})
}

// toolStart names a tool item and its input; ok is false for item types
// the parser does not know.
func toolStart(it item) (name string, input json.RawMessage, ok bool) {
	switch it.Type {
	case "commandExecution":
		return "Bash", mustJSON(map[string]string{"command": it.Command, "cwd": it.Cwd}), true
	case "fileChange":
		return "Patch", mustJSON(map[string]json.RawMessage{"changes": orNull(bound(it.Changes))}), true
	case "mcpToolCall":
		return it.Server + "/" + it.Tool, objectOr(it.Arguments), true
	case "dynamicToolCall":
		name := it.Tool
		if it.Namespace != "" {
			name = it.Namespace + "/" + it.Tool
		}
		return name, objectOr(it.Arguments), true
	case "webSearch":
		return "WebSearch", mustJSON(map[string]string{"query": it.Query}), true
	}
	return "", nil, false
}

func failedStatus(s string) bool {
	switch s {
	case "failed", "declined", "denied", "cancelled", "canceled":
		return true
	}
	return false
}

func toolResult(it item) (string, bool) {
	isErr := failedStatus(it.Status)
	switch it.Type {
	case "commandExecution":
		out := ""
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		}
		if it.ExitCode != nil && *it.ExitCode != 0 {
			isErr = true
		}
		return out, isErr
	case "fileChange":
		var changes []struct {
			Path string          `json:"path"`
			Kind json.RawMessage `json:"kind"`
		}
		_ = json.Unmarshal(it.Changes, &changes)
		var b strings.Builder
		for _, c := range changes {
			kind := strings.Trim(string(c.Kind), `"`)
			var k struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(c.Kind, &k) == nil && k.Type != "" {
				kind = k.Type
			}
			fmt.Fprintf(&b, "%s %s\n", kind, c.Path)
		}
		return b.String(), isErr
	case "mcpToolCall":
		if e := nonNull(it.Error); e != nil {
			var em struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(e, &em)
			return nonEmpty(em.Message, string(e)), true
		}
		var r struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(it.Result, &r)
		return contentText(r.Content), isErr
	case "dynamicToolCall":
		if it.Success != nil && !*it.Success {
			isErr = true
		}
		return contentText(it.ContentItems), isErr
	}
	return "", isErr
}

// contentText joins the text of an array of content parts.
func contentText(raw json.RawMessage) string {
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func (p *Parser) tokenUsage(m Message, bp baseParams) []providers.Event {
	var tp struct {
		TokenUsage struct {
			Last struct {
				TotalTokens           int64 `json:"totalTokens"`
				InputTokens           int64 `json:"inputTokens"`
				CachedInputTokens     int64 `json:"cachedInputTokens"`
				CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
				OutputTokens          int64 `json:"outputTokens"`
				ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
			} `json:"last"`
			ModelContextWindow int64 `json:"modelContextWindow"`
		} `json:"tokenUsage"`
	}
	if json.Unmarshal(m.Params, &tp) != nil || p.turn == "" || (bp.TurnID != "" && bp.TurnID != p.turn) {
		return []providers.Event{p.native(m, bp)}
	}
	l := tp.TokenUsage.Last
	u := Usage{InputTokens: l.InputTokens, CachedInputTokens: l.CachedInputTokens,
		CacheWriteInputTokens: l.CacheWriteInputTokens, OutputTokens: l.OutputTokens,
		ReasoningOutputTokens: l.ReasoningOutputTokens, TotalTokens: l.TotalTokens,
		ModelContextWindow: tp.TokenUsage.ModelContextWindow}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.InputTokens + u.OutputTokens
	}
	p.usage = mustJSON(u)
	return []providers.Event{{Type: providers.EventUsageUpdated, Usage: p.usage, Native: p.envelope(m, bp, false)}}
}

func (p *Parser) turnCompleted(m Message, bp baseParams) []providers.Event {
	var t turn
	if json.Unmarshal(bp.Turn, &t) != nil {
		return []providers.Event{p.native(m, bp)}
	}
	env := p.envelope(m, bp, false)
	env.TurnID = t.ID
	p.status = nonEmpty(t.Status, "unknown")
	held := p.held
	p.held = nil
	var out []providers.Event
	switch t.Status {
	case StatusCompleted:
		out = appendHeld(out, held)
		return append(out, providers.Event{Type: providers.EventRunCompleted, Usage: p.usage, Status: t.Status, Native: env})
	case StatusInterrupted:
		out = appendHeld(out, held)
		return append(out, providers.Event{Type: providers.EventRunInterrupted, Status: t.Status, Native: env})
	}
	msg := ""
	if t.Error != nil {
		msg = t.Error.Message
	}
	if held != nil {
		if msg == "" {
			msg = held.Message
		} else if msg != held.Message {
			out = append(out, *held)
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("turn ended with status %q", t.Status)
	}
	p.status = StatusFailed
	return append(out, providers.Event{Type: providers.EventRunFailed, Message: msg, Status: nonEmpty(t.Status, "unknown"), Native: env})
}

func appendHeld(out []providers.Event, held *providers.Event) []providers.Event {
	if held != nil {
		out = append(out, *held)
	}
	return out
}

// Flush returns a terminal error still held back because no turn/completed
// followed it (the run ended another way); nil when there is none.
func (p *Parser) Flush() []providers.Event {
	held := p.held
	p.held = nil
	return appendHeld(nil, held)
}

func (p *Parser) errorEvent(m Message, bp baseParams) []providers.Event {
	var ep struct {
		Error struct {
			Message        string          `json:"message"`
			CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
		} `json:"error"`
		WillRetry bool `json:"willRetry"`
	}
	if json.Unmarshal(m.Params, &ep) != nil || ep.Error.Message == "" {
		return []providers.Event{p.native(m, bp)}
	}
	if ep.WillRetry {
		// A notice that Codex retries ("Reconnecting... 2/5", "waiting for
		// network") is transient: a turn status, never an error event.
		data, _ := json.Marshal(map[string]any{"message": ep.Error.Message, "willRetry": true,
			"codexErrorInfo": nonNull(ep.Error.CodexErrorInfo)})
		return []providers.Event{{Type: providers.EventTurnStatus, Status: StatusRetrying, Message: ep.Error.Message,
			Data: bound(data), Native: p.envelope(m, bp, false)}}
	}
	ev := providers.Event{Type: providers.EventError, Message: ep.Error.Message,
		Data: bound(nonNull(ep.Error.CodexErrorInfo)), Native: p.envelope(m, bp, false)}
	// A terminal error precedes the failed turn/completed that repeats it:
	// hold it so the chat shows the failure once (run.failed).
	ev.Status = "terminal"
	prev := p.held
	p.held = &ev
	return appendHeld(nil, prev)
}

func (p *Parser) collaboration(m Message, bp baseParams) providers.Event {
	ev := providers.Event{Type: providers.EventCollaboration, ToolName: m.Method, ItemID: bp.ItemID,
		Data: bound(m.Params), Native: p.envelope(m, bp, false)}
	var it item
	if len(bp.Item) > 0 && json.Unmarshal(bp.Item, &it) == nil {
		ev.ItemID, ev.Status = it.ID, it.Status
	}
	var t turn
	if len(bp.Turn) > 0 && json.Unmarshal(bp.Turn, &t) == nil {
		ev.Status = t.Status
	}
	return ev
}

func (p *Parser) native(m Message, bp baseParams) providers.Event {
	return providers.Event{Type: providers.EventProviderNative, Native: p.envelope(m, bp, true)}
}

func (p *Parser) interactionRequest(m Message) providers.Event {
	var bp baseParams
	_ = json.Unmarshal(m.Params, &bp)
	env := p.envelope(m, bp, true)
	env.RequestID = m.ID
	return providers.Event{Type: providers.EventInteractionRequest, InteractionID: m.ID, ToolName: m.Method,
		ItemID: bp.ItemID, Input: objectOr(bound(m.Params)), Status: "pending", Native: env}
}

// envelope builds the versioned native envelope; the payload (params) is
// kept only when withPayload, bounded by providers.MaxNativePayload.
func (p *Parser) envelope(m Message, bp baseParams, withPayload bool) *providers.NativeEnvelope {
	env := &providers.NativeEnvelope{SchemaVersion: providers.NativeSchemaVersion, Method: m.Method,
		ThreadID: bp.ThreadID, TurnID: bp.TurnID, ItemID: bp.ItemID}
	if env.ItemID == "" && len(bp.Item) > 0 {
		var it struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(bp.Item, &it) == nil {
			env.ItemID = it.ID
		}
	}
	if withPayload {
		env.Payload = bound(m.Params)
	}
	return env
}

// bound returns raw, or a small placeholder object when raw exceeds
// providers.MaxNativePayload.
func bound(raw json.RawMessage) json.RawMessage {
	if len(raw) <= providers.MaxNativePayload {
		return raw
	}
	return mustJSON(map[string]any{"truncated": true, "bytes": len(raw)})
}

func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", cut, len(s))
}

func objectOr(raw json.RawMessage) json.RawMessage {
	if len(raw) > 0 && raw[0] == '{' {
		return raw
	}
	if len(nonNull(raw)) == 0 {
		return json.RawMessage("{}")
	}
	return mustJSON(map[string]json.RawMessage{"value": raw})
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

func nonEmpty(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// Moderation notices (system events of subtype "moderation").
const (
	ModerationHiddenNotice = "This answer was hidden by moderation."
	ModerationBlockedText  = "This answer was blocked by moderation"
)

// moderation reads an agent message's moderation (Codex's
// AgentMessageModeration). Two shapes are known: the new one,
// {"moderated":true,"display":{"action":"hide"|"block","blockType":…}},
// and the old one, {"display":"hide"|"block","reason":…}. "hide" withholds
// the answer and says so; "block" withholds it and gives the reason
// (blockType, reason or message). Whatever else is there (unknown actions,
// unknown shapes) is passed on as provider.native; a message that is not
// moderated ({"moderated":false}) is shown as usual.
func (p *Parser) moderation(it item, env *providers.NativeEnvelope) (*providers.Event, bool) {
	var mod struct {
		Moderated *bool           `json:"moderated"`
		Display   json.RawMessage `json:"display"`
		Reason    string          `json:"reason"`
		Message   string          `json:"message"`
	}
	native := &providers.Event{Type: providers.EventProviderNative, Native: &providers.NativeEnvelope{
		SchemaVersion: providers.NativeSchemaVersion, Method: "item/moderation", ThreadID: env.ThreadID,
		TurnID: env.TurnID, ItemID: it.ID, Payload: bound(it.Moderation)}}
	if json.Unmarshal(it.Moderation, &mod) != nil {
		return native, false
	}
	var action, reason string
	var asString string
	var asObject struct {
		Action    string `json:"action"`
		BlockType string `json:"blockType"`
		Reason    string `json:"reason"`
	}
	switch {
	case len(mod.Display) == 0 || string(mod.Display) == "null":
		if mod.Moderated != nil && !*mod.Moderated {
			return nil, false
		}
		return native, false
	case json.Unmarshal(mod.Display, &asString) == nil: // old shape
		action, reason = asString, nonEmpty(mod.Reason, mod.Message)
	case json.Unmarshal(mod.Display, &asObject) == nil && asObject.Action != "": // new shape
		action, reason = asObject.Action, nonEmpty(asObject.Reason, nonEmpty(asObject.BlockType, nonEmpty(mod.Reason, mod.Message)))
	default:
		return native, false
	}
	var notice string
	switch action {
	case "hide":
		notice = ModerationHiddenNotice
	case "block":
		notice = ModerationBlockedText + "."
		if reason != "" {
			notice = ModerationBlockedText + ": " + reason
		}
	default:
		return native, false
	}
	data := mustJSON(map[string]string{"action": action, "messageId": it.ID, "notice": notice, "reason": reason})
	return &providers.Event{Type: providers.EventSystem, Subtype: "moderation", ItemID: it.ID, MessageID: it.ID,
		Text: notice, Status: action, Data: data, Native: env}, true
}
