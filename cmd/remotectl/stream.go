package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"remote/api"
	"remote/client"
)

// cancelTimeout bounds the cancel request sent after Ctrl-C.
const cancelTimeout = 5 * time.Second

// errRunFailed is a run that ended with an error event.
var errRunFailed = errors.New("run failed")

// multiFlag collects a repeated string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runPrompt(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("prompt")
	var req api.PromptRequest
	var skills multiFlag
	fs.StringVar(&req.Mode, "mode", "", "`mode`: default or plan")
	fs.Var(&skills, "skill", "select a skill by `name` (repeatable)")
	fs.BoolVar(&req.Queue, "queue", false, "while a run is active, queue the prompt (print its queue id) instead of failing")
	rawFlag(fs, e)
	args, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) < 2 {
		return usagef("want CHAT and TEXT (use - to read TEXT from stdin)")
	}
	chatID := args[0]
	req.Text = strings.Join(args[1:], " ")
	if req.Text == "-" {
		raw, err := io.ReadAll(io.LimitReader(e.Stdin, 1<<20))
		if err != nil {
			return fmt.Errorf("read prompt from stdin: %w", err)
		}
		req.Text = strings.TrimRight(string(raw), "\n")
	}
	if strings.TrimSpace(req.Text) == "" {
		return usagef("TEXT is empty")
	}
	req.Skills = skills

	// The run's events are those after the chat's current last seq.
	var last int64
	if err := e.Client.EachEvent(ctx, chatID, 0, func(ev api.Event) error { last = ev.Seq; return nil }); err != nil {
		return err
	}
	resp, err := e.Client.Prompt(ctx, chatID, req)
	if err != nil {
		return err
	}
	if resp.QueueID != "" {
		_, err := fmt.Fprintf(e.Stdout, "queued %s\n", resp.QueueID)
		return err
	}
	err = follow(ctx, e, chatID, last, true)
	if ctx.Err() != nil {
		// Ctrl-C: cancel the run we started, with a context of its own.
		cctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
		defer cancel()
		if cerr := e.Client.Cancel(cctx, chatID); cerr != nil && !client.IsNotFound(cerr) {
			return fmt.Errorf("%w; cancelling the run failed: %v", errInterrupted, cerr)
		}
		return fmt.Errorf("%w: run cancelled", errInterrupted)
	}
	return err
}

func runTail(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("tail")
	since := fs.Int64("since", 0, "start after `seq` (default: the whole chat)")
	rawFlag(fs, e)
	args, err := parseExact(fs, args, "CHAT")
	if err != nil {
		return err
	}
	err = follow(ctx, e, args[0], *since, false)
	if ctx.Err() != nil {
		return nil // Ctrl-C is how tail ends
	}
	return err
}

// follow streams chatID's events after since to the terminal (or as NDJSON
// with --json). With untilDone it returns when the run is over: at the
// closing sync (running false) after a running one or after the run's
// complete (nil) or error (errRunFailed) event; otherwise it runs until ctx
// ends or the daemon closes the stream.
func follow(ctx context.Context, e *env, chatID string, since int64, untilDone bool) error {
	st, err := e.Client.Follow(ctx, chatID, since)
	if err != nil {
		return err
	}
	defer st.Close()
	r := newRenderer(e, untilDone)
	defer r.finish()
	sawRunning := false
	var outcome error // set by the run's terminal event
	ended := false
	for {
		ev, err := st.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				if ended || !untilDone {
					return outcome
				}
				return fmt.Errorf("chat %s: the daemon closed the event stream before the run ended", chatID)
			}
			return fmt.Errorf("follow chat %s: %w", chatID, err)
		}
		if e.JSON {
			b, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(e.Stdout, "%s\n", b); err != nil {
				return err
			}
		} else {
			r.event(ev)
		}
		if !untilDone {
			continue
		}
		// The run ends with complete or error; the chat is idle (a next
		// prompt is accepted) only at the closing sync that follows.
		switch {
		case ev.Type == api.EventComplete && ev.Seq > 0:
			ended = true
		case ev.Type == api.EventError && ev.Seq > 0:
			ended, outcome = true, fmt.Errorf("%w: %s", errRunFailed, ev.Message)
		case ev.Type == api.EventSync && ev.Running:
			sawRunning = true
		case ev.Type == api.EventSync && (sawRunning || ended):
			return outcome
		}
	}
}

// renderer prints events for a person: assistant text flows to stdout as it
// streams; thinking (dimmed), tool calls (one line each) and notices go to
// stderr, so stdout holds only the reply.
type renderer struct {
	out, err io.Writer
	color    bool
	clean    func(string) string // stripControls, or the identity with --raw
	ownRun   bool                // prompt: skip the user event we sent, errors are returned
	msgID    string
	outMid   bool // stdout has an unterminated line
	errMid   bool // stderr has an unterminated (thinking) line
	tools    map[string]string
}

func newRenderer(e *env, ownRun bool) *renderer {
	clean := stripControls
	if e.Raw {
		clean = func(s string) string { return s }
	}
	return &renderer{out: e.Stdout, err: e.Stderr, color: e.Color, clean: clean, ownRun: ownRun, tools: map[string]string{}}
}

// rawFlag binds --raw, which prints agent text with its control sequences.
func rawFlag(fs *flag.FlagSet, e *env) {
	fs.BoolVar(&e.Raw, "raw", e.Raw, "print agent text as sent, escape sequences included (default: strip terminal control sequences)")
}

func (r *renderer) dim(s string) string {
	if r.color {
		return "\x1b[2m" + s + "\x1b[0m"
	}
	return s
}

// endOut ends an unterminated stdout line; endErr one on stderr.
func (r *renderer) endOut() {
	if r.outMid {
		fmt.Fprintln(r.out)
		r.outMid = false
	}
}

func (r *renderer) endErr() {
	if r.errMid {
		fmt.Fprintln(r.err)
		r.errMid = false
	}
}

// notice prints one line on stderr.
func (r *renderer) notice(format string, args ...any) {
	r.endOut()
	r.endErr()
	fmt.Fprintln(r.err, r.dim(r.clean(fmt.Sprintf(format, args...))))
}

func (r *renderer) event(ev api.Event) {
	ev.Text = r.clean(ev.Text)
	switch ev.Type {
	case api.EventAssistantText:
		r.endErr()
		if ev.MessageID != r.msgID && r.outMid {
			r.endOut()
		}
		r.msgID = ev.MessageID
		fmt.Fprint(r.out, ev.Text)
		r.outMid = ev.Text != "" && !strings.HasSuffix(ev.Text, "\n") || (ev.Text == "" && r.outMid)
	case api.EventThinking:
		r.endOut()
		fmt.Fprint(r.err, r.dim(ev.Text))
		r.errMid = ev.Text != "" && !strings.HasSuffix(ev.Text, "\n") || (ev.Text == "" && r.errMid)
	case api.EventUser:
		if !r.ownRun {
			r.endOut()
			fmt.Fprintf(r.out, "> %s\n", strings.ReplaceAll(ev.Text, "\n", "\n> "))
		}
	case api.EventToolUseStart:
		r.tools[ev.ID] = ev.Name
		r.notice("▸ %s %s", ev.Name, toolSummary(ev.Input))
	case api.EventToolUseEnd:
		name := r.tools[ev.ID]
		delete(r.tools, ev.ID)
		if ev.IsError {
			r.notice("  ✗ %s: %s", name, oneLine(ev.Output, 100))
		} else {
			r.notice("  ✓ %s (%d bytes)", name, len(ev.Output))
		}
	case api.EventInteractionRequest:
		r.notice("? %s needs an answer (interaction %s; remotectl answer CHAT %s accept|decline): %s", ev.Name, ev.InteractionID, ev.InteractionID, compact(ev.Input, 80))
	case api.EventInteractionResolved:
		r.notice("? interaction %s %s", ev.InteractionID, ev.Status)
	case api.EventSystem:
		if ev.Subtype != "" {
			if d := systemDetail(ev); d != "" {
				r.notice("[%s %s]", ev.Subtype, d)
			} else {
				r.notice("[%s]", ev.Subtype)
			}
		}
	case api.EventTurnStatus:
		if ev.Status != "" {
			r.notice("[turn %s]", ev.Status)
		}
	case api.EventError:
		if !r.ownRun || ev.Seq == 0 {
			r.notice("error: %s", ev.Message)
		}
	case api.EventComplete:
		r.endOut()
		r.endErr()
	}
}

// finish ends any unterminated line.
func (r *renderer) finish() {
	r.endOut()
	r.endErr()
}

// toolSummary picks the telling field of a tool's input (a command, a path,
// a pattern), else its compact JSON, on one short line.
func toolSummary(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "path", "pattern", "url", "query", "description"} {
			switch v := m[k].(type) {
			case string:
				return oneLine(v, 80)
			case []any:
				parts := make([]string, 0, len(v))
				for _, p := range v {
					parts = append(parts, fmt.Sprint(p))
				}
				return oneLine(strings.Join(parts, " "), 80)
			}
		}
	}
	return compact(input, 80)
}

// systemDetail is what a daemon system event's data says, on one line:
// the branch and commit of a push, the number and URL of a pull request,
// the repository, ref and commit of a clone or git's message when it
// failed (shapes in docs/api.md, "system"). "" for other subtypes (a
// CLI's own system events carry its raw line) and for data it cannot read.
func systemDetail(ev api.Event) string {
	var d struct { // JSON keys match the field names, case aside
		URL, Ref, SHA, Branch, Error, Member, Snapshot, Reason string
		Number                                                 int
	}
	if len(ev.Data) == 0 || json.Unmarshal(ev.Data, &d) != nil {
		return ""
	}
	d.SHA = d.SHA[:min(len(d.SHA), 12)]
	var s string
	switch ev.Subtype {
	case api.SubtypePushed:
		s = d.Branch + " at " + d.SHA
	case api.SubtypePullRequest:
		s = fmt.Sprintf("#%d %s", d.Number, d.URL)
	case api.SubtypeRepoCloned:
		s = d.URL + " " + d.Ref + " at " + d.SHA // oneLine drops the space of an empty ref
	case api.SubtypeRepoCloneFailed:
		s = d.URL + ": " + d.Error
	case api.SubtypeContainerEvacuated:
		s = d.Member
	case api.SubtypeCheckpointFailed:
		s = d.Snapshot + ": " + d.Reason
	}
	return oneLine(s, 300)
}
