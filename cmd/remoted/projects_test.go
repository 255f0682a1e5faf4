package main

import (
	"slices"
	"testing"

	"remote/config"
	"remote/providers"
)

func TestProviderSetupsOverlayConfig(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(`
[projects]
container_home = "/home/user"
[providers.claude]
check = ["/opt/claude", "--version"]
[[providers.claude.install_files]]
host = "/srv/claude"
container = "/opt/claude"
mode = "0755"
[providers.codex]
install = ["apk", "add", "codex"]
instructions_path = "/etc/codex/AGENTS.md"
`))
	if err != nil {
		t.Fatal(err)
	}
	got := providerSetups(cfg, "/host")
	tests := []struct {
		name string
		ok   bool
	}{
		{"claude check from config", slices.Equal(got[providers.Claude].Check, []string{"/opt/claude", "--version"})},
		{"claude install files from config", len(got[providers.Claude].InstallFiles) == 1 && got[providers.Claude].InstallFiles[0].Mode == 0o755},
		{"claude credentials default under both homes", got[providers.Claude].Credentials[0].Host == "/host/.claude/.credentials.json" && got[providers.Claude].Credentials[0].Container == "/home/user/.claude/.credentials.json"},
		{"codex install command replaces the default", slices.Equal(got[providers.Codex].InstallCommand, []string{"apk", "add", "codex"}) && got[providers.Codex].InstallFiles == nil},
		{"codex instructions path from config", got[providers.Codex].InstructionsPath == "/etc/codex/AGENTS.md"},
		{"codex refuses api-key auth by default", got[providers.Codex].Credentials[0].RejectAPIKey},
		{"kimi keeps its defaults", slices.Equal(got[providers.Kimi].Check, []string{"kimi", "--version"})},
		{"claude with its own install keeps out of the cli store", got[providers.Claude].StoreCLI == ""},
		{"codex with its own install keeps out of the cli store", got[providers.Codex].StoreCLI == ""},
		{"minimax runs the store's codex", got[providers.MiniMax].StoreCLI == providers.Codex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("%+v", got)
			}
		})
	}
}

// TestProviderSetupsCLIStore: the defaults run the store's CLI; an
// operator's own check, install, install_files or absolute binary keeps
// that provider as configured (the store stays out).
func TestProviderSetupsCLIStore(t *testing.T) {
	for _, tc := range []struct {
		toml string
		want providers.ProviderID
	}{
		{"", providers.Claude},
		{"[providers.claude]\nbinary = \"claude\"\n", providers.Claude},
		{"[providers.claude]\nbinary = \"/opt/me/claude\"\n", ""},
		{"[providers.claude]\ncheck = [\"true\"]\n", ""},
		{"[providers.claude]\ninstall = [\"apk\", \"add\", \"claude\"]\n", ""},
		{"[[providers.claude.install_files]]\nhost = \"/srv/claude\"\ncontainer = \"/opt/claude\"\n", ""},
	} {
		cfg, err := config.Parse("t.toml", []byte(tc.toml))
		if err != nil {
			t.Fatal(err)
		}
		if got := providerSetups(cfg, "/host")[providers.Claude].StoreCLI; got != tc.want {
			t.Errorf("%q: StoreCLI %q, want %q", tc.toml, got, tc.want)
		}
	}
}
