package main

import (
	"context"
	"fmt"
	"strings"

	"remote/api"
)

// runProvidersStore serves `providers install` and `providers select`.
func runProvidersStore(ctx context.Context, e *env, sub string, args []string) error {
	fs := e.newFlags("providers " + sub)
	untested := false
	if sub == "install" {
		fs.BoolVar(&untested, "untested", false, "install a version other than the tested one")
	}
	args, err := parseExact(fs, args, "PROVIDER[@VERSION]")
	if err != nil {
		return err
	}
	provider, version, _ := strings.Cut(args[0], "@")
	var entries []api.CLIStoreEntry
	switch sub {
	case "install":
		fmt.Fprintf(e.Stderr, "installing %s into the daemon's CLI store (npm; may take a minute)...\n", args[0])
		entries, err = e.Client.InstallCLI(ctx, provider, api.InstallCLIRequest{Version: version, Untested: untested})
	default:
		if version == "" {
			return usagef("say which version: %s@VERSION (see remotectl providers)", provider)
		}
		entries, err = e.Client.SelectCLI(ctx, provider, version)
	}
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, entries)
	}
	printStore(e, entries)
	return nil
}

// printStore prints one line per provider of the CLI store: its versions,
// the selected one marked with *, untested ones marked.
func printStore(e *env, entries []api.CLIStoreEntry) {
	for _, s := range entries {
		var vs []string
		for _, v := range s.Versions {
			if v == s.Selected {
				v = "*" + v
			}
			if strings.TrimPrefix(v, "*") != s.Tested {
				v += " (untested)"
			}
			vs = append(vs, v)
		}
		if len(vs) == 0 {
			vs = []string{"none (remotectl providers install " + s.Provider + ")"}
		}
		fmt.Fprintf(e.Stdout, "store %s: %s\n", s.Provider, strings.Join(vs, ", "))
	}
}
