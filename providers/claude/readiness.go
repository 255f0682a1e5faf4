package claude

import (
	"context"
	"encoding/json"
	"strings"

	"remote/providers"
	"remote/providers/probe"
)

// LoginAction is the line shown when Claude Code is not logged in.
const LoginAction = "Claude Code is not logged in: log in from the page (Providers) or with `remotectl providers login claude` " +
	"(or run `claude auth login` as the host user), or set ANTHROPIC_API_KEY in [providers.claude] env"

// ParseVersion reads `claude --version` ("2.1.328 (Claude Code)").
func ParseVersion(out string) string {
	f := strings.Fields(out)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// authStatus runs `claude auth status` (JSON; exit 1 when logged out) and
// keeps only loggedIn and authMethod: the rest (e-mail, organisation) is
// never passed on.
func authStatus(ctx context.Context, host probe.Host) probe.AuthStatus {
	// The exit status only repeats loggedIn; output that is not the JSON
	// (an older CLI without `auth status`) leaves the login unknown, which
	// does not block prompts.
	out, _, _ := host.Run(ctx, "auth", "status")
	var st struct {
		LoggedIn   bool   `json:"loggedIn"`
		AuthMethod string `json:"authMethod"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(out)), &st) != nil {
		return probe.AuthStatus{Auth: providers.AuthUnknown}
	}
	if !st.LoggedIn {
		return probe.AuthStatus{Auth: providers.AuthNone, Action: LoginAction}
	}
	switch st.AuthMethod {
	case "api_key":
		return probe.AuthStatus{LoggedIn: true, Auth: providers.AuthAPIKey}
	case "none", "":
		return probe.AuthStatus{LoggedIn: true, Auth: providers.AuthUnknown}
	default: // "claude.ai", "oauth_token" (setup-token), …
		return probe.AuthStatus{LoggedIn: true, Auth: providers.AuthSubscription}
	}
}
