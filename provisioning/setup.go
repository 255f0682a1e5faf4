package provisioning

import (
	"os"

	"remote/providers"
)

// ProviderSetup is how one provider's CLI, credentials and files get into
// a container. cmd/remoted builds it from [providers.<id>] in config, on top
// of DefaultSetups.
type ProviderSetup struct {
	// Check is run in the container; exit 0 means the CLI is installed
	// (e.g. ["claude", "--version"]). Empty: the CLI is assumed present.
	Check []string
	// InstallCommand is run in the container when Check fails (e.g. an
	// npm global install). Used when InstallFiles is empty.
	InstallCommand []string
	// InstallFiles are pushed from the host when Check fails: the binary
	// and the shared libraries it needs, for containers without network.
	InstallFiles []File
	// StoreCLI names the CLI store's CLI this provider runs (claude,
	// codex); when the store has a version of it selected, that version
	// is mounted instead of Check/InstallCommand/InstallFiles. Empty: the
	// store is not used (an operator's own check/install keys clear it).
	StoreCLI providers.ProviderID
	// Credentials are host credential files pushed 0600 with the container
	// user's ownership, and synced back after a run when Sync is set (S12).
	Credentials []Credential
	// InstructionsPath is the user-level instruction file the shared
	// instructions are published to (e.g. /root/.claude/CLAUDE.md).
	InstructionsPath string
	// SkillLinkDir is where this provider looks for skills; each published
	// skill gets a link <SkillLinkDir>/<name> → /workspace/.agents/skills/<name>.
	SkillLinkDir string
	// Assets are the profile's non-secret runtime files (settings, model
	// catalog, MCP configs).
	Assets []File
	// BrowserAssets are published only when a run asks for the browser and
	// the provider supports it; otherwise they are removed.
	BrowserAssets []File
}

// File is one file copied from the host (Host) or given inline (Content)
// to a path in the container.
type File struct {
	Host      string // host path; read at preparation time
	Content   []byte // used when Host is empty
	Container string // absolute path in the container
	Mode      os.FileMode
}

// Credential is one host credential file of a provider.
type Credential struct {
	Host      string // host path, e.g. /root/.claude/.credentials.json
	Container string // container path, e.g. /root/.claude/.credentials.json
	// Sync copies the container's copy back to Host after a successful run
	// when it is newer (Claude, Codex, Kimi).
	Sync bool
	// RejectAPIKey refuses a record marked as API-key authentication (S13).
	RejectAPIKey bool
}

// SkillsRoot is where skills are published inside the container.
const SkillsRoot = "/workspace/.agents/skills"

// ScheduleSkill is the skill published when a run asks for scheduled
// tooling.
const ScheduleSkill = "scheduled-tasks"

// DefaultSetups returns the built-in provisioning of each provider for a
// container user whose home is home (e.g. "/root") and a host user whose
// home is hostHome. CLIs install with npm by default; credentials are the
// CLIs' own files.
func DefaultSetups(home, hostHome string) map[providers.ProviderID]ProviderSetup {
	return map[providers.ProviderID]ProviderSetup{
		providers.Claude: {
			Check:          []string{"claude", "--version"},
			StoreCLI:       providers.Claude,
			InstallCommand: []string{"npm", "install", "-g", "@anthropic-ai/claude-code"},
			Credentials: []Credential{{
				Host: hostHome + "/.claude/.credentials.json", Container: home + "/.claude/.credentials.json", Sync: true,
			}},
			InstructionsPath: home + "/.claude/CLAUDE.md",
			SkillLinkDir:     home + "/.claude/skills",
		},
		providers.Codex: {
			Check:          []string{"codex", "--version"},
			StoreCLI:       providers.Codex,
			InstallCommand: []string{"npm", "install", "-g", "@openai/codex"},
			Credentials: []Credential{{
				Host: hostHome + "/.codex/auth.json", Container: home + "/.codex/auth.json", Sync: true, RejectAPIKey: true,
			}},
			InstructionsPath: home + "/.codex/AGENTS.md",
			SkillLinkDir:     home + "/.codex/skills",
		},
		providers.MiniMax: {
			Check:            []string{"codex", "--version"},
			StoreCLI:         providers.Codex,
			InstallCommand:   []string{"npm", "install", "-g", "@openai/codex"},
			InstructionsPath: home + "/.minimax/AGENTS.md",
			SkillLinkDir:     home + "/.minimax/skills",
		},
		providers.Kimi: {
			Check:          []string{"kimi", "--version"},
			InstallCommand: []string{"npm", "install", "-g", "@moonshot-ai/kimi-code"},
			Credentials: []Credential{{
				Host: hostHome + "/.kimi-code/credentials.json", Container: home + "/.kimi-code/credentials.json", Sync: true,
			}},
			InstructionsPath: home + "/.kimi-code/AGENTS.md",
			SkillLinkDir:     home + "/.kimi-code/skills",
		},
		providers.Antigravity: {
			Check:            []string{"agy", "--version"},
			InstallCommand:   []string{"npm", "install", "-g", "@google/antigravity-cli"},
			InstructionsPath: home + "/.gemini/GEMINI.md",
			SkillLinkDir:     home + "/.gemini/skills",
		},
	}
}
