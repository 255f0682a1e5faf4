package main

import (
	"context"
	"fmt"
	"time"
)

func init() {
	register(command{Name: "runs", Usage: "[--json]", Summary: "list the runs in flight and the remote-shim supervising each", Run: runRuns})
}

func runRuns(ctx context.Context, e *env, args []string) error {
	if _, err := parseExact(e.newFlags("runs"), args); err != nil {
		return err
	}
	runs, err := e.Client.Runs(ctx)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, runs)
	}
	tw := newTable(e.Stdout)
	fmt.Fprintln(tw, "CHAT\tRUN\tPROVIDER\tWHERE\tSTARTED\tSHIM\tATTACHED")
	for _, r := range runs {
		where, shim := "host", "none (ends with the daemon)"
		if r.Project != "" {
			where = "project " + r.Project
		}
		if r.Shim != nil {
			shim = r.Shim.Dir
			if r.Shim.Instance != "" {
				shim = r.Shim.Instance + ":" + r.Shim.Dir
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\n", r.ChatID, r.RunID, r.Provider, where, r.Started.Local().Format(time.DateTime), shim, r.Attached)
	}
	return tw.Flush()
}
