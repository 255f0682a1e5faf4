package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"remote/cmd/remotectl/render"
)

func init() {
	register(command{Name: "queue", Usage: "CHAT [--json]", Summary: "list a chat's queued prompts (prompt -queue adds one)", Run: runQueue})
	register(command{Name: "unqueue", Usage: "CHAT QUEUEID", Summary: "remove a queued prompt before it runs", Run: runUnqueue})
}

func runQueue(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("queue"), args, "CHAT")
	if err != nil {
		return err
	}
	q, err := e.Client.Queue(ctx, args[0])
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, q)
	}
	tw := newTable(e.Stdout)
	fmt.Fprintln(tw, "ID\tQUEUED\tTEXT")
	for _, p := range q {
		text := strings.Join(strings.Fields(render.StripControls(p.Text)), " ")
		if r := []rune(text); len(r) > 60 {
			text = string(r[:59]) + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.ID, p.CreatedAt.Local().Format(time.DateTime), text)
	}
	return tw.Flush()
}

func runUnqueue(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("unqueue"), args, "CHAT", "QUEUEID")
	if err != nil {
		return err
	}
	return e.Client.Unqueue(ctx, args[0], args[1])
}
