package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// runProjectPorts shows a project's ports with their daemon routes, or
// replaces them with -set (the daemon sets the preview devices live).
func runProjectPorts(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("project ports")
	set := fs.String("set", "", "the new ports, comma-separated (\"\" removes them all)")
	args, err := parseExact(fs, args, "NAME")
	if err != nil {
		return err
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "set" })
	p, err := e.Client.Project(ctx, args[0])
	if err != nil {
		return err
	}
	if given {
		var ports []int
		for _, s := range strings.Split(*set, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 65535 {
				return usagef("-set: %q is not a port (1-65535)", s)
			}
			ports = append(ports, n)
		}
		if p, err = e.Client.SetProjectPorts(ctx, args[0], ports); err != nil {
			return err
		}
	}
	if e.JSON {
		ports := p.Ports
		if ports == nil {
			ports = []int{}
		}
		return writeJSON(e.Stdout, ports)
	}
	return printList(e, p.Ports, "PORT\tROUTE", func(tw io.Writer) {
		for _, port := range p.Ports {
			fmt.Fprintf(tw, "%d\t/v1/projects/%s/ports/%d/\n", port, p.Name, port)
		}
	})
}

// runProjectPreview GETs a path from a project's port through the daemon
// and copies the body to stdout.
func runProjectPreview(ctx context.Context, e *env, args []string) error {
	args, err := parse(e.newFlags("project preview"), args)
	if err != nil {
		return err
	}
	if len(args) < 2 || len(args) > 3 {
		return usagef("want NAME PORT [PATH], got %d argument(s)", len(args))
	}
	port, err := strconv.Atoi(args[1])
	if err != nil || port < 1 || port > 65535 {
		return usagef("PORT %q is not a port (1-65535)", args[1])
	}
	path := "/"
	if len(args) == 3 {
		path = args[2]
	}
	resp, err := e.Client.Preview(ctx, args[0], port, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(e.Stdout, resp.Body)
	return err
}
