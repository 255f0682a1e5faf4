package codex

import (
	"context"
	"maps"
	"strings"

	"remote/providers"
	"remote/providers/runner"
)

// LoginAction is the line shown when Codex is not logged in.
const LoginAction = "Codex is not logged in: run `codex login --device-auth` as the host user " +
	"(a ChatGPT subscription; API-key logins are refused, S13)"

// APIKeyAction is the line shown when Codex is logged in with an API key.
const APIKeyAction = "Codex is logged in with an API key, which Remote refuses (S13): " +
	"run `codex logout`, then `codex login --device-auth` as the host user"

// ParseVersion reads `codex --version` ("codex-cli 0.169.0").
func ParseVersion(out string) string {
	f := strings.Fields(out)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// hostEnv is the environment of a host run (and of its probes): the
// configured env with CODEX_HOME set and OPENAI_API_KEY removed (S13).
func (p *Provider) hostEnv(runtime map[string]string) ([]string, string, error) {
	home, err := p.HostCodexHome()
	if err != nil {
		return nil, "", err
	}
	extra := maps.Clone(p.cfg.Env)
	if extra == nil {
		extra = map[string]string{}
	}
	maps.Copy(extra, runtime)
	extra["CODEX_HOME"] = home
	delete(extra, "OPENAI_API_KEY")
	return runner.WithoutEnv(runner.HostEnv(extra), "OPENAI_API_KEY"), home, nil
}

// Readiness reports the host CLI: found, version, login (`codex login
// status`, run as the host user with the runs' CODEX_HOME).
func (p *Provider) Readiness(ctx context.Context) providers.Readiness { return p.probe.Readiness(ctx) }

// Invalidate drops the cached readiness (after a login or logout).
func (p *Provider) Invalidate() { p.probe.Invalidate() }

// loginStatus reads `codex login status` (its lines go to stderr; exit 1
// when logged out). Only the kind of login is kept: the masked key Codex
// prints for an API-key login is never passed on.
func loginStatus(ctx context.Context, run runner.ProbeRun) runner.AuthStatus {
	stdout, stderr, err := run(ctx, "login", "status")
	out := stdout + "\n" + stderr
	switch {
	case strings.Contains(out, "Not logged in"):
		return runner.AuthStatus{Auth: providers.AuthNone, Action: LoginAction}
	case strings.Contains(out, "Logged in using ChatGPT"):
		return runner.AuthStatus{LoggedIn: true, Auth: providers.AuthSubscription}
	case strings.Contains(out, "API key"):
		return runner.AuthStatus{Auth: providers.AuthAPIKey, Action: APIKeyAction}
	case err != nil && strings.Contains(out, "CODEX_HOME points to"):
		return runner.AuthStatus{Auth: providers.AuthNone, Action: LoginAction}
	}
	return runner.AuthStatus{Auth: providers.AuthUnknown}
}
