package claude

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchStream builds a stream shaped like what Claude Code 2.1.328 prints
// (same fields as the real lines): per turn a message_start, many small
// text and thinking deltas each followed by the CLI's own bookkeeping
// fields, the assistant records, a tool call and its result.
func benchStream(turns int) [][]byte {
	const sid = "8b954b74-4df5-42fe-b74c-6216e83bbed7"
	uuid := "4804f87e-574f-4e5e-8056-48aba84650ab"
	var lines [][]byte
	add := func(format string, args ...any) { lines = append(lines, []byte(fmt.Sprintf(format, args...))) }
	add(`{"type":"system","subtype":"init","cwd":"/workspace","session_id":"%s","tools":["Task","Bash","Edit","Read","Write"],"mcp_servers":[],"model":"claude-opus-5-5","permissionMode":"bypassPermissions","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.328","output_style":"default","uuid":"%s"}`, sid, uuid)
	word := "The quick brown fox jumps over a lazy dog. "
	for t := 0; t < turns; t++ {
		mid := fmt.Sprintf("msg_%08d", t)
		add(`{"type":"stream_event","event":{"message":{"content":[],"id":"%s","model":"claude-opus-5-5","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":10,"output_tokens":1}},"type":"message_start"},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s","ttft_ms":110,"api_message_id":"%s"}`, mid, sid, uuid, mid)
		for i := 0; i < 10; i++ {
			add(`{"type":"stream_event","event":{"delta":{"thinking":"%s","type":"thinking_delta"},"index":0,"type":"content_block_delta"},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s","thinking_display":"updates","api_message_id":"%s"}`, word, sid, uuid, mid)
		}
		add(`{"type":"assistant","message":{"content":[{"signature":"sig","thinking":"%s","type":"thinking"}],"id":"%s","model":"claude-opus-5-5","role":"assistant","stop_reason":null,"type":"message","usage":{"input_tokens":10,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"%s","uuid":"%s","request_id":"req_1"}`, strings.Repeat(word, 10), mid, sid, uuid)
		for i := 0; i < 40; i++ {
			add(`{"type":"stream_event","event":{"delta":{"text":"%s","type":"text_delta"},"index":1,"type":"content_block_delta"},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s","api_message_id":"%s"}`, word, sid, uuid, mid)
		}
		add(`{"type":"assistant","message":{"content":[{"text":"%s","type":"text"}],"id":"%s","model":"claude-opus-5-5","role":"assistant","type":"message"},"parent_tool_use_id":null,"session_id":"%s","uuid":"%s"}`, strings.Repeat(word, 40), mid, sid, uuid)
		add(`{"type":"assistant","message":{"content":[{"id":"toolu_%d","input":{"command":"go test ./...","description":"run tests"},"name":"Bash","type":"tool_use"}],"id":"%s","model":"claude-opus-5-5","role":"assistant","type":"message"},"parent_tool_use_id":null,"session_id":"%s","uuid":"%s"}`, t, mid, sid, uuid)
		add(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_%d","type":"tool_result","content":"%s","is_error":false}]},"parent_tool_use_id":null,"session_id":"%s","uuid":"%s","tool_use_result":{"stdout":"ok","stderr":""}}`, t, strings.Repeat("ok  \\tremote/pkg\\t0.1s\\n", 20), sid, uuid)
		add(`{"type":"system","subtype":"status","status":"requesting","session_id":"%s","uuid":"%s"}`, sid, uuid)
	}
	add(`{"type":"result","subtype":"success","is_error":false,"duration_ms":1083,"num_turns":%d,"session_id":"%s","total_cost_usd":0.5,"usage":{"input_tokens":10,"output_tokens":5}}`, turns, sid)
	return lines
}

// BenchmarkParser measures stream-json parsing throughput (MB/s of input
// and events/s).
func BenchmarkParser(b *testing.B) {
	lines := benchStream(200)
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	events := 0
	cpu0 := cpuTime()
	for b.Loop() {
		p := NewParser("")
		for _, l := range lines {
			evs, err := p.ParseLine(l)
			if err != nil {
				b.Fatal(err)
			}
			events += len(evs)
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	reportCPU(b, cpu0, size)
}

// BenchmarkEncodingJSONEnvelope is the alternative the scanner replaced:
// encoding/json decoding the same lines into a struct of the top-level
// fields plus the stream event (no event mapping at all).
func BenchmarkEncodingJSONEnvelope(b *testing.B) {
	lines := benchStream(200)
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	type env struct {
		Type      string          `json:"type"`
		Subtype   string          `json:"subtype"`
		SessionID string          `json:"session_id"`
		Event     json.RawMessage `json:"event"`
		Message   json.RawMessage `json:"message"`
	}
	type ev struct {
		Type  string `json:"type"`
		Delta struct {
			Type, Text, Thinking string
		} `json:"delta"`
	}
	cpu0 := cpuTime()
	for b.Loop() {
		for _, l := range lines {
			var e env
			if err := json.Unmarshal(l, &e); err != nil {
				b.Fatal(err)
			}
			if e.Type == "stream_event" {
				var se ev
				_ = json.Unmarshal(e.Event, &se)
			}
		}
	}
	reportCPU(b, cpu0, size)
}

// cpuTime is the process's user+system CPU time: on a shared machine the
// wall-clock MB/s depends on the neighbours, MB per CPU-second does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the MB/cpu-s metric (GC work included).
func reportCPU(b *testing.B, since time.Duration, size int) {
	if cpu := (cpuTime() - since).Seconds(); cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu, "MB/cpu-s")
	}
}
