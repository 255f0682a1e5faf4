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
	"remote/cmd/remotectl/render"
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
	r := render.New(e.Stdout, e.Stderr, e.Color, e.Raw, untilDone)
	defer r.Finish()
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
			r.Event(ev)
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

// rawFlag binds --raw, which prints agent text with its control sequences.
func rawFlag(fs *flag.FlagSet, e *env) {
	fs.BoolVar(&e.Raw, "raw", e.Raw, "print agent text as sent, escape sequences included (default: strip terminal control sequences)")
}
