// Command remotectl is the operator's command line for remoted: it talks to
// the daemon's Unix socket through package client, in the manner of lxc and
// docker (`remotectl chat list`, `remotectl prompt CHAT TEXT`). main only
// wires signals and the process's streams; commands live in a table that
// other files extend (see register).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
