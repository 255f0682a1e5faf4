package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"remote/providers"
)

// TestRunProcessLineLimits (S15) pins the documented limits by value:
// stdout lines up to 16 MiB, stderr lines up to 1 MiB, of which 64 KiB
// are kept for the error.
func TestRunProcessLineLimits(t *testing.T) {
	t.Parallel()
	lengths := fakeParser{parse: func(line []byte) ([]providers.Event, error) {
		if string(line) == "run.completed" {
			return []providers.Event{{Type: providers.EventRunCompleted}}, nil
		}
		return []providers.Event{{Type: "len", Text: fmt.Sprint(len(line))}}, nil
	}}
	for _, tt := range []struct {
		name string
		size int
		want string
	}{
		{"a line of 16 MiB less its newline fits", 16<<20 - 1, fmt.Sprintf("len[%d];run.completed[];", 16<<20-1)},
		{"a longer line is refused naming 16 MiB", 16 << 20, "error[stdout: line longer than 16777216 bytes: bufio.Scanner: token too long];"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs, emit := collect()
			_ = RunProcess(context.Background(), &HostLauncher{}, childCommand(t, "big", fmt.Sprint("CHILD_SIZE=", tt.size)), lengths, emit, ProcessOptions{})
			if got := summary(*evs); got != tt.want {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("a stderr line just under 1 MiB keeps its first 64 KiB", func(t *testing.T) {
		t.Parallel()
		_, emit := collect()
		err := RunProcess(context.Background(), &HostLauncher{}, childCommand(t, "longerr", fmt.Sprint("CHILD_SIZE=", 1<<20-1)), lineParser, emit, ProcessOptions{})
		var pe *ProcessError
		if !errors.As(err, &pe) {
			t.Fatalf("err = %v, want a *ProcessError", err)
		}
		if len(pe.Stderr) != 65536 {
			t.Errorf("captured %d bytes of stderr, want 65536", len(pe.Stderr))
		}
	})
}
