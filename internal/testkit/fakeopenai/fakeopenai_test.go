package fakeopenai

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// sse posts one Responses request and returns the SSE event types and
// their data, in order.
func sse(t *testing.T, ctx context.Context, s *Server, body string) (int, []string, []map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var data []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			types = append(types, v)
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(v), &m); err != nil {
				t.Fatalf("bad data line %q: %v", v, err)
			}
			data = append(data, m)
		}
	}
	return resp.StatusCode, types, data
}

func TestScriptedReplies(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Enqueue(
		Reply{Items: []Item{Reasoning("hm"), Text("hello"), Shell("ls")}, ChunkSize: 2, Usage: Usage{InputTokens: 3, OutputTokens: 4}},
		Reply{Status: 401, ErrorCode: "invalid_api_key"},
		Reply{FailCode: "server_is_overloaded"},
	)
	tests := []struct {
		name   string
		status int
		types  []string
	}{
		{"items", 200, []string{"response.created",
			"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta", "response.output_item.done",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_item.done",
			"response.output_item.added", "response.output_item.done",
			"response.completed"}},
		{"http error", 401, nil},
		{"in-stream failure", 200, []string{"response.created", "response.failed"}},
		{"script exhausted", 500, nil},
	}
	body := `{"model":"m","stream":true,"tools":[{"type":"function","name":"shell_command"}]}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, types, data := sse(t, context.Background(), s, body)
			if status != tt.status || strings.Join(types, ",") != strings.Join(tt.types, ",") {
				t.Fatalf("status %d events %v", status, types)
			}
			if tt.name == "items" {
				last := data[len(data)-1]["response"].(map[string]any)
				if u := last["usage"].(map[string]any); u["total_tokens"].(float64) != 7 {
					t.Fatalf("usage %v", u)
				}
				call := data[len(data)-2]["item"].(map[string]any)
				if call["name"] != "shell_command" || call["arguments"] != `{"command":"ls"}` {
					t.Fatalf("shell call %v", call)
				}
			}
		})
	}
	if got := len(s.Requests()); got != 4 {
		t.Fatalf("recorded %d requests", got)
	}
	if !s.Requests()[0].HasAuth || len(s.Requests()[0].ToolNames()) != 1 {
		t.Fatalf("request record %+v", s.Requests()[0])
	}
}

func TestRequireAPIKey(t *testing.T) {
	s := New(t)
	s.RequireAPIKey("other")
	s.SetFallback(&Reply{Items: []Item{Text("x")}})
	if status, _, _ := sse(t, context.Background(), s, `{}`); status != 401 {
		t.Fatalf("status %d, want 401", status)
	}
	s.RequireAPIKey("k")
	if status, _, _ := sse(t, context.Background(), s, `{}`); status != 200 {
		t.Fatalf("status %d, want 200", status)
	}
}

func TestHangEndsWithClient(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	s, err := StartOn(addr)
	if err != nil {
		t.Skipf("port %s taken again: %v", addr, err)
	}
	defer s.Close()
	if s.URL != "http://"+addr+"/v1" || s.Addr() != addr {
		t.Fatalf("URL %s for address %s", s.URL, addr)
	}
	s.Enqueue(Reply{Items: []Item{Text("slow")}, Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/responses", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, v)
			if v == "response.output_item.done" {
				cancel() // the client goes away; the stream must end
			}
		}
	}
	if len(types) == 0 || types[len(types)-1] != "response.output_item.done" {
		t.Fatalf("hanging stream events %v", types)
	}
}

func TestCodexConfig(t *testing.T) {
	home := filepath.Join(t.TempDir(), "codex")
	if err := WriteCodexConfig(home, CodexConfig{BaseURL: "http://127.0.0.1:1/v1", Extra: "approval_policy = \"never\""}); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Model          string `toml:"model"`
		ModelProvider  string `toml:"model_provider"`
		ApprovalPolicy string `toml:"approval_policy"`
		ModelProviders map[string]struct {
			BaseURL           string `toml:"base_url"`
			WireAPI           string `toml:"wire_api"`
			EnvKey            string `toml:"env_key"`
			RequestMaxRetries int    `toml:"request_max_retries"`
			StreamMaxRetries  int    `toml:"stream_max_retries"`
		} `toml:"model_providers"`
		Features map[string]bool `toml:"features"`
	}
	b, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := toml.Decode(string(b), &cfg); err != nil {
		t.Fatalf("config.toml does not parse: %v\n%s", err, b)
	}
	mp := cfg.ModelProviders["fake"]
	if cfg.ModelProvider != "fake" || mp.BaseURL != "http://127.0.0.1:1/v1" || mp.WireAPI != "responses" ||
		mp.EnvKey != "FAKE_OPENAI_API_KEY" || cfg.ApprovalPolicy != "never" {
		t.Fatalf("config %+v", cfg)
	}
	for _, f := range []string{"plugins", "apps", "remote_plugin"} {
		if v, ok := cfg.Features[f]; !ok || v {
			t.Fatalf("feature %s = %v, %v; want false", f, v, ok)
		}
	}
}
