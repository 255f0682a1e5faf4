package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"remote/api"
	"remote/cmd/remotectl/render"
)

func init() {
	register(command{Name: "schedule", Usage: "add|list|rm|run|history|token ...", Summary: "prompts sent to a chat on a cron schedule", Run: runSchedule})
}

// scheduleCommands are the subcommands of `remotectl schedule`.
var scheduleCommands = map[string]command{
	"add":     {Name: "add", Usage: "-cron 'EXPR' [-tz ZONE] [-overlap skip|queue] [-disabled] CHAT PROMPT... [--json]", Summary: "send PROMPT to CHAT on a cron schedule (five fields, in -tz; default UTC)", Run: runScheduleAdd},
	"list":    {Name: "list", Usage: "CHAT [--json]", Summary: "list a chat's schedules", Run: runScheduleList},
	"rm":      {Name: "rm", Usage: "ID", Summary: "remove a schedule", Run: runScheduleRm},
	"run":     {Name: "run", Usage: "ID", Summary: "run a schedule now; prints the run id (or the queue id when queued)", Run: runScheduleRun},
	"history": {Name: "history", Usage: "ID [--json]", Summary: "list a schedule's runs, newest first (SEQ: remotectl chat diff CHAT -turn SEQ)", Run: runScheduleHistory},
	"token":   {Name: "token", Usage: "ID", Summary: "make a routine token for POST /hooks/routines/ID on remote-web (shown once; replaces the old one)", Run: runScheduleToken},
}

func runSchedule(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "schedule", scheduleCommands, args)
}

func runScheduleAdd(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("schedule add")
	var req api.ScheduleRequest
	fs.StringVar(&req.Cron, "cron", "", "cron `expression`: minute hour day-of-month month day-of-week, or @hourly, @daily…")
	fs.StringVar(&req.Timezone, "tz", "", "IANA time `zone` the expression is read in (default UTC)")
	fs.StringVar(&req.Overlap, "overlap", "", "while the chat runs: skip (default) or queue")
	disabled := fs.Bool("disabled", false, "create it disabled")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want CHAT PROMPT, got %d argument(s)", len(pos))
	}
	if req.Cron == "" {
		return usagef("-cron is required")
	}
	if *disabled {
		f := false
		req.Enabled = &f
	}
	req.Prompt = strings.Join(pos[1:], " ")
	sc, err := e.Client.CreateSchedule(ctx, pos[0], req)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, sc)
	}
	fmt.Fprintln(e.Stdout, sc.ID)
	return nil
}

func runScheduleList(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("schedule list"), args, "CHAT")
	if err != nil {
		return err
	}
	l, err := e.Client.Schedules(ctx, args[0])
	if err != nil {
		return err
	}
	return printList(e, l, "ID\tCRON\tTZ\tOVERLAP\tENABLED\tNEXT\tPROMPT", func(tw io.Writer) {
		for _, s := range l {
			next := "-"
			if s.NextRun != nil {
				next = s.NextRun.Local().Format(listTime)
			}
			text := strings.Join(strings.Fields(render.StripControls(s.Prompt)), " ")
			if r := []rune(text); len(r) > 50 {
				text = string(r[:49]) + "…"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%s\n", s.ID, render.StripControls(s.Cron), render.StripControls(s.Timezone), s.Overlap, s.Enabled, next, text)
		}
	})
}

func runScheduleRm(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("schedule rm"), args, "ID")
	if err != nil {
		return err
	}
	return e.Client.DeleteSchedule(ctx, args[0])
}

func runScheduleRun(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("schedule run"), args, "ID")
	if err != nil {
		return err
	}
	res, err := e.Client.RunSchedule(ctx, args[0])
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, res)
	}
	if res.QueueID != "" {
		fmt.Fprintf(e.Stdout, "queued %s\n", res.QueueID)
		return nil
	}
	fmt.Fprintln(e.Stdout, res.RunID)
	return nil
}

func runScheduleHistory(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("schedule history"), args, "ID")
	if err != nil {
		return err
	}
	h, err := e.Client.ScheduleHistory(ctx, args[0])
	if err != nil {
		return err
	}
	return printList(e, h, "START\tEND\tOUTCOME\tSEQ\tERROR", func(tw io.Writer) {
		for _, r := range h {
			end, seq := "-", "-"
			if r.End != nil {
				end = r.End.Local().Format(time.DateTime)
			}
			if r.Seq > 0 {
				seq = fmt.Sprint(r.Seq)
			}
			msg := strings.Join(strings.Fields(render.StripControls(r.Error)), " ")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Start.Local().Format(time.DateTime), end, r.Outcome, seq, msg)
		}
	})
}

func runScheduleToken(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("schedule token"), args, "ID")
	if err != nil {
		return err
	}
	tok, err := e.Client.ScheduleToken(ctx, args[0])
	if err != nil {
		return err
	}
	fmt.Fprintln(e.Stdout, tok)
	return nil
}
