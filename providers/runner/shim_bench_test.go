package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
)

// BenchmarkShimOverhead streams a run of JSON lines through RunProcess
// twice per iteration, once piped directly (HostLauncher, as
// before remote-shim) and once under the shim, and reports events/s
// (first to last event) and the first event's latency (from the start,
// the shim's own start included) of each, and their ratios (shim/direct
// for events/s, direct/shim for latency; 1 = no overhead). The flood and
// lines children also run, in the same iteration, piped through one more
// process that only copies (`| cat`): what any relay between the CLI and
// the daemon costs on this machine, spool or not (relay-events-ratio,
// cat/direct); and through one that also spools, as the shim does
// (`| tee FILE`: tee-events-ratio, tee/direct). Every child also runs
// as a spool run would with no shim process: the daemon's own child, its
// pipe spliced into a spool file and read back by the reader
// (splice-events-ratio: spliceLauncher).
func BenchmarkShimOverhead(b *testing.B) {
	const line = `{"type":"assistant.delta","text":"a streamed token or two of an agent answer"}`
	// flood: 200000 lines written in 8 KiB blocks as fast as the pipes
	// take them; lines: 20000 lines written one write(2) each, as a CLI
	// that flushes every event writes them.
	b.Run("flood", func(b *testing.B) {
		shimOverhead(b, 200000, `yes '`+line+`' | head -n 200000`)
	})
	b.Run("lines", func(b *testing.B) {
		shimOverhead(b, 20000, `i=0; while [ $i -lt 20000 ]; do echo '`+line+`'; i=$((i+1)); done`)
	})
	// stream: an agent CLI streaming: 1000 events, one write each, 1 ms
	// apart (1000 events/s, well above a model's token rate).
	b.Run("stream", func(b *testing.B) {
		shimOverheadCmd(b, 1000, childCommand(b, "stream", "CHILD_LINES=1000", "CHILD_EVERY=1ms", "CHILD_LINE="+line))
	})
}

func shimOverhead(b *testing.B, lines int, script string) {
	env := []string{"PATH=" + os.Getenv("PATH")}
	relays := []relay{
		{"relay-events-ratio", providers.Command{Path: "sh", Args: []string{"-c", "(" + script + ") | cat"}, Env: env}},
		// A relay that also spools, as the shim does: tee(1) copies to a
		// file and to its stdout.
		{"tee-events-ratio", providers.Command{Path: "sh", Args: []string{"-c", "(" + script + `) | tee "$1"`, "sh", filepath.Join(b.TempDir(), "spool")}, Env: env}},
	}
	shimOverheadCmd(b, lines, providers.Command{Path: "sh", Args: []string{"-c", script}, Env: env}, relays...)
}

// relay is cmd piped through one more process, run directly; metric names
// its events/s ratio to cmd's run directly.
type relay struct {
	metric string
	cmd    providers.Command
}

// shimOverheadCmd runs cmd directly and under the shim, and the relays
// directly, each iteration.
func shimOverheadCmd(b *testing.B, lines int, cmd providers.Command, relays ...relay) {
	cfg := &ShimConfig{Binary: testkit.ShimBinary(b), RunsDir: b.TempDir(), Systemd: SystemdNever}
	parser := fakeParser{parse: func(line []byte) ([]providers.Event, error) {
		return []providers.Event{{Type: providers.EventAssistantDelta, Text: string(line[9:19])}}, nil
	}}
	spoolDir := b.TempDir()
	run := func(mode string, cmd providers.Command) (rate float64, first, fromCLI time.Duration) {
		var l providers.Launcher = &HostLauncher{}
		ctx := context.Background()
		var slot *providers.RunSlot
		switch mode {
		case "splice":
			l = spliceLauncher{dir: spoolDir}
		case "shim":
			l = &HostLauncher{Shim: cfg}
			slot = &providers.RunSlot{RunID: newRunID(nil), Cursor: providers.NewCursor(false, providers.Pos{}, false)}
			ctx = providers.WithRunSlot(ctx, slot)
		}
		n := 0
		var t0, t1 time.Time
		start := time.Now()
		emit := func(providers.Event) {
			if n == 0 {
				t0 = time.Now()
			}
			n++
			t1 = time.Now()
		}
		var started time.Time
		timed := launcherFunc(func(ctx context.Context, c providers.Command) (providers.Process, error) {
			p, err := l.Start(ctx, c)
			started = time.Now()
			return p, err
		})
		err := RunProcess(ctx, timed, cmd, parser, emit, ProcessOptions{})
		if slot != nil {
			slot.Release()
		}
		if err != nil && !isUnfinished(err) {
			b.Fatal(err)
		}
		if n != lines {
			b.Fatalf("%d events, want %d", n, lines)
		}
		return float64(n-1) / t1.Sub(t0).Seconds(), t0.Sub(start), t0.Sub(started)
	}
	var dRate, sRate, fRate float64
	rRate := make([]float64, len(relays))
	var dFirst, sFirst, dCLI, sCLI time.Duration
	for b.Loop() {
		r, f, c := run("direct", cmd)
		dRate, dFirst, dCLI = dRate+r, dFirst+f, dCLI+c
		r, f, c = run("shim", cmd)
		sRate, sFirst, sCLI = sRate+r, sFirst+f, sCLI+c
		for i, rl := range relays {
			r, _, _ = run("direct", rl.cmd)
			rRate[i] += r
		}
		r, _, _ = run("splice", cmd)
		fRate += r
	}
	n := float64(b.N)
	b.ReportMetric(dRate/n, "direct-events/s")
	b.ReportMetric(sRate/n, "shim-events/s")
	b.ReportMetric(sRate/dRate, "events-ratio")
	for i, rl := range relays {
		b.ReportMetric(rRate[i]/dRate, rl.metric)
	}
	b.ReportMetric(fRate/dRate, "splice-events-ratio")
	b.ReportMetric(float64(dFirst.Microseconds())/n/1000, "direct-first-ms")
	b.ReportMetric(float64(sFirst.Microseconds())/n/1000, "shim-first-ms")
	b.ReportMetric(float64(dFirst)/float64(sFirst), "first-ratio")
	// From the CLI's start (Start returned) to its first event: the
	// streaming path alone, without the shim's own start.
	b.ReportMetric(float64(dCLI.Microseconds())/n/1000, "direct-cli-first-ms")
	b.ReportMetric(float64(sCLI.Microseconds())/n/1000, "shim-cli-first-ms")
	b.ReportMetric(float64(dCLI)/float64(sCLI), "cli-first-ratio")
}

// isUnfinished: the benchmark's lines carry no terminal event.
func isUnfinished(err error) bool { return errors.Is(err, providers.ErrUnfinishedTurn) }
