package projectapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"remote/api"
	"remote/providers"
	"remote/provisioning"
)

// skillReader is an `instructions`-strategy provider that prepares the
// project like an adapter and then, inside the container, reads each
// SKILL.md path its prompt names, replying with what it found.
type skillReader struct{ ports providers.AdapterConfig }

func (p *skillReader) ID() providers.ProviderID { return providers.Kimi }

func (p *skillReader) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return providers.Capabilities{Label: "skill reader", Skills: providers.SkillsInstructions}, nil
}

func (p *skillReader) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	target, err := p.ports.Preparer.Prepare(ctx, providers.PrepareRequest{Provider: req.Provider, ProjectID: req.ProjectID,
		ProjectUID: req.ProjectUID, Skills: req.Skills}, emit)
	if err != nil {
		return err
	}
	var reply strings.Builder
	for _, line := range strings.Split(req.Prompt, "\n") {
		path, ok := strings.CutPrefix(line, "- ")
		if !ok {
			continue
		}
		proc, err := p.ports.Containers.Container(target.Container).Start(ctx, providers.Command{Path: "cat", Args: []string{path}})
		if err != nil {
			return err
		}
		_ = proc.Stdin().Close()
		out, _ := io.ReadAll(proc.Stdout())
		_, _ = io.Copy(io.Discard, proc.Stderr())
		if err := proc.Wait(); err != nil {
			reply.WriteString("unreadable " + path + "\n")
			continue
		}
		reply.Write(out)
	}
	emit(providers.Event{Type: providers.EventAssistantDelta, Text: reply.String(), MessageID: "m1"})
	emit(providers.Event{Type: providers.EventRunCompleted})
	return nil
}

// TestProjectChatInstructionsSkillInContainer (S7, LXD): in a project chat
// the `instructions` strategy names a SKILL.md the agent inside the
// container can read: the published copy, not the host's skills_dir.
func TestProjectChatInstructionsSkillInContainer(t *testing.T) {
	skills := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skills, "review"), 0o755); err != nil {
		t.Fatal(err)
	}
	const body = "---\nname: review\n---\nReview skill body 81c2.\n"
	if err := os.WriteFile(filepath.Join(skills, "review", "SKILL.md"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newProjectEnv(t, projectEnvOpts{
		skillsDir: skills,
		steps: &provisioning.StepsOptions{SkillsDir: skills, Providers: map[providers.ProviderID]provisioning.ProviderSetup{
			providers.Kimi: {SkillLinkDir: "/root/.kimi-code/skills"},
		}},
		providers: []func(providers.AdapterConfig) providers.Provider{func(ports providers.AdapterConfig) providers.Provider {
			return &skillReader{ports: ports}
		}},
	})
	name := uniqueProject("skills")
	e.createProject(t, "alice", api.CreateProjectRequest{Name: name, Provider: "kimi"})
	status, out := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "kimi", Project: name})
	if status != http.StatusCreated {
		t.Fatalf("create chat: %d %s", status, out)
	}
	var chat api.Chat
	if err := json.Unmarshal(out, &chat); err != nil {
		t.Fatal(err)
	}
	if status, out := e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "go", Skills: []string{"review"}}); status != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", status, out)
	}
	e.waitIdle(chat.ID)
	var text strings.Builder
	for _, ev := range e.events(chat.ID) {
		if ev.Type == api.EventError {
			t.Fatalf("run failed: %s", ev.Message)
		}
		if ev.Type == "assistant_text" {
			text.WriteString(ev.Text)
		}
	}
	if !strings.Contains(text.String(), "Review skill body 81c2.") {
		t.Fatalf("the agent in the container could not read the skill its prompt names: %q", text.String())
	}
}
