package fakeanthropic

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads an SSE body into "event:type/delta-type" strings.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	var event string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		v, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var d struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
			} `json:"delta"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(v), &d); err != nil || d.Type != event {
			t.Fatalf("bad data line for event %q: %s (%v)", event, v, err)
		}
		s := event
		if d.Delta.Type != "" {
			s += "/" + d.Delta.Type
		}
		if d.ContentBlock.Type != "" {
			s += "/" + d.ContentBlock.Type
		}
		out = append(out, s)
	}
	return out
}

func TestStream(t *testing.T) {
	s := New(t, Reply{Blocks: []Block{ThinkingBlock("hmm"), TextBlock("hi"), ToolUseBlock("Bash", `{"command":"ls"}`)}})
	resp := post(t, s.URL+"/v1/messages?beta=true", `{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got := strings.Join(events(t, resp.Body), " ")
	want := "message_start ping " +
		"content_block_start/thinking content_block_delta/thinking_delta content_block_delta/thinking_delta content_block_delta/signature_delta content_block_stop " +
		"content_block_start/text content_block_delta/text_delta content_block_delta/text_delta content_block_stop " +
		"content_block_start/tool_use content_block_delta/input_json_delta content_block_delta/input_json_delta content_block_stop " +
		"message_delta message_stop"
	if got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	reqs := s.MessageRequests()
	if len(reqs) != 1 || reqs[0].Model != "m" || !reqs[0].Stream || reqs[0].UserText() != "go\n" {
		t.Fatalf("recorded %+v", reqs)
	}
}

func TestNonStreamingAndCountTokens(t *testing.T) {
	s := New(t, ToolUse("Bash", `{"command":"ls"}`))
	resp := post(t, s.URL+"/v1/messages", `{"model":"m","messages":[]}`)
	var msg struct {
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Name != "Bash" || string(msg.Content[0].Input) != `{"command":"ls"}` {
		t.Fatalf("message %+v", msg)
	}
	resp = post(t, s.URL+"/v1/messages/count_tokens", `{"model":"m","messages":[]}`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), `{"input_tokens":`) {
		t.Fatalf("count_tokens %d %s", resp.StatusCode, b)
	}
}

func TestErrors(t *testing.T) {
	for _, tt := range []struct {
		status int
		typ    string
	}{{401, "authentication_error"}, {529, "overloaded_error"}, {599, "api_error"}} {
		s := New(t, Error(tt.status))
		for range 2 { // sticky
			resp := post(t, s.URL+"/v1/messages", `{"model":"m","stream":true,"messages":[]}`)
			var body struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tt.status || body.Type != "error" || body.Error.Type != tt.typ || body.Error.Message == "" {
				t.Fatalf("status %d body %+v, want %d %s", resp.StatusCode, body, tt.status, tt.typ)
			}
		}
	}
}

func TestQueueWhenAndFallback(t *testing.T) {
	s := New(t, AfterToolResult(Text("after tool")))
	// A request without a tool result gets the fallback, not the queued reply.
	resp := post(t, s.URL+"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "no scripted reply") || s.Pending() != 1 {
		t.Fatalf("fallback: %s pending %d", b, s.Pending())
	}
	resp = post(t, s.URL+"/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out"}]}]}]}`)
	b, _ = io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "after tool") || s.Pending() != 0 {
		t.Fatalf("when: %s", b)
	}
	tr := s.MessageRequests()[1].LastToolResult()
	if len(tr) != 1 || tr[0].ToolUseID != "t1" || tr[0].Content != "out" {
		t.Fatalf("tool result %+v", tr)
	}
}

func TestChunksKeepUTF8(t *testing.T) {
	s := strings.Repeat("é", 100)
	var joined string
	for _, c := range chunks(s, 7) {
		if !strings.HasPrefix(c, "é") && c != "" {
			t.Fatalf("chunk %q splits a rune", c)
		}
		joined += c
	}
	if joined != s {
		t.Fatal("chunks lost data")
	}
}
