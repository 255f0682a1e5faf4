// Package fakeopenai is a fake OpenAI Responses API server for tests: it
// listens on loopback, answers POST /v1/responses with the streaming (SSE)
// event sequence the real API sends, driven by scripted replies, and records
// every request it saw. It also writes the $CODEX_HOME/config.toml that points
// the real Codex CLI at it. It is test support only: it imports nothing of the
// product and must never be imported by non-test product code.
package fakeopenai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ItemKind says what one scripted output item is.
type ItemKind string

// The output item kinds a Reply can stream.
const (
	KindText      ItemKind = "text"      // an assistant message
	KindReasoning ItemKind = "reasoning" // a reasoning item with a summary
	KindShell     ItemKind = "shell"     // a shell tool call the CLI runs
	KindFunction  ItemKind = "function"  // a function call with raw arguments
)

// Item is one output item of a scripted reply.
type Item struct {
	Kind ItemKind
	// Text is the message text (KindText), the reasoning summary
	// (KindReasoning) or the shell command line (KindShell).
	Text string
	// Name and Arguments describe a KindFunction call.
	Name      string
	Arguments string
}

// Text returns an assistant message item.
func Text(s string) Item { return Item{Kind: KindText, Text: s} }

// Reasoning returns a reasoning item whose summary is s.
func Reasoning(s string) Item { return Item{Kind: KindReasoning, Text: s} }

// Shell returns a tool call asking the CLI to run command with its shell
// tool; the server adapts the call to the shell tool the request offered.
func Shell(command string) Item { return Item{Kind: KindShell, Text: command} }

// Function returns a raw function call item.
func Function(name, arguments string) Item {
	return Item{Kind: KindFunction, Name: name, Arguments: arguments}
}

// Usage is the token usage reported in response.completed.
type Usage struct {
	InputTokens     int
	CachedTokens    int
	OutputTokens    int
	ReasoningTokens int
}

// Reply is the scripted answer to one POST /v1/responses.
type Reply struct {
	// Status, when not 0 or 200, answers with that HTTP status and an
	// OpenAI error body built from ErrorCode and ErrorMessage.
	Status       int
	ErrorCode    string
	ErrorMessage string
	// FailCode, when set, streams response.created then response.failed
	// with this error code (e.g. "server_is_overloaded").
	FailCode string
	Items    []Item
	Usage    Usage
	// ChunkSize splits text deltas into pieces of this many bytes
	// (default: the whole text in one delta).
	ChunkSize int
	// ChunkDelay pauses between deltas; with Hang it makes a slow stream.
	ChunkDelay time.Duration
	// Hang keeps the stream open after the items, without completing,
	// until the client goes away or the server closes.
	Hang bool
}

// Request is one request the server received. The Authorization header is
// never recorded; only whether it was present.
type Request struct {
	Method  string
	Path    string
	HasAuth bool
	Body    json.RawMessage
}

// ToolNames returns the names of the tools offered in a Responses request.
func (r Request) ToolNames() []string {
	var body struct {
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(r.Body, &body)
	var out []string
	for _, t := range body.Tools {
		if t.Name != "" {
			out = append(out, t.Name)
		} else {
			out = append(out, t.Type)
		}
	}
	return out
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL Codex needs: http://127.0.0.1:PORT/v1.
	URL string

	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	mu       sync.Mutex
	script   []Reply
	fallback *Reply
	requests []Request
	seq      int
	key      string
}

// RequireAPIKey makes the server answer 401 to any request whose
// Authorization header is not "Bearer key" (empty: accept any).
func (s *Server) RequireAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// ErrNoReply is the error body the server answers when its script is empty
// and no fallback is set.
var ErrNoReply = errors.New("fakeopenai: no scripted reply left")

// Start listens on a random loopback port and serves until Close.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeopenai: listen on loopback: %w", err)
	}
	return Serve(ln), nil
}

// StartOn listens on addr (e.g. "127.0.0.1:18080", or "0.0.0.0:PORT" for
// a container's proxy device to reach) and serves until Close.
func StartOn(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakeopenai: listen on %s: %w", addr, err)
	}
	return Serve(ln), nil
}

// New starts a server on a random loopback port for the test t and closes
// it when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Serve serves on ln (for example a fixed address a container proxy device
// forwards to) until Close. Serve takes ownership of ln.
func Serve(ln net.Listener) *Server {
	s := &Server{
		URL:  "http://" + ln.Addr().String() + "/v1",
		ln:   ln,
		done: make(chan struct{}),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

// Addr is the listener's address (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server and ends hanging streams.
func (s *Server) Close() error {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	return s.srv.Close()
}

// Enqueue appends replies; each POST /v1/responses consumes the next one.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// SetFallback sets the reply used when the script is empty (nil: answer
// 500 with ErrNoReply).
func (s *Server) SetFallback(r *Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = r
}

// Requests returns a copy of every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Pending returns how many scripted replies are still unused.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

const maxBody = 32 << 20

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	rec := Request{Method: r.Method, Path: r.URL.Path, HasAuth: r.Header.Get("Authorization") != ""}
	if json.Valid(body) {
		rec.Body = body
	}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	key := s.key
	s.mu.Unlock()
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, http.StatusUnauthorized, "invalid_api_key", "fakeopenai: wrong or missing API key")
		return
	}

	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		s.responses(w, r, rec)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	default:
		writeError(w, http.StatusNotFound, "not_found", "fakeopenai: no route "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) next() (Reply, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if len(s.script) > 0 {
		r := s.script[0]
		s.script = s.script[1:]
		return r, s.seq, true
	}
	if s.fallback != nil {
		return *s.fallback, s.seq, true
	}
	return Reply{}, s.seq, false
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": code, "code": code, "param": nil,
	}})
	_, _ = w.Write(b)
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request, rec Request) {
	reply, n, ok := s.next()
	if !ok {
		writeError(w, http.StatusInternalServerError, "server_error", ErrNoReply.Error())
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		code, msg := reply.ErrorCode, reply.ErrorMessage
		if code == "" {
			code = "error"
		}
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		writeError(w, reply.Status, code, msg)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(rec.Body, &req)
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	st := &stream{w: w, f: flusher, ctx: r.Context().Done(), done: s.done, delay: reply.ChunkDelay}
	respID := "resp_" + strconv.Itoa(n)
	resp := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(),
		"status": "in_progress", "model": req.Model, "output": []any{}}
	if !st.send("response.created", map[string]any{"response": resp}) {
		return
	}
	if reply.FailCode != "" {
		resp["status"] = "failed"
		resp["error"] = map[string]any{"code": reply.FailCode, "message": "fakeopenai: " + reply.FailCode}
		st.send("response.failed", map[string]any{"response": resp})
		return
	}
	tools := rec.ToolNames()
	var output []any
	for i, it := range reply.Items {
		item, ok := st.item(i, n, it, reply.ChunkSize, tools)
		if !ok {
			return
		}
		output = append(output, item)
	}
	if reply.Hang {
		select {
		case <-st.ctx:
		case <-s.done:
		}
		return
	}
	u := reply.Usage
	resp["status"] = "completed"
	resp["output"] = output
	resp["usage"] = map[string]any{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CachedTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}
	st.send("response.completed", map[string]any{"response": resp})
}

type stream struct {
	w     io.Writer
	f     http.Flusher
	ctx   <-chan struct{}
	done  <-chan struct{}
	delay time.Duration
	seq   int
}

// send writes one SSE event; false means the client went away.
func (st *stream) send(typ string, fields map[string]any) bool {
	fields["type"] = typ
	fields["sequence_number"] = st.seq
	st.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return false
	}
	if _, err := fmt.Fprintf(st.w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		return false
	}
	if st.f != nil {
		st.f.Flush()
	}
	select {
	case <-st.ctx:
		return false
	case <-st.done:
		return false
	default:
	}
	return true
}

func (st *stream) pause() bool {
	if st.delay <= 0 {
		return true
	}
	t := time.NewTimer(st.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-st.ctx:
		return false
	case <-st.done:
		return false
	}
}

func chunks(s string, size int) []string {
	if size <= 0 || len(s) <= size {
		return []string{s}
	}
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// shellCall adapts a command line to the shell tool the request offered.
func shellCall(command string, tools []string) (name, args string) {
	has := func(n string) bool {
		for _, t := range tools {
			if t == n {
				return true
			}
		}
		return false
	}
	var b []byte
	switch {
	case has("shell_command"):
		b, _ = json.Marshal(map[string]any{"command": command})
		name = "shell_command"
	case has("exec_command"):
		b, _ = json.Marshal(map[string]any{"cmd": command})
		name = "exec_command"
	default:
		b, _ = json.Marshal(map[string]any{"command": []string{"bash", "-lc", command}})
		name = "shell"
	}
	return name, string(b)
}

func (st *stream) item(idx, n int, it Item, chunkSize int, tools []string) (any, bool) {
	id := fmt.Sprintf("%d_%d", n, idx)
	switch it.Kind {
	case KindReasoning:
		added := map[string]any{"type": "reasoning", "id": "rs_" + id, "summary": []any{}}
		if !st.send("response.output_item.added", map[string]any{"output_index": idx, "item": added}) {
			return nil, false
		}
		if !st.send("response.reasoning_summary_part.added", map[string]any{"item_id": "rs_" + id,
			"output_index": idx, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}}) {
			return nil, false
		}
		for _, c := range chunks(it.Text, chunkSize) {
			if !st.send("response.reasoning_summary_text.delta", map[string]any{"item_id": "rs_" + id,
				"output_index": idx, "summary_index": 0, "delta": c}) || !st.pause() {
				return nil, false
			}
		}
		done := map[string]any{"type": "reasoning", "id": "rs_" + id,
			"summary": []any{map[string]any{"type": "summary_text", "text": it.Text}}}
		return done, st.send("response.output_item.done", map[string]any{"output_index": idx, "item": done})
	case KindShell, KindFunction:
		name, args := it.Name, it.Arguments
		if it.Kind == KindShell {
			name, args = shellCall(it.Text, tools)
		}
		added := map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id,
			"name": name, "arguments": "", "status": "in_progress"}
		if !st.send("response.output_item.added", map[string]any{"output_index": idx, "item": added}) {
			return nil, false
		}
		done := map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id,
			"name": name, "arguments": args, "status": "completed"}
		return done, st.send("response.output_item.done", map[string]any{"output_index": idx, "item": done})
	default:
		msgID := "msg_" + id
		added := map[string]any{"type": "message", "id": msgID, "role": "assistant",
			"status": "in_progress", "content": []any{}}
		if !st.send("response.output_item.added", map[string]any{"output_index": idx, "item": added}) {
			return nil, false
		}
		if !st.send("response.content_part.added", map[string]any{"item_id": msgID, "output_index": idx,
			"content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}) {
			return nil, false
		}
		for _, c := range chunks(it.Text, chunkSize) {
			if !st.send("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": idx,
				"content_index": 0, "delta": c}) || !st.pause() {
				return nil, false
			}
		}
		done := map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": it.Text, "annotations": []any{}}}}
		return done, st.send("response.output_item.done", map[string]any{"output_index": idx, "item": done})
	}
}

// CodexConfig describes the config.toml WriteCodexConfig writes.
type CodexConfig struct {
	BaseURL  string // e.g. Server.URL
	Provider string // model provider id; default "fake"
	EnvKey   string // variable holding the API key; default "FAKE_OPENAI_API_KEY"
	Model    string // default "gpt-fake"
	// Extra is inserted verbatim (TOML) after the generated top-level keys,
	// so top-level settings such as approval_policy belong here; tables it
	// opens end before the generated ones.
	Extra string
}

// CodexConfigTOML renders the config.toml that makes Codex use the fake
// offline: a custom model provider on the Responses wire API with retries
// off, and the features that reach outside hosts at start-up disabled.
func CodexConfigTOML(c CodexConfig) string {
	if c.Provider == "" {
		c.Provider = "fake"
	}
	if c.EnvKey == "" {
		c.EnvKey = "FAKE_OPENAI_API_KEY"
	}
	if c.Model == "" {
		c.Model = "gpt-fake"
	}
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "model = %s\nmodel_provider = %s\n", q(c.Model), q(c.Provider))
	b.WriteString("check_for_update_on_startup = false\n")
	if c.Extra != "" {
		b.WriteString(c.Extra + "\n")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "[model_providers.%s]\nname = %s\nbase_url = %s\nwire_api = \"responses\"\nenv_key = %s\n",
		c.Provider, q(c.Provider), q(c.BaseURL), q(c.EnvKey))
	b.WriteString("request_max_retries = 0\nstream_max_retries = 0\nstream_idle_timeout_ms = 300000\n\n")
	b.WriteString("[features]\nplugins = false\napps = false\nremote_plugin = false\n")
	return b.String()
}

// WriteCodexConfig writes CodexConfigTOML(c) to codexHome/config.toml,
// creating codexHome (mode 0700) when needed.
func WriteCodexConfig(codexHome string, c CodexConfig) error {
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		return fmt.Errorf("fakeopenai: create codex home %s: %w", codexHome, err)
	}
	p := filepath.Join(codexHome, "config.toml")
	if err := os.WriteFile(p, []byte(CodexConfigTOML(c)), 0o600); err != nil {
		return fmt.Errorf("fakeopenai: write %s: %w", p, err)
	}
	return nil
}
