// Package fakeanthropic is a fake Anthropic Messages API for tests. It
// listens on loopback and answers POST /v1/messages with the real
// server-sent-event sequence (message_start, content_block_start/delta/stop
// for text, thinking and tool_use blocks, message_delta with usage and
// stop_reason, message_stop), or with a whole JSON message when the request
// does not stream, plus POST /v1/messages/count_tokens. Replies come from a
// scripted queue; errors use the real JSON error bodies (401
// authentication_error, 529 overloaded_error, ...). Every request is
// recorded so a test can inspect what the CLI sent.
//
// It is test support only: it imports nothing of the product and must never
// be imported by product code.
package fakeanthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// BlockKind is the type of one content block of a scripted reply.
type BlockKind string

// The content block kinds a Reply can carry.
const (
	KindText     BlockKind = "text"
	KindThinking BlockKind = "thinking"
	KindToolUse  BlockKind = "tool_use"
)

// Block is one content block of a scripted reply.
type Block struct {
	Kind BlockKind
	// Text is the text (KindText) or the thinking (KindThinking).
	Text string
	// ID, Name and Input describe a KindToolUse block; ID is generated
	// when empty. Input is the tool input as JSON text.
	ID, Name, Input string
}

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Kind: KindText, Text: s} }

// ThinkingBlock returns a thinking block (streamed as thinking_delta then
// signature_delta).
func ThinkingBlock(s string) Block { return Block{Kind: KindThinking, Text: s} }

// ToolUseBlock returns a tool_use block calling name with input (JSON).
func ToolUseBlock(name, input string) Block {
	return Block{Kind: KindToolUse, Name: name, Input: input}
}

// Usage is the token usage a reply reports.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Reply is the scripted answer to one POST /v1/messages.
type Reply struct {
	Blocks     []Block
	StopReason string // default end_turn, or tool_use when a tool_use block is present
	Usage      Usage  // default {10, 5}
	Model      string // default: the requested model
	// Status, when non-zero and not 200, makes the reply an API error with
	// that HTTP status and the matching Anthropic error body.
	Status  int
	Message string // error message; a default per status when empty
	// Delay is slept before each content block (and before an error), so
	// a test can cancel mid-stream.
	Delay time.Duration
	// ChunkSize splits text and thinking into deltas of at most this many
	// bytes (default 64 KiB; the first block is always split at least in
	// two so a client sees more than one delta).
	ChunkSize int
	// Sticky keeps the reply at the head of the queue: it answers every
	// later request (e.g. an error a client retries).
	Sticky bool
	// When, if set, must accept the request for this reply to answer it;
	// requests it rejects get the server's fallback reply.
	When func(*Request) bool
}

// Text returns a reply with one text block.
func Text(s string) Reply { return Reply{Blocks: []Block{TextBlock(s)}} }

// Thinking returns a reply that thinks, then answers text.
func Thinking(thinking, text string) Reply {
	return Reply{Blocks: []Block{ThinkingBlock(thinking), TextBlock(text)}}
}

// ToolUse returns a reply that calls tool name with input (JSON text) and
// stops with stop_reason tool_use.
func ToolUse(name, input string) Reply { return Reply{Blocks: []Block{ToolUseBlock(name, input)}} }

// Error returns a sticky reply failing with HTTP status (401, 403, 429,
// 500, 529, ...) and the real API's error body for it.
func Error(status int) Reply { return Reply{Status: status, Sticky: true} }

// AfterToolResult returns r restricted to a request whose last user
// message carries a tool_result: the answer after the CLI ran a tool.
func AfterToolResult(r Reply) Reply {
	r.When = func(req *Request) bool { return len(req.LastToolResult()) > 0 }
	return r
}

// Slow returns r with delay slept before each block.
func Slow(delay time.Duration, r Reply) Reply { r.Delay = delay; return r }

// Request is one recorded request.
type Request struct {
	Method string      `json:"-"`
	Path   string      `json:"-"`
	Query  string      `json:"-"`
	Header http.Header `json:"-"`
	Body   []byte      `json:"-"`
	// Decoded from a /v1/messages body.
	Model    string           `json:"model"`
	Stream   bool             `json:"stream"`
	System   json.RawMessage  `json:"system"`
	Messages []RequestMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
	MaxTokens int `json:"max_tokens"`
}

// RequestMessage is one message of a request's conversation.
type RequestMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of blocks
}

// ContentBlock is one block of a request message's content.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Blocks returns the message content as blocks (a string content becomes
// one text block).
func (m RequestMessage) Blocks() []ContentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var bs []ContentBlock
	_ = json.Unmarshal(m.Content, &bs)
	return bs
}

// ToolNames lists the tools the request offered.
func (r *Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	return out
}

// ToolResult is a tool_result block found in a request.
type ToolResult struct {
	ToolUseID string
	Content   string // text, joined when the content was an array
	IsError   bool
}

// LastToolResult returns the tool_result blocks of the last user message,
// or nil when it has none.
func (r *Request) LastToolResult() []ToolResult {
	if len(r.Messages) == 0 {
		return nil
	}
	last := r.Messages[len(r.Messages)-1]
	if last.Role != "user" {
		return nil
	}
	var out []ToolResult
	for _, b := range last.Blocks() {
		if b.Type != "tool_result" {
			continue
		}
		tr := ToolResult{ToolUseID: b.ToolUseID, IsError: b.IsError}
		var s string
		if json.Unmarshal(b.Content, &s) == nil {
			tr.Content = s
		} else {
			var parts []ContentBlock
			_ = json.Unmarshal(b.Content, &parts)
			for _, p := range parts {
				tr.Content += p.Text
			}
		}
		out = append(out, tr)
	}
	return out
}

// UserText returns the text of every user message's text blocks, joined.
func (r *Request) UserText() string {
	var b strings.Builder
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, c := range m.Blocks() {
			if c.Type == "text" {
				b.WriteString(c.Text)
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// Server is a running fake Messages API.
type Server struct {
	// URL is the base URL to use as ANTHROPIC_BASE_URL (no trailing slash).
	URL string
	// Fallback answers requests when the queue is empty or the head's When
	// rejects them. Default: Text("fakeanthropic: no scripted reply").
	Fallback Reply

	srv *httptest.Server

	mu       sync.Mutex
	queue    []Reply
	requests []*Request
	nextID   int
}

// New starts a server on a random loopback port with the replies queued,
// and closes it when the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakeanthropic: listen: %v", err)
	}
	return NewListener(t, ln, replies...)
}

// NewListener is New on a listener of the caller's choosing (e.g. a fixed
// address a container proxy device forwards to).
func NewListener(t testing.TB, ln net.Listener, replies ...Reply) *Server {
	t.Helper()
	s := &Server{Fallback: Text("fakeanthropic: no scripted reply"), queue: replies}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, cutting open streams.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Push appends replies to the queue.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// MessageRequests returns the recorded POST /v1/messages requests.
func (s *Server) MessageRequests() []*Request {
	var out []*Request
	for _, r := range s.Requests() {
		if r.Path == "/v1/messages" {
			out = append(out, r)
		}
	}
	return out
}

// Pending returns how many non-sticky replies are still queued.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.queue {
		if !r.Sticky {
			n++
		}
	}
	return n
}

func (s *Server) next(req *Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		head := s.queue[0]
		if head.When == nil || head.When(req) {
			if !head.Sticky {
				s.queue = s.queue[1:]
			}
			return head
		}
	}
	return s.Fallback
}

func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return fmt.Sprintf("%s_fake%06d", prefix, s.nextID)
}

const maxBody = 64 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "read body: "+err.Error())
		return
	}
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/messages") {
		if err := json.Unmarshal(body, req); err != nil {
			s.record(req)
			writeError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON: "+err.Error())
			return
		}
	}
	s.record(req)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, max(1, len(body)/4))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		s.answer(w, r, req, s.next(req))
	default:
		writeError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) record(req *Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

// errorTypes are the real API's error types per HTTP status.
var errorTypes = map[int][2]string{
	400: {"invalid_request_error", "Invalid request"},
	401: {"authentication_error", "invalid x-api-key"},
	403: {"permission_error", "Your API key does not have permission to use the specified resource."},
	404: {"not_found_error", "Not found"},
	413: {"request_too_large", "Request exceeds the maximum allowed number of bytes."},
	429: {"rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"},
	500: {"api_error", "Internal server error"},
	529: {"overloaded_error", "Overloaded"},
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_fake")
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
	w.Write(b)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, req *Request, rep Reply) {
	if rep.Status != 0 && rep.Status != http.StatusOK {
		sleep(r, rep.Delay)
		et, ok := errorTypes[rep.Status]
		if !ok {
			et = [2]string{"api_error", fmt.Sprintf("HTTP %d", rep.Status)}
		}
		msg := rep.Message
		if msg == "" {
			msg = et[1]
		}
		writeError(w, rep.Status, et[0], msg)
		return
	}
	model := rep.Model
	if model == "" {
		model = req.Model
	}
	usage := rep.Usage
	if usage == (Usage{}) {
		usage = Usage{InputTokens: 10, OutputTokens: 5}
	}
	stop := rep.StopReason
	blocks := make([]Block, len(rep.Blocks))
	for i, b := range rep.Blocks {
		if b.Kind == KindToolUse {
			if b.ID == "" {
				b.ID = s.newID("toolu")
			}
			if b.Input == "" {
				b.Input = "{}"
			}
			if stop == "" {
				stop = "tool_use"
			}
		}
		blocks[i] = b
	}
	if stop == "" {
		stop = "end_turn"
	}
	msgID := s.newID("msg")
	if !req.Stream {
		writeMessage(w, msgID, model, blocks, stop, usage)
		return
	}
	writeStream(w, r, msgID, model, blocks, stop, usage, rep)
}

func sleep(r *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-r.Context().Done():
	}
}

func blockJSON(b Block, full bool) map[string]any {
	switch b.Kind {
	case KindThinking:
		if full {
			return map[string]any{"type": "thinking", "thinking": b.Text, "signature": signature(b.Text)}
		}
		return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case KindToolUse:
		input := json.RawMessage(b.Input)
		if !full {
			input = json.RawMessage("{}")
		}
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": input}
	default:
		if full {
			return map[string]any{"type": "text", "text": b.Text}
		}
		return map[string]any{"type": "text", "text": ""}
	}
}

func signature(s string) string { return fmt.Sprintf("fakesig%08x", len(s)) }

func writeMessage(w http.ResponseWriter, id, model string, blocks []Block, stop string, usage Usage) {
	content := make([]any, 0, len(blocks))
	for _, b := range blocks {
		content = append(content, blockJSON(b, true))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": usage.InputTokens, "output_tokens": usage.OutputTokens,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		},
	})
}

type sse struct {
	w   io.Writer
	f   http.Flusher
	buf bytes.Buffer
	err error
}

func (e *sse) send(event string, data any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		e.err = err
		return
	}
	e.buf.Reset()
	e.buf.WriteString("event: ")
	e.buf.WriteString(event)
	e.buf.WriteString("\ndata: ")
	e.buf.Write(b)
	e.buf.WriteString("\n\n")
	_, e.err = e.w.Write(e.buf.Bytes())
	if e.f != nil {
		e.f.Flush()
	}
}

func chunks(s string, size int) []string {
	if size <= 0 {
		size = 64 << 10
	}
	if len(s) > 1 && len(s) <= size {
		size = (len(s) + 1) / 2
	}
	var out []string
	for len(s) > size {
		cut := size
		for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 { // keep UTF-8 whole
			cut--
		}
		if cut == 0 {
			cut = size
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

func writeStream(w http.ResponseWriter, r *http.Request, id, model string, blocks []Block, stop string, usage Usage, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	e := &sse{w: w, f: f}
	e.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": usage.InputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		},
	}})
	e.send("ping", map[string]any{"type": "ping"})
	for i, b := range blocks {
		sleep(r, rep.Delay)
		if r.Context().Err() != nil {
			return
		}
		e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": blockJSON(b, false)})
		delta := func(d map[string]any) {
			e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch b.Kind {
		case KindThinking:
			for _, c := range chunks(b.Text, rep.ChunkSize) {
				delta(map[string]any{"type": "thinking_delta", "thinking": c})
			}
			delta(map[string]any{"type": "signature_delta", "signature": signature(b.Text)})
		case KindToolUse:
			for _, c := range chunks(b.Input, rep.ChunkSize) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": c})
			}
		default:
			for _, c := range chunks(b.Text, rep.ChunkSize) {
				delta(map[string]any{"type": "text_delta", "text": c})
			}
		}
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": usage.OutputTokens},
	})
	e.send("message_stop", map[string]any{"type": "message_stop"})
}
