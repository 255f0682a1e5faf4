package projectapi

import (
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/probe"
	"remote/providers/runner"
)

// looseFirstEvent creates a loose Claude chat, sends its first prompt
// and returns the time from the prompt to the CLI's first event.
func looseFirstEvent(b *testing.B, ts *testServer, model *fakeanthropic.Server) time.Duration {
	b.Helper()
	chat := ts.createChat("alice", "claude")
	took := promptToFirstEvent(b, ts, chat.ID, model)
	ts.waitIdle(chat.ID)
	return took
}

// BenchmarkFirstPromptWarm (docs/benchmarks.md, "A new project's first prompt
// with a warm container"): a new project's first Claude prompt to the CLI's
// first event with [projects] warm = 1 (a warm container ready before the
// project is created; the pool refills between iterations, outside the timer),
// against a loose chat's first prompt on the same CLI and fake model (host
// launcher), and a new project's first prompt without a pool; one iteration
// measures all three in turn. Metrics: the three times in ms, warm/loose (goal ≤
// 1.3) and cold/warm.
//
//	CI=true go test -run '^$' -bench BenchmarkFirstPromptWarm -benchtime 5x ./daemon/projectapi/
func BenchmarkFirstPromptWarm(b *testing.B) {
	st := testStore(b, providers.Claude)
	warmEnv, warmModel, _ := claudeEnv(b, st, false, false, func(o *projectEnvOpts) { o.warm = 1 })
	coldEnv, coldModel, _ := claudeEnv(b, st, false, false)
	bin := testkit.ClaudeBinary(b)
	looseModel := fakeanthropic.New(b)
	p := claude.New(providers.AdapterConfig{Binary: bin, Host: &runner.HostLauncher{},
		Env: map[string]string{"HOME": b.TempDir(), "ANTHROPIC_BASE_URL": looseModel.URL, "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}})
	loose := newTestServer(b, []providers.Provider{p})
	probe.Warm(b.Context(), []providers.Provider{p}) // as remoted does at start-up
	// Once each outside the timer (page cache, image cache, readiness).
	waitWarm(b, warmEnv.warm, 1)
	firstEvent(b, warmEnv, warmModel)
	firstEvent(b, coldEnv, coldModel)
	looseFirstEvent(b, loose, looseModel)
	var warmT, coldT, looseT time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitWarm(b, warmEnv.warm, 1)
		b.StartTimer()
		// Loose first: the pool is full and idle then, so the refill a
		// claim starts (5 s later) cannot share the cores with it.
		looseT += looseFirstEvent(b, loose, looseModel)
		warmT += firstEvent(b, warmEnv, warmModel)
		coldT += firstEvent(b, coldEnv, coldModel)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(warmT.Milliseconds())/n, "warm-ms")
	b.ReportMetric(float64(looseT.Milliseconds())/n, "loose-ms")
	b.ReportMetric(float64(coldT.Milliseconds())/n, "cold-ms")
	b.ReportMetric(float64(warmT)/float64(looseT), "warm/loose")
	b.ReportMetric(float64(coldT)/float64(warmT), "cold/warm")
}
