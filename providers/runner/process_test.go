package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"remote/providers"
)

// fakeParser is a LineParser whose behaviour is a function field.
type fakeParser struct {
	parse func(line []byte) ([]providers.Event, error)
}

func (p fakeParser) ParseLine(line []byte) ([]providers.Event, error) { return p.parse(line) }

// lineParser understands "TYPE text" lines and rejects lines starting "bad".
var lineParser = fakeParser{parse: func(line []byte) ([]providers.Event, error) {
	s := string(line)
	if strings.HasPrefix(s, "bad") {
		return nil, fmt.Errorf("bad line")
	}
	typ, text, _ := strings.Cut(s, " ")
	return []providers.Event{{Type: providers.EventType(typ), Text: text}}, nil
}}

func collect() (*[]providers.Event, func(providers.Event)) {
	var evs []providers.Event
	return &evs, func(e providers.Event) { evs = append(evs, e) }
}

func summary(evs []providers.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s[%s%s];", e.Type, e.Text, e.Message)
	}
	return b.String()
}

func TestRunProcess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		mode        string
		env         []string
		opts        ProcessOptions
		wantEvents  string
		wantErr     bool
		wantFailed  bool // errors.Is(err, ErrRunFailed)
		wantCode    int
		wantStderr  string
		stderrBytes int
		wantErrText string // an error that is no *ProcessError, exactly
	}{
		{
			name:       "lines parsed, blank and bad lines skipped",
			mode:       "script",
			env:        []string{`CHILD_SCRIPT=assistant.delta hi\n\n   \nbad json\nrun.completed`},
			wantEvents: "assistant.delta[hi];run.completed[];",
		},
		{
			name:       "stdin written then closed",
			mode:       "stdin-lines",
			opts:       ProcessOptions{Stdin: "one\ntwo\n"},
			wantEvents: "got[one];got[two];run.completed[];",
		},
		{
			name:       "run.failed and non-zero exit is ErrRunFailed",
			mode:       "script",
			env:        []string{`CHILD_SCRIPT=run.failed api down`, "CHILD_CODE=1", "CHILD_STDERR=some detail"},
			wantEvents: "run.failed[api down];",
			wantErr:    true, wantFailed: true, wantCode: 1, wantStderr: "some detail\n",
		},
		{
			name:        "exit 0 without a terminal event is an unfinished turn",
			mode:        "script",
			env:         []string{`CHILD_SCRIPT=assistant.delta hi`},
			wantEvents:  "assistant.delta[hi];",
			wantErrText: "exited without finishing the turn",
		},
		{
			name:        "exit 0 in the middle of a line is an unfinished turn saying so",
			mode:        "exit",
			env:         []string{"CHILD_STDOUT=assistant.delta hi\nbad, cut o"},
			wantEvents:  "assistant.delta[hi];",
			wantErrText: "exited without finishing the turn: its output ended in the middle of a line (10 bytes that do not parse)",
		},
		{
			name:       "a last line without a newline is still parsed",
			mode:       "exit",
			env:        []string{"CHILD_STDOUT=assistant.delta hi\nrun.completed"},
			wantEvents: "assistant.delta[hi];run.completed[];",
		},
		{
			name:       "a CLI lingering after run.completed is stopped after the grace: success",
			mode:       "linger",
			env:        []string{`CHILD_SCRIPT=assistant.delta hi\nrun.completed`},
			opts:       ProcessOptions{ExitGrace: 200 * time.Millisecond},
			wantEvents: "assistant.delta[hi];run.completed[];",
		},
		{
			name:        "a CLI lingering after run.failed is stopped after the grace: ErrRunFailed",
			mode:        "linger",
			env:         []string{`CHILD_SCRIPT=run.failed quota`},
			opts:        ProcessOptions{ExitGrace: 200 * time.Millisecond},
			wantEvents:  "run.failed[quota];",
			wantErrText: "provider run failed: stopped 200ms after the failed turn",
		},
		{
			name:       "run.failed and exit 0 is success",
			mode:       "script",
			env:        []string{`CHILD_SCRIPT=run.failed x`},
			wantEvents: "run.failed[x];",
		},
		{
			name:       "non-zero exit without run.failed is a process error with stderr",
			mode:       "script",
			env:        []string{`CHILD_SCRIPT=assistant.delta partial`, "CHILD_CODE=2", "CHILD_STDERR=line1\nline2"},
			wantEvents: "assistant.delta[partial];",
			wantErr:    true, wantCode: 2, wantStderr: "line1\nline2\n",
		},
		{
			name:    "stderr capture bounded to 64 KiB",
			mode:    "bigerr",
			env:     []string{"CHILD_SIZE=" + fmt.Sprint(200<<10)},
			wantErr: true, wantCode: 2, stderrBytes: 64 << 10,
		},
		{
			name:       "stdout line over the limit emits a stdout error",
			mode:       "big",
			env:        []string{"CHILD_SIZE=5000"},
			opts:       ProcessOptions{MaxStdoutLine: 1024},
			wantEvents: "error[stdout: line longer than 1024 bytes: bufio.Scanner: token too long];",
		},
		{
			name:       "a 2 MiB line fits the default limit",
			mode:       "big",
			env:        []string{"CHILD_SIZE=" + fmt.Sprint(2<<20)},
			wantEvents: fmt.Sprintf("%s[];run.completed[];", strings.Repeat("x", 2<<20)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs, emit := collect()
			err := RunProcess(context.Background(), &HostLauncher{}, childCommand(t, tt.mode, tt.env...), lineParser, emit, tt.opts)
			if got := summary(*evs); got != tt.wantEvents {
				if len(got) > 200 {
					got = got[:200] + "…"
				}
				t.Errorf("events = %s\nwant %.200s", got, tt.wantEvents)
			}
			if tt.wantErrText != "" {
				if err == nil || err.Error() != tt.wantErrText {
					t.Fatalf("err = %v, want %q", err, tt.wantErrText)
				}
				if strings.HasPrefix(tt.wantErrText, "exited") != errors.Is(err, providers.ErrUnfinishedTurn) {
					t.Errorf("errors.Is(%v, ErrUnfinishedTurn) is wrong", err)
				}
				if strings.HasPrefix(tt.wantErrText, "provider run failed") != errors.Is(err, providers.ErrRunFailed) {
					t.Errorf("errors.Is(%v, ErrRunFailed) is wrong", err)
				}
				return
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			var pe *ProcessError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ProcessError", err)
			}
			if errors.Is(err, providers.ErrRunFailed) != tt.wantFailed {
				t.Errorf("errors.Is(ErrRunFailed) = %v, want %v (%v)", !tt.wantFailed, tt.wantFailed, err)
			}
			var ee *providers.ExitError
			if !errors.As(err, &ee) || ee.Code != tt.wantCode {
				t.Errorf("exit = %v, want %d", err, tt.wantCode)
			}
			if tt.wantStderr != "" && pe.Stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", pe.Stderr, tt.wantStderr)
			}
			if tt.stderrBytes != 0 && len(pe.Stderr) != tt.stderrBytes {
				t.Errorf("captured stderr %d bytes, want %d", len(pe.Stderr), tt.stderrBytes)
			}
			if len(err.Error()) > maxErrorDetail+200 {
				t.Errorf("error string is %d bytes, want it bounded", len(err.Error()))
			}
		})
	}
}

func TestRunProcessCancelIsNil(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var evs []providers.Event
	p := fakeParser{parse: func(line []byte) ([]providers.Event, error) {
		cancel() // the child said "ready": stop the run
		return []providers.Event{{Type: providers.EventSystem, Text: string(line)}}, nil
	}}
	err := RunProcess(ctx, &HostLauncher{}, childCommand(t, "sleep"), p, func(e providers.Event) { evs = append(evs, e) }, ProcessOptions{})
	if err != nil {
		t.Fatalf("cancelled run returned %v, want nil", err)
	}
	if summary(evs) != "system[ready];" {
		t.Fatalf("events %s", summary(evs))
	}
}

func TestRunProcessStartError(t *testing.T) {
	t.Parallel()
	err := RunProcess(context.Background(), &HostLauncher{}, providers.Command{Path: "/nonexistent/cli"}, lineParser, func(providers.Event) {}, ProcessOptions{})
	if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "/nonexistent/cli") {
		t.Fatalf("err = %v, want ErrLaunch naming the binary", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := RunProcess(ctx, &HostLauncher{}, childCommand(t, "sleep"), lineParser, func(providers.Event) {}, ProcessOptions{}); err != nil {
		t.Fatalf("already cancelled: %v, want nil", err)
	}
}
