package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
)

// shimWrapper is what root in a project container plants in place of the
// pushed remote-shim: it records that it ran and every attach stream (the
// start spec, environment included), then runs the real shim, so runs
// still work. Zero bytes pad it to the real shim's size.
const shimWrapper = `#!/bin/sh
echo ran >> /tmp/wrapper-ran
if [ "$1" = attach ]; then tee -a /tmp/captured | /root/real-shim "$@"; exit $?; fi
exec /root/real-shim "$@"
`

// TestAttackPlantedShimWrapper: container root replaces the container's
// remote-shim with a same-size, executable wrapper. The next run must not
// execute it (nor hand it the start spec with the run's secret), must
// still run, and leaves the real shim in place. Before, the copy was
// checked by type, mode and size only, and the wrapper captured the spec.
func TestAttackPlantedShimWrapper(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rshimwrap")
	cfg := &ShimConfig{Binary: testkit.ShimBinary(t)}
	l := &LXDLauncher{Client: client, Instance: name, Shim: cfg}
	bin, err := l.shimPath()
	if err != nil {
		t.Fatal(err)
	}
	real, err := os.ReadFile(cfg.Binary)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(real)
	const secret = "sv-9c1d-run-secret"
	run := func(t *testing.T) {
		t.Helper()
		p, err := l.Start(shimmed(t)(context.Background()), providers.Command{Path: "echo", Args: []string{"ran"},
			Env: []string{"PATH=" + containerPath, "RUN_SECRET=" + secret}})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		p.Stdin().Close()
		out, _, err := drain(t, p)
		if err != nil || out != "ran\n" {
			t.Fatalf("run: %q, %v", out, err)
		}
	}
	run(t) // the first push

	// Container root plants the wrapper (a new file: a running shim keeps
	// the old one busy), same size and mode as the real one.
	plant := func(t *testing.T) {
		t.Helper()
		containerExec(t, client, name, "sh", "-c", `cp "$0" /root/real-shim && rm "$0" && printf '%s' "$1" > "$0" && head -c "$2" /dev/zero >> "$0" && chmod 755 "$0"`,
			bin, shimWrapper, fmt.Sprint(len(real)-len(shimWrapper)))
		if got, want := containerExec(t, client, name, "stat", "-c", "%s %a", bin), fmt.Sprintf("%d 755", len(real)); got != want {
			t.Fatalf("planted wrapper: %q, want %q", got, want)
		}
	}
	check := func(t *testing.T) {
		t.Helper()
		if got := containerExec(t, client, name, "sh", "-c", "cat /tmp/wrapper-ran /tmp/captured 2>/dev/null; true"); got != "" {
			t.Fatalf("the planted wrapper ran (captured the run's secret: %v)", strings.Contains(got, secret))
		}
		if got := containerExec(t, client, name, "sha256sum", bin); !strings.HasPrefix(got, hex.EncodeToString(sum[:])+" ") {
			t.Errorf("shim in the container after the run: %q, want the real one's sha256", got)
		}
	}

	t.Run("next run", func(t *testing.T) {
		plant(t)
		run(t)
		check(t)
	})

	// Planted while a run's CLI runs: the daemon's re-attach after a
	// restart must not exec it either.
	t.Run("re-attach", func(t *testing.T) {
		slot, handle := handleSlot(t)
		p, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)),
			providers.Command{Path: "cat", Env: []string{"PATH=" + containerPath, "RUN_SECRET=" + secret}})
		if err != nil {
			t.Fatal(err)
		}
		slot.Detach()
		_ = p.Wait()
		plant(t)
		slot2 := &providers.RunSlot{RunID: slot.RunID, Attach: handle, Cursor: providers.NewCursor(true, providers.Pos{Line: -1}, false)}
		p2, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot2)), providers.Command{})
		if err != nil {
			t.Fatal(err)
		}
		defer slot2.Release()
		if _, err := io.WriteString(p2.Stdin(), "again\n"); err != nil {
			t.Fatal(err)
		}
		p2.Stdin().Close()
		if out, _, err := drain(t, p2); err != nil || out != "again\n" {
			t.Fatalf("after the re-attach: %q, %v", out, err)
		}
		check(t)
	})
}
