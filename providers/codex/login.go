package codex

import (
	"context"
	"fmt"
	"strings"

	"remote/providers"
	"remote/providers/probe"
)

var _ providers.LoginDriver = (*Provider)(nil)

// StartLogin runs `codex login --device-auth` as the host user with the
// runs' CODEX_HOME: Codex prints a URL and a one-time code, the user signs
// in at the URL from any browser and enters the code, and Codex (polling)
// stores its tokens in CODEX_HOME/auth.json. An API-key login is refused:
// Codex runs on the host user's ChatGPT subscription only (S13).
func (p *Provider) StartLogin(_ context.Context, method string) (providers.LoginSession, error) {
	switch method {
	case "", providers.LoginMethodDeviceCode:
	case providers.LoginMethodAPIKey:
		return nil, fmt.Errorf("%w: Codex runs on a ChatGPT subscription only; an OpenAI API key is not accepted (S13): use the device-code login", providers.ErrLoginMethod)
	default:
		return nil, fmt.Errorf("%w: Codex offers %q only, not %q", providers.ErrLoginMethod, providers.LoginMethodDeviceCode, method)
	}
	env, _, err := p.hostEnv(nil)
	if err != nil {
		return nil, err
	}
	args := append([]string{"login", "--device-auth"}, p.opts.LoginArgs...)
	return probe.StartLogin(probe.LoginSpec{
		Launcher: p.probe.Launcher,
		Command:  providers.Command{Path: p.cfg.Binary, Args: args, Env: env, Dir: "/"},
		Method:   providers.LoginMethodDeviceCode,
		Parser:   &deviceCodeParser{},
		OnDone:   func(providers.LoginStatus) { p.probe.Invalidate() },
	})
}

// Logout runs `codex logout` as the host user (Codex removes auth.json
// and revokes the tokens).
func (p *Provider) Logout(ctx context.Context) (string, error) {
	env, _, err := p.hostEnv(nil)
	if err != nil {
		return "", err
	}
	defer p.probe.Invalidate()
	return probe.RunLogout(ctx, p.probe.Launcher, providers.Command{Path: p.cfg.Binary, Args: []string{"logout"}, Env: env, Dir: "/"})
}

// deviceCodeParser reads what `codex login --device-auth` prints
// (codex-rs/login/src/device_code_auth.rs, print_device_code_prompt):
//
//  1. Open this link in your browser and sign in to your account
//     https://auth.openai.com/codex/device
//  2. Enter this one-time code (expires in 15 minutes)
//     ABCD-1234
//
// then "Successfully logged in" on stderr, or "Error logging in with
// device code: …" and exit 1.
type deviceCodeParser struct {
	want string // "url" or "code": what the previous line announced
}

func (d *deviceCodeParser) Line(line string, partial bool, st *providers.LoginStatus) {
	if partial {
		return
	}
	switch {
	case strings.Contains(line, "Open this link in your browser"):
		d.want = "url"
	case strings.Contains(line, "Enter this one-time code"):
		d.want = "code"
	case d.want == "url" && (strings.HasPrefix(line, "https://") || strings.HasPrefix(line, "http://")):
		st.URL, d.want = line, ""
	case d.want == "code" && !strings.ContainsAny(line, " \t"):
		st.UserCode, d.want = line, ""
		st.Message = "open the URL, sign in with your ChatGPT account and enter the code"
	case strings.HasPrefix(line, "Error logging in"), strings.Contains(line, "device code login is not enabled"),
		strings.Contains(line, "device auth timed out"), strings.Contains(line, "device auth failed"):
		st.Message = line
	}
}
