package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
)

// The runner against a real LXD container: RunProcess through LXD exec,
// with the S11 command (cwd, environment) and the prompt on stdin.
func TestLXDLauncher(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "runner")
	ctx := context.Background()
	launchers := &LXDLauncher{Client: client}
	l := launchers.Container(name)

	// /workspace does not exist in the busybox image: create it first.
	if err := RunProcess(ctx, l, providers.Command{Path: "sh", Args: []string{"-c", "mkdir -p /workspace && echo run.completed"}}, lineParser, func(providers.Event) {}, ProcessOptions{}); err != nil {
		t.Fatalf("mkdir: %v", err)
	}

	t.Run("env, cwd and stdin", func(t *testing.T) {
		cmd := ContainerCommand(ContainerSpec{
			Binary:  "sh",
			Args:    []string{"-c", `echo "system $PWD"; echo "system $A-$B-$TOKEN"; while read l; do echo "assistant.delta $l"; done; echo oops >&2; echo run.completed`},
			Fixed:   map[string]string{"A": "fixed"},
			Secrets: []providers.Secret{{Key: "B", Value: "secret"}, {Key: "TOKEN", Value: "project"}},
			Runtime: map[string]string{"TOKEN": "runtime"},
		})
		evs, emit := collect()
		err := RunProcess(ctx, l, cmd, lineParser, emit, ProcessOptions{Stdin: "one\ntwo\n"})
		if err != nil {
			t.Fatalf("RunProcess: %v", err)
		}
		want := "system[/workspace];system[fixed-secret-runtime];assistant.delta[one];assistant.delta[two];run.completed[];"
		if got := summary(*evs); got != want {
			t.Fatalf("events %s\nwant %s", got, want)
		}
	})

	t.Run("exit code and stderr", func(t *testing.T) {
		evs, emit := collect()
		err := RunProcess(ctx, l, providers.Command{Path: "sh", Args: []string{"-c", "echo 'run.failed bad'; echo detail >&2; exit 4"}}, lineParser, emit, ProcessOptions{})
		var pe *ProcessError
		var ee *providers.ExitError
		if !errors.As(err, &pe) || !errors.As(err, &ee) || ee.Code != 4 || !errors.Is(err, providers.ErrRunFailed) || pe.Stderr != "detail\n" {
			t.Fatalf("err = %v (%#v)", err, pe)
		}
		if summary(*evs) != "run.failed[bad];" {
			t.Fatalf("events %s", summary(*evs))
		}
	})

	t.Run("missing binary", func(t *testing.T) {
		err := RunProcess(ctx, l, providers.Command{Path: "no-such-cli"}, lineParser, func(providers.Event) {}, ProcessOptions{})
		var ee *providers.ExitError
		if !errors.As(err, &ee) || ee.Code != 127 {
			t.Fatalf("err = %v, want exit 127", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		p := fakeParser{parse: func(line []byte) ([]providers.Event, error) {
			cancel()
			return nil, nil
		}}
		err := RunProcess(ctx, l, providers.Command{Path: "sh", Args: []string{"-c", "echo ready; sleep 60"}}, p, func(providers.Event) {}, ProcessOptions{})
		if err != nil {
			t.Fatalf("cancelled: %v, want nil", err)
		}
	})

	t.Run("lingering after its turn is stopped", func(t *testing.T) {
		start := time.Now()
		evs, emit := collect()
		err := RunProcess(ctx, l, providers.Command{Path: "sh", Args: []string{"-c", "echo run.completed; sleep 600"}}, lineParser, emit,
			ProcessOptions{ExitGrace: 300 * time.Millisecond})
		if err != nil || summary(*evs) != "run.completed[];" {
			t.Fatalf("err = %v, events %s; want nil after run.completed", err, summary(*evs))
		}
		if d := time.Since(start); d > time.Minute {
			t.Fatalf("took %v: the lingering command was not stopped", d)
		}
	})

	t.Run("unknown container", func(t *testing.T) {
		_, err := launchers.Container("no-such-container-x").Start(ctx, providers.Command{Path: "true"})
		if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "no-such-container-x") {
			t.Fatalf("err = %v", err)
		}
	})
}
