package codexharness

import (
	"fmt"
	"testing"

	"remote/providers"
)

// appServerStream builds a realistic turn: reasoning and agent deltas,
// tool items with output, usage, status changes and native noise.
func appServerStream(turns int) [][]byte {
	var lines [][]byte
	add := func(format string, args ...any) { lines = append(lines, fmt.Appendf(nil, format, args...)) }
	for i := 0; i < turns; i++ {
		add(`{"method":"turn/started","params":{"threadId":"T","turn":{"id":"U","status":"inProgress"}}}`)
		for j := 0; j < 20; j++ {
			add(`{"method":"item/reasoning/summaryTextDelta","params":{"threadId":"T","turnId":"U","itemId":"r%d","delta":"considering the next step of the change ","summaryIndex":0},"emittedAtMs":1796228487458}`, i)
		}
		add(`{"method":"item/started","params":{"threadId":"T","turnId":"U","item":{"type":"commandExecution","id":"c%d","command":"/bin/bash -lc 'go test ./...'","cwd":"/workspace","status":"inProgress","commandActions":[{"type":"unknown","command":"go test ./..."}]}}}`, i)
		add(`{"method":"item/completed","params":{"threadId":"T","turnId":"U","item":{"type":"commandExecution","id":"c%d","command":"/bin/bash -lc 'go test ./...'","cwd":"/workspace","status":"completed","aggregatedOutput":"ok  \tremote/providers\t0.01s\nok  \tremote/daemon\t1.2s\n","exitCode":0}}}`, i)
		for j := 0; j < 60; j++ {
			add(`{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"U","itemId":"m%d","delta":"The tests pass and the parser handles every item type. "},"emittedAtMs":1796228487460}`, i)
		}
		add(`{"method":"item/completed","params":{"threadId":"T","turnId":"U","item":{"type":"agentMessage","id":"m%d","text":"done"}}}`, i)
		add(`{"method":"thread/tokenUsage/updated","params":{"threadId":"T","turnId":"U","tokenUsage":{"total":{"totalTokens":15,"inputTokens":10},"last":{"totalTokens":15,"inputTokens":10,"cachedInputTokens":0,"outputTokens":5,"reasoningOutputTokens":0},"modelContextWindow":258400}}}`)
		add(`{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","primary":null}}}`)
		add(`{"method":"thread/status/changed","params":{"threadId":"T","status":{"type":"idle"}}}`)
	}
	return lines
}

// BenchmarkParseAppServerStream measures decode+parse throughput of an
// app-server stream (MB/s from SetBytes, events/s reported).
func BenchmarkParseAppServerStream(b *testing.B) {
	lines := appServerStream(100)
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	events := 0
	for b.Loop() {
		p := NewParser(providers.Codex)
		p.SetThread("T")
		p.SetTurn("U")
		for _, l := range lines {
			evs, err := p.ParseLine(l)
			if err != nil {
				b.Fatal(err)
			}
			events += len(evs)
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(len(lines)), "lines/op")
}

// BenchmarkParseLongMessage streams a 2 MiB agent message in 32-byte
// deltas then its completed snapshot: the per-item text tracking must stay
// linear in the message size.
func BenchmarkParseLongMessage(b *testing.B) {
	const size, chunk = 2 << 20, 32
	var lines [][]byte
	delta := make([]byte, chunk)
	for i := range delta {
		delta[i] = 'a' + byte(i%26)
	}
	for n := 0; n < size/chunk; n++ {
		lines = append(lines, fmt.Appendf(nil, `{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"U","itemId":"m","delta":%q}}`, delta))
	}
	full := make([]byte, 0, size)
	for n := 0; n < size/chunk; n++ {
		full = append(full, delta...)
	}
	lines = append(lines, fmt.Appendf(nil, `{"method":"item/completed","params":{"threadId":"T","turnId":"U","item":{"id":"m","type":"agentMessage","text":%q}}}`, full))
	total := 0
	for _, l := range lines {
		total += len(l) + 1
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(providers.Codex)
		p.SetThread("T")
		for i, l := range lines {
			evs, err := p.ParseLine(l)
			if err != nil {
				b.Fatal(err)
			}
			if last := i == len(lines)-1; last != (len(evs) == 0) {
				b.Fatalf("line %d gave %d events: each delta one, the whole snapshot none", i, len(evs))
			}
		}
	}
}
