package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
)

// A re-attach after a restart that fails for a passing reason (here the
// "talk to remote-shim: context deadline exceeded" of a loaded LXD) is
// tried again, also when the run was cancelled meanwhile: giving up left
// the CLI and its shim running in the container after the cancel (the
// flake of TestProjectCancelLeavesNothing/cancel_after_a_kill_-9_restart).
// A shim that is gone, a launcher without a shim, and the daemon
// detaching (shutdown) end the tries at once.
func TestRetryAttach(t *testing.T) {
	transient := errors.New("talk to remote-shim: context deadline exceeded")
	gone := fmt.Errorf("%w: container c1 is gone", providers.ErrShimGone)
	attachAfter := func(fails int, last error) (func() (providers.Process, error), *int) {
		n := 0
		return func() (providers.Process, error) {
			n++
			if n <= fails {
				return nil, transient
			}
			return nil, last
		}, &n
	}
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, tt := range []struct {
		name      string
		ctx       context.Context
		fails     int
		last      error
		wantCalls int
		wantErr   error
	}{
		{"transient failures, then attached", context.Background(), 3, nil, 4, nil},
		{"cancelled by the user: still attaches, so the CLI can be stopped", cancelled(errors.New("cancelled by the user")), 2, nil, 3, nil},
		{"the shim is gone", context.Background(), 1, gone, 2, providers.ErrShimGone},
		{"no shim to launch", context.Background(), 0, ErrLaunch, 1, ErrLaunch},
		{"the daemon detaches", cancelled(providers.ErrDetached), 5, nil, 1, transient},
	} {
		t.Run(tt.name, func(t *testing.T) {
			attach, calls := attachAfter(tt.fails, tt.last)
			start := time.Now()
			_, err := retryAttach(tt.ctx, &providers.RunSlot{}, time.Millisecond, hclog.NewNullLogger(), attach)
			if *calls != tt.wantCalls || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("%d attach attempts, error %v; want %d, %v", *calls, err, tt.wantCalls, tt.wantErr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}
