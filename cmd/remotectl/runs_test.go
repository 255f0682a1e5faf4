package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"remote/api"
	"remote/client"
	"remote/providers"
)

// remotectl runs lists the caller's runs in flight; without remote-shim a
// run says it ends with the daemon; another user sees none of it.
func TestRunsCommand(t *testing.T) {
	fake := seeded(t)
	fake.Claude.SetHold(true)
	fake.Claude.SetScript(func(providers.RunRequest) []providers.Event {
		return []providers.Event{{Type: providers.EventAssistantDelta, MessageID: "m", Text: "working"}}
	})
	ctx := context.Background()
	c := fake.Client(client.New("").User())
	if r := runCtl(ctx, fake, "", "runs"); r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "CHAT") {
		t.Fatalf("runs while idle: %+v", r)
	}
	if _, err := c.Prompt(ctx, "abcdef012345", api.PromptRequest{Text: "busy"}); err != nil {
		t.Fatal(err)
	}
	r := runCtl(ctx, fake, "", "runs")
	if r.code != 0 || !strings.Contains(r.stdout, "abcdef012345") || !strings.Contains(r.stdout, "claude") ||
		!strings.Contains(r.stdout, "none (ends with the daemon)") || !strings.Contains(r.stdout, "true") {
		t.Fatalf("runs: %+v", r)
	}
	r = runCtl(ctx, fake, "", "runs", "--json")
	var runs []api.Run
	if err := json.Unmarshal([]byte(r.stdout), &runs); r.code != 0 || err != nil || len(runs) != 1 ||
		runs[0].ChatID != "abcdef012345" || runs[0].Shim != nil || !runs[0].Attached || runs[0].RunID == "" {
		t.Fatalf("runs --json: %+v (%v)", r, err)
	}
	// Another user does not see it.
	other, err := fake.Client("bob").Runs(ctx)
	if err != nil || len(other) != 0 {
		t.Fatalf("bob's runs: %+v %v", other, err)
	}
	if err := c.Cancel(ctx, "abcdef012345"); err != nil {
		t.Fatal(err)
	}
}
