package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"remote/client"
	"remote/daemon/daemontest"
	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/minimax"
)

// A MiniMax without MINIMAX_API_KEY: `remotectl providers` shows it not
// ready with the line naming the key to set, and a prompt to a MiniMax
// chat is refused at once (503 unavailable, the same line), with nothing
// stored, as for any other provider that cannot run.
func TestProvidersMiniMaxWithoutKey(t *testing.T) {
	mm := minimax.New(providers.AdapterConfig{Binary: testkit.CodexBinary(t)}, minimax.Options{})
	d := newDaemon(t, daemontest.Options{Providers: []providers.Provider{daemontest.Claude(), mm}})
	ctx := context.Background()

	r := runCtl(ctx, d, "", "providers")
	if r.code != 0 {
		t.Fatalf("providers: %+v", r)
	}
	if !regexp.MustCompile(`(?m)^minimax\s+MiniMax\s+true\s+no\s+\S.*\s+none\s`).MatchString(r.stdout) {
		t.Errorf("providers: no row \"minimax MiniMax true no <version> none\":\n%s", r.stdout)
	}
	line := "minimax: MiniMax has no API key: set MINIMAX_API_KEY in [providers.minimax] env of the daemon's config\n"
	if !strings.Contains(r.stdout, line) {
		t.Errorf("providers: want the line %q:\n%s", line, r.stdout)
	}

	r = runCtl(ctx, d, "", "chat", "create", "-provider", "minimax", "-cwd", t.TempDir())
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("chat create: %+v", r)
	}
	r = runCtl(ctx, d, "", "prompt", id, "hi")
	want := `remotectl: unavailable: provider "minimax" is not ready: MiniMax has no API key: set MINIMAX_API_KEY`
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("prompt to a MiniMax chat without a key: %+v, want exit 1 and %q", r, want)
	}
	if evs, err := d.Client(client.New("").User()).Events(ctx, id, 0); err != nil || len(evs) != 0 {
		t.Fatalf("events after the refused prompt: %v, %v; want none (refused before anything is stored)", evs, err)
	}
}
