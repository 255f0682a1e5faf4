package daemontest

import (
	"context"
	"slices"
	"strings"
	"sync"

	"remote/providers"
)

// RunFunc is a scripted run: it emits the run's events and returns when
// the run is over (ctx ends when the run is cancelled).
type RunFunc func(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error

// Provider is a scripted providers.Provider standing in for an agent CLI.
// By default a run answers "echo: TEXT" in two assistant deltas and
// completes. Its setters may be called while the daemon runs.
type Provider struct {
	id   providers.ProviderID
	caps providers.Capabilities

	mu      sync.Mutex
	run     RunFunc
	hold    bool
	reqs    []providers.RunRequest
	answers []providers.InteractionResponse
}

var _ providers.Provider = (*Provider)(nil)

// NewProvider returns a scripted provider with the given id and
// capabilities.
func NewProvider(id providers.ProviderID, caps providers.Capabilities) *Provider {
	return &Provider{id: id, caps: caps}
}

// Claude returns a fake "claude" provider (label "Claude Code", resume and
// fork, two models).
func Claude() *Provider {
	return NewProvider("claude", providers.Capabilities{
		Label: "Claude Code", Models: []string{"sonnet", "opus"}, DefaultModel: "sonnet",
		Resume: true, Fork: true, PlanMode: true, Skills: providers.SkillsSlashCommand,
	})
}

// Codex returns a fake "codex" provider (label "Codex", resume, approvals,
// reasoning efforts).
func Codex() *Provider {
	return NewProvider("codex", providers.Capabilities{
		Label: "Codex", Models: []string{"gpt-5-codex"}, DefaultModel: "gpt-5-codex",
		Efforts: []string{"low", "medium", "high"}, Resume: true, Approvals: true, Skills: providers.SkillsDollarMention,
	})
}

// ID implements providers.Provider.
func (p *Provider) ID() providers.ProviderID { return p.id }

// Capabilities implements providers.Provider.
func (p *Provider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return p.caps, nil
}

// SetRun replaces the run script; nil restores the default echo.
func (p *Provider) SetRun(fn RunFunc) {
	p.mu.Lock()
	p.run = fn
	p.mu.Unlock()
}

// SetScript makes every run emit the events script returns for its
// request, in order.
func (p *Provider) SetScript(script func(req providers.RunRequest) []providers.Event) {
	p.SetRun(func(_ context.Context, req providers.RunRequest, emit func(providers.Event)) error {
		for _, ev := range script(req) {
			emit(ev)
		}
		return nil
	})
}

// SetHold keeps every run open after its script until it is cancelled.
func (p *Provider) SetHold(hold bool) {
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
}

// Requests returns the run requests received so far.
func (p *Provider) Requests() []providers.RunRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// Answers returns the interaction responses runs received through
// RunRequest.InteractionResponses (see AwaitAnswer).
func (p *Provider) Answers() []providers.InteractionResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.answers)
}

// AwaitAnswer waits for the run's next interaction response and records it
// (Answers); ok is false when the run ended first.
func (p *Provider) AwaitAnswer(ctx context.Context, req providers.RunRequest) (resp providers.InteractionResponse, ok bool) {
	select {
	case resp, ok = <-req.InteractionResponses:
	case <-ctx.Done():
		return resp, false
	}
	if ok {
		p.mu.Lock()
		p.answers = append(p.answers, resp)
		p.mu.Unlock()
	}
	return resp, ok
}

// Run implements providers.Provider.
func (p *Provider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	run, hold := p.run, p.hold
	p.mu.Unlock()
	if run == nil {
		run = Echo
	}
	if err := run(ctx, req, emit); err != nil {
		return err
	}
	if hold {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// Echo is the default run: a native session ("session-1", what a real
// CLI reports first), "echo: " and the prompt's last line as two assistant
// deltas of one message, then run.completed.
func Echo(_ context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	text := req.Prompt
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	emit(providers.Event{Type: providers.EventSessionUpdated, SessionID: "session-1"})
	emit(providers.Event{Type: providers.EventAssistantDelta, MessageID: "m1", Text: "echo: "})
	emit(providers.Event{Type: providers.EventAssistantDelta, MessageID: "m1", Text: text})
	emit(providers.Event{Type: providers.EventRunCompleted})
	return nil
}
