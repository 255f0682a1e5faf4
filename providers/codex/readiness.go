package codex

import (
	"context"
	"maps"
	"path/filepath"
	"strings"

	"remote/internal/lazyre"
	"remote/providers"
	"remote/providers/probe"
	"remote/providers/runner"
)

// LoginAction is the line shown when Codex is not logged in.
const LoginAction = "Codex is not logged in: log in from the page (Providers) or with `remotectl providers login codex` " +
	"(or run `codex login --device-auth` as the host user); a ChatGPT subscription only, API-key logins are refused (S13)"

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
func (p *Provider) loginStatus(ctx context.Context, host probe.Host) probe.AuthStatus {
	if mp := p.modelProvider(ctx, host); mp != "" && mp != "openai" {
		// A custom [model_providers] entry brings its own endpoint and key
		// (env_key): Codex needs no login for it.
		return probe.AuthStatus{LoggedIn: true, Auth: providers.AuthModelProvider}
	}
	stdout, stderr, err := host.Run(ctx, "login", "status")
	out := stdout + "\n" + stderr
	switch {
	case strings.Contains(out, "Not logged in"):
		return probe.AuthStatus{Auth: providers.AuthNone, Action: LoginAction}
	case strings.Contains(out, "Logged in using ChatGPT"):
		return probe.AuthStatus{LoggedIn: true, Auth: providers.AuthSubscription}
	case strings.Contains(out, "API key"):
		return probe.AuthStatus{Auth: providers.AuthAPIKey, Action: APIKeyAction}
	case err != nil && strings.Contains(out, "CODEX_HOME points to"):
		return probe.AuthStatus{Auth: providers.AuthNone, Action: LoginAction}
	}
	return probe.AuthStatus{Auth: providers.AuthUnknown}
}

var tableRE = lazyre.New(`(?m)^\s*\[`)

var modelProviderRE = lazyre.New(`(?m)^\s*model_provider\s*=\s*["']([^"'\n]+)["']`)

// modelProvider is the model provider the runs use: a `-c model_provider=`
// in the configured args, else the top-level model_provider of
// CODEX_HOME/config.toml (read as the host user); "" when neither names one.
func (p *Provider) modelProvider(ctx context.Context, host probe.Host) string {
	for i, a := range p.cfg.Args {
		kv := strings.TrimPrefix(a, "--config=")
		if (a == "-c" || a == "--config") && i+1 < len(p.cfg.Args) {
			kv = p.cfg.Args[i+1]
		}
		if v, ok := strings.CutPrefix(kv, "model_provider="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	home, err := p.HostCodexHome()
	if err != nil {
		return ""
	}
	b, err := host.ReadFile(ctx, filepath.Join(home, "config.toml"))
	if err != nil {
		return ""
	}
	// Only the part before the first table is top level.
	if i := tableRE.FindIndex(b); i != nil {
		b = b[:i[0]]
	}
	if m := modelProviderRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}
