package claude

import (
	"context"
	"fmt"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/providers"
	"remote/providers/runner"
)

// BenchmarkShimRealCLI is the shim overhead as a user meets it: the same
// streaming turn of the real Claude Code CLI run with its stdout piped
// directly to the daemon and run under remote-shim, in one run. "paced":
// 200 text blocks 5 ms apart from the fake model (200 events/s, above a
// model's token rate); "burst": the 200 blocks at once (the worst case:
// the CLI's whole output as fast as the pipes take it). It reports events/s and the time from
// Run to the first event of each, and their ratios (direct / shim for
// latency, shim / direct for rate: 1 means no overhead).
//
//	CI=true go test -run '^$' -bench BenchmarkShimRealCLI -benchtime 5x ./providers/claude/
func BenchmarkShimRealCLI(b *testing.B) {
	b.Run("paced", func(b *testing.B) { shimRealCLI(b, 5*time.Millisecond) })
	b.Run("burst", func(b *testing.B) { shimRealCLI(b, 0) })
}

func shimRealCLI(b *testing.B, delay time.Duration) {
	bin := testkit.ClaudeBinary(b)
	shim := &runner.ShimConfig{Binary: testkit.ShimBinary(b), RunsDir: b.TempDir(), Systemd: runner.SystemdNever}
	var blocks []fakeanthropic.Block
	for i := range 200 {
		blocks = append(blocks, fakeanthropic.TextBlock(fmt.Sprintf("token %d ", i)))
	}
	srv := fakeanthropic.New(b)
	home := b.TempDir()
	env := map[string]string{
		"HOME": home, "ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
	}
	run := func(shimmed bool, id int) (rate float64, first time.Duration) {
		srv.Push(fakeanthropic.Reply{Blocks: blocks, Delay: delay})
		l := &runner.HostLauncher{}
		ctx := context.Background()
		var slot *providers.RunSlot
		if shimmed {
			l.Shim = shim
			slot = &providers.RunSlot{RunID: fmt.Sprintf("bench-%d", id), Cursor: providers.NewCursor(false, providers.Pos{}, false)}
			ctx = providers.WithRunSlot(ctx, slot)
		}
		p := New(providers.AdapterConfig{Binary: bin, Host: l, Env: env})
		var t0, t1 time.Time
		n := 0
		start := time.Now()
		err := p.Run(ctx, providers.RunRequest{Prompt: "stream", Cwd: home}, func(ev providers.Event) {
			if ev.Type != providers.EventAssistantDelta {
				return
			}
			if n == 0 {
				t0 = time.Now()
			}
			n++
			t1 = time.Now()
		})
		if slot != nil {
			slot.Release()
		}
		if err != nil || n < 2 {
			b.Fatalf("run (shim %v): %d deltas, %v", shimmed, n, err)
		}
		return float64(n-1) / t1.Sub(t0).Seconds(), t0.Sub(start)
	}
	run(false, -1) // warm the CLI's caches
	var dRate, sRate float64
	var dFirst, sFirst time.Duration
	i := 0
	for b.Loop() {
		r, f := run(false, i)
		dRate, dFirst = dRate+r, dFirst+f
		r, f = run(true, i)
		sRate, sFirst = sRate+r, sFirst+f
		i++
	}
	n := float64(i)
	b.ReportMetric(dRate/n, "direct-events/s")
	b.ReportMetric(sRate/n, "shim-events/s")
	b.ReportMetric(sRate/dRate, "events-ratio")
	b.ReportMetric(float64(dFirst.Milliseconds())/n, "direct-first-ms")
	b.ReportMetric(float64(sFirst.Milliseconds())/n, "shim-first-ms")
	b.ReportMetric(float64(dFirst)/float64(sFirst), "first-ratio")
}
