package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"remote/api"
	"remote/client"
	"remote/providers"
)

// prompt -queue while a run is active prints the queue id; queue lists
// it; unqueue removes it.
func TestPromptQueueAndUnqueue(t *testing.T) {
	fake := seeded(t)
	fake.Claude.SetHold(true)
	fake.Claude.SetScript(func(providers.RunRequest) []providers.Event {
		return []providers.Event{{Type: providers.EventAssistantDelta, MessageID: "m", Text: "working"}}
	})
	ctx := context.Background()
	c := fake.Client(client.New("").User())
	if _, err := c.Prompt(ctx, "abcdef012345", api.PromptRequest{Text: "busy"}); err != nil {
		t.Fatal(err)
	}
	r := runCtl(ctx, fake, "", "prompt", "-queue", "abcdef012345", "after", "this")
	m := regexp.MustCompile(`^queued ([0-9a-f]{12})\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("prompt -queue: %+v", r)
	}
	if r := runCtl(ctx, fake, "", "queue", "abcdef012345"); r.code != 0 || !strings.Contains(r.stdout, m[1]) || !strings.Contains(r.stdout, "after this") {
		t.Fatalf("queue: %+v", r)
	}
	if r := runCtl(ctx, fake, "", "unqueue", "abcdef012345", m[1]); r.code != 0 {
		t.Fatalf("unqueue: %+v", r)
	}
	if r := runCtl(ctx, fake, "", "unqueue", "abcdef012345", m[1]); r.code != 1 || !strings.Contains(r.stderr, "remotectl: not_found: ") {
		t.Fatalf("unqueue twice: %+v", r)
	}
	if r := runCtl(ctx, fake, "", "queue", "abcdef012345"); r.code != 0 || strings.Contains(r.stdout, m[1]) {
		t.Fatalf("queue after unqueue: %+v", r)
	}
	if err := c.Cancel(ctx, "abcdef012345"); err != nil {
		t.Fatal(err)
	}
}

// remotectl queue strips control sequences from the queued prompts' text
// like every other output: a queued prompt cannot retitle the terminal,
// hide text or write the clipboard of whoever lists the queue.
func TestAttackRemotectlQueueEscapes(t *testing.T) {
	fake := seeded(t)
	fake.Claude.SetHold(true)
	ctx := context.Background()
	c := fake.Client(client.New("").User())
	if _, err := c.Prompt(ctx, "abcdef012345", api.PromptRequest{Text: "busy"}); err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(ctx, "abcdef012345")
	if _, err := c.Prompt(ctx, "abcdef012345", api.PromptRequest{Text: "fix \x1b]0;owned\x07it\x1b[8m now\x1b]52;c;Y3VybA==\x07\r", Queue: true}); err != nil {
		t.Fatal(err)
	}
	r := runCtl(ctx, fake, "", "queue", "abcdef012345")
	if r.code != 0 || !strings.Contains(r.stdout, "fix it now\n") || strings.ContainsAny(r.stdout, "\x1b\x07\r") {
		t.Fatalf("queue: %+v; want the text as %q with no control character", r, "fix it now")
	}
}
