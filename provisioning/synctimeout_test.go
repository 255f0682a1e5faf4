package provisioning

import (
	"testing"
	"time"

	"remote/api"
)

// TestCredentialSyncTimeoutDefault (S12): a preparer given no timeout
// bounds a credential sync by 30 s; a given one is kept.
func TestCredentialSyncTimeoutDefault(t *testing.T) {
	for _, tt := range []struct {
		given, want time.Duration
	}{{0, 30 * time.Second}, {7 * time.Second, 7 * time.Second}} {
		p, err := New(Options{LXD: &countingLXD{}, Projects: newMemStore(api.Project{Name: "p"}), CredentialSyncTimeout: tt.given})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.CredentialSyncTimeout(); got != tt.want {
			t.Errorf("given %v: sync timeout %v, want %v", tt.given, got, tt.want)
		}
	}
}

// TestSkillsRootInContainer (S7): skills are published under
// /workspace/.agents/skills, the path daemon/prompt names to a project
// chat's agent (prompt.ContainerSkillsRoot).
func TestSkillsRootInContainer(t *testing.T) {
	if SkillsRoot != "/workspace/.agents/skills" {
		t.Errorf("SkillsRoot %q, want /workspace/.agents/skills", SkillsRoot)
	}
}
