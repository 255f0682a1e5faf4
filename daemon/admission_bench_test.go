package daemon

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/fakeopenai"
	"remote/providers"
	"remote/providers/claude"
	"remote/providers/codex"
	"remote/providers/probe"
	"remote/providers/runner"
)

// admissionTTL is the benchmark's readiness TTL (and Codex's model-list
// TTL): far shorter than a run, so most prompts come after it and find a
// stale answer (refreshed in the background) rather than a fresh one.
const admissionTTL = time.Second

// benchNice is remoted's default [agent] nice: the CLIs and their
// readiness checks run that much nicer than the daemon.
const benchNice = 10

// BenchmarkPromptAdmission: loose-chat prompts to a fresh daemon (the real
// Claude Code CLI, the real Codex app-server, against the fake model
// servers), each sent once the previous run has ended; the readiness TTL
// is 1 s, so most prompts come after it. Metrics per provider, in ms: p50
// and p99 of POST …/prompt to its 202 (post-202) and to the stored user
// event (post-user), and the slowest 202 (the first prompt may wait for
// the start-up readiness check). Goal: p99 ≤ 20 ms (docs/benchmarks.md, "Prompt admission").
// REMOTE_BENCH_PROMPTS sets the prompts per daemon (default 200).
//
//	CI=true go test -run '^$' -bench BenchmarkPromptAdmission -benchtime 1x ./daemon/
func BenchmarkPromptAdmission(b *testing.B) {
	prompts := 200
	if s := os.Getenv("REMOTE_BENCH_PROMPTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("REMOTE_BENCH_PROMPTS=%q: want a positive number", s)
		}
		prompts = n
	}
	b.Run("claude", func(b *testing.B) {
		bin := testkit.ClaudeBinary(b)
		fake := fakeanthropic.New(b)
		benchAdmission(b, prompts, "claude", func() providers.Provider {
			return claude.New(providers.AdapterConfig{Binary: bin, Host: &runner.HostLauncher{Nice: benchNice}, ReadyTTL: admissionTTL,
				Env: map[string]string{"HOME": b.TempDir(), "ANTHROPIC_BASE_URL": fake.URL, "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}})
		})
	})
	b.Run("codex", func(b *testing.B) {
		bin := testkit.CodexBinary(b)
		model, err := fakeopenai.Start()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = model.Close() })
		model.SetFallback(&fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("ok")}})
		benchAdmission(b, prompts, "codex", func() providers.Provider {
			codexHome := b.TempDir()
			if err := fakeopenai.WriteCodexConfig(codexHome, fakeopenai.CodexConfig{BaseURL: model.URL}); err != nil {
				b.Fatal(err)
			}
			return codex.NewWithOptions(providers.AdapterConfig{Binary: bin, Host: &runner.HostLauncher{Nice: benchNice}, ReadyTTL: admissionTTL,
				Env: map[string]string{"CODEX_HOME": codexHome, "HOME": b.TempDir(), "FAKE_OPENAI_API_KEY": "test-key"}},
				codex.Options{ModelsTTL: admissionTTL})
		})
	})
}

// benchAdmission sends prompts to one chat of a fresh daemon per
// iteration (warmed in the background as remoted warms it) and reports
// the percentiles over every prompt of every iteration.
func benchAdmission(b *testing.B, prompts int, id string, newProvider func() providers.Provider) {
	var accepted, stored []time.Duration
	for range b.N {
		b.StopTimer()
		p := newProvider()
		ts := newTestServer(b, []providers.Provider{p})
		users := make(chan time.Time, 1)
		ts.srv.hub.Observe(func(_ string, ev api.Event) {
			if ev.Type == api.EventUser {
				users <- time.Now()
			}
		})
		go probe.Warm(b.Context(), []providers.Provider{p}) // as remoted does at start-up
		chat := ts.createChat("alice", id)
		b.StartTimer()
		for i := range prompts {
			t0 := time.Now()
			st, body := ts.do(http.MethodPost, "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: fmt.Sprintf("prompt %d", i)})
			accepted = append(accepted, time.Since(t0))
			if st != http.StatusAccepted {
				b.Fatalf("prompt %d: %d %s", i, st, body)
			}
			stored = append(stored, (<-users).Sub(t0))
			b.StopTimer()
			ts.waitIdle(chat.ID)
			if evs := ts.events(chat.ID); evs[len(evs)-1].Type != api.EventComplete {
				b.Fatalf("prompt %d: the run ended with %+v", i, evs[len(evs)-1])
			}
			b.StartTimer()
		}
		b.StopTimer()
		ts.stop()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(percentile(accepted, 50)), "p50-post-202-ms")
	b.ReportMetric(ms(percentile(accepted, 99)), "p99-post-202-ms")
	b.ReportMetric(ms(percentile(stored, 50)), "p50-post-user-ms")
	b.ReportMetric(ms(percentile(stored, 99)), "p99-post-user-ms")
	b.ReportMetric(ms(slices.Max(accepted)), "max-post-202-ms")
	b.ReportMetric(0, "ns/op")
}

// percentile is the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}
