package claude

import (
	"slices"

	"remote/providers"
)

// DefaultBinary is the CLI run when the config names none.
const DefaultBinary = "claude"

// BrowserMCPConfigPath is where, inside a project container, the browser
// MCP server configuration is expected when a run enables the browser;
// project preparation publishes it there.
const BrowserMCPConfigPath = "/root/.config/remote/browser-mcp.json"

// Efforts are the --effort levels the CLI accepts; others are not passed.
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

// Models are the model aliases offered to users; the CLI resolves them.
// They are the aliases the pinned CLI's own `--help` names for --model
// ("fable", "opus", "sonnet") plus "haiku", from its alias list
// (TestModelAliasesMatchCLI checks the help against this list).
var Models = []string{"opus", "sonnet", "haiku", "fable"}

// Args returns the CLI arguments for req (the prompt goes on stdin). With
// inContainer, an enabled browser adds the published MCP configuration.
func Args(req providers.RunRequest, extra []string, inContainer bool) []string {
	args := []string{"-p", "--output-format", "stream-json", "--include-partial-messages", "--verbose"}
	if req.Mode == providers.ModePlan {
		args = append(args, "--permission-mode", "plan")
	} else {
		args = append(args, "--dangerously-skip-permissions")
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if e := req.Preferences.ReasoningEffort; e != "" && slices.Contains(Efforts, e) {
		args = append(args, "--effort", e)
	}
	if req.Preferences.ServiceTier == "fast" {
		args = append(args, "--settings", `{"fastMode":true}`)
	}
	if req.ResumeID != "" {
		args = append(args, "--resume", req.ResumeID)
		if req.Fork {
			args = append(args, "--fork-session")
		}
	}
	if inContainer && req.EnableBrowser {
		args = append(args, "--mcp-config", BrowserMCPConfigPath)
	}
	return append(args, extra...)
}

// forcedEnv is the environment the adapter always sets for req: outside
// plan mode IS_SANDBOX=1, without which the CLI refuses
// --dangerously-skip-permissions as root.
func forcedEnv(req providers.RunRequest) map[string]string {
	if req.Mode == providers.ModePlan {
		return map[string]string{}
	}
	return map[string]string{"IS_SANDBOX": "1"}
}
