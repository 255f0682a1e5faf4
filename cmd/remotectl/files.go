package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
)

func init() {
	register(command{Name: "files", Usage: "ls PROJECT [PATH] [--json] | get PROJECT PATH [LOCAL|-] | put PROJECT LOCAL PATH", Summary: "list, download and upload files under /workspace of a project's container", Run: runFiles})
}

var filesCommands = map[string]command{
	"ls":  {Name: "ls", Usage: "PROJECT [PATH] [--json]", Summary: "list a directory under /workspace (default: /workspace)", Run: runFilesLs},
	"get": {Name: "get", Usage: "PROJECT PATH [LOCAL|-]", Summary: "download a file (LOCAL default: its name in the current directory; - for stdout)", Run: runFilesGet},
	"put": {Name: "put", Usage: "PROJECT LOCAL PATH", Summary: "upload a local file to PATH (created or replaced)", Run: runFilesPut},
}

func runFiles(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "files", filesCommands, args)
}

func runFilesLs(ctx context.Context, e *env, args []string) error {
	args, err := parse(e.newFlags("files ls"), args)
	if err != nil {
		return err
	}
	if len(args) < 1 || len(args) > 2 {
		return usagef("want PROJECT [PATH], got %d argument(s)", len(args))
	}
	dir := ""
	if len(args) == 2 {
		dir = args[1]
	}
	l, err := e.Client.Files(ctx, args[0], dir)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, l)
	}
	tw := newTable(e.Stdout)
	fmt.Fprintln(tw, "TYPE\tMODE\tOWNER\tMODIFIED\tNAME")
	for _, f := range l.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%d:%d\t%s\t%s\n", f.Type, f.Mode, f.UID, f.GID, f.MTime.Format("2006-01-02 15:04"), safeName(f.Name))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.Truncated {
		fmt.Fprintf(e.Stderr, "%s holds more entries than one listing shows\n", l.Path)
	}
	return nil
}

// safeName shows a file name with control characters escaped, so a name
// an agent chose cannot drive the terminal.
func safeName(s string) string {
	q := fmt.Sprintf("%q", s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}

func runFilesGet(ctx context.Context, e *env, args []string) error {
	args, err := parse(e.newFlags("files get"), args)
	if err != nil {
		return err
	}
	if len(args) < 2 || len(args) > 3 {
		return usagef("want PROJECT PATH [LOCAL|-], got %d argument(s)", len(args))
	}
	local := path.Base(args[1])
	if len(args) == 3 {
		local = args[2]
	}
	if local == "-" {
		_, err := e.Client.Download(ctx, args[0], args[1], e.Stdout)
		return err
	}
	if local == "/" || local == "." || local == ".." {
		return usagef("PATH %q names no file: give LOCAL", args[1])
	}
	// Into a temporary file beside LOCAL, renamed when complete: a broken
	// download never leaves a partial LOCAL.
	tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := e.Client.Download(ctx, args[0], args[1], tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), local); err != nil {
		return err
	}
	fmt.Fprintf(e.Stderr, "%s: %d bytes\n", local, n)
	return nil
}

func runFilesPut(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("files put"), args, "PROJECT", "LOCAL", "PATH")
	if err != nil {
		return err
	}
	f, err := os.Open(args[1])
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return usagef("LOCAL %q is not a regular file", args[1])
	}
	return e.Client.Upload(ctx, args[0], args[2], io.Reader(f), st.Size())
}
