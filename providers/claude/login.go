package claude

import (
	"context"
	"fmt"
	"strings"

	"remote/providers"
	"remote/providers/probe"
	"remote/providers/runner"
)

var _ providers.LoginDriver = (*Provider)(nil)

// StartLogin runs `claude auth login` (Claude subscription, the CLI's
// default) as the host user with the runs' environment. Without a
// terminal the CLI prints the sign-in URL and waits on its input for the
// code the sign-in page shows afterwards ("Paste code here if prompted >
// "): the user submits it with SubmitCode and the CLI stores its
// credentials (~/.claude/.credentials.json). `claude setup-token` is not
// used: it needs a terminal and only prints a token for the user to keep.
// An API-key login is not offered here.
func (p *Provider) StartLogin(_ context.Context, method string) (providers.LoginSession, error) {
	switch method {
	case "", providers.LoginMethodOAuth:
	default:
		return nil, fmt.Errorf("%w: Claude Code offers %q (sign in with your Claude account, paste the code back), not %q", providers.ErrLoginMethod, providers.LoginMethodOAuth, method)
	}
	return probe.StartLogin(probe.LoginSpec{
		Launcher: p.probe.Launcher,
		Command:  providers.Command{Path: p.cfg.Binary, Args: []string{"auth", "login"}, Env: runner.HostEnv(p.cfg.Env), Dir: "/"},
		Method:   providers.LoginMethodOAuth,
		Parser:   &oauthParser{},
		OnDone:   func(providers.LoginStatus) { p.probe.Invalidate() },
	})
}

// Logout runs `claude auth logout` as the host user.
func (p *Provider) Logout(ctx context.Context) (string, error) {
	defer p.probe.Invalidate()
	return probe.RunLogout(ctx, p.probe.Launcher, providers.Command{Path: p.cfg.Binary, Args: []string{"auth", "logout"}, Env: runner.HostEnv(p.cfg.Env), Dir: "/"})
}

// oauthParser reads what `claude auth login` prints without a terminal:
//
//	Opening browser to sign in…
//	If the browser didn't open, visit: https://claude.com/cai/oauth/authorize?…
//	Paste code here if prompted >
//
// then "Login successful." (exit 0), "Couldn't log in: …" / "OAuth
// login failed: …" (exit 1), or, for a code that is not whole, "That
// doesn't look like the full code. …" and another wait for a code.
type oauthParser struct{ prompted bool }

func (o *oauthParser) Line(line string, partial bool, st *providers.LoginStatus) {
	switch {
	case strings.Contains(line, "visit: http"): // 2.1.328: the URL on the same line
		st.URL = strings.TrimSpace(line[strings.Index(line, "visit: ")+len("visit: "):])
	case st.URL == "" && !partial && strings.HasPrefix(line, "https://"): // 2.1.332: on the next line
		st.URL = line
	case strings.HasPrefix(line, "Paste code here"):
		if !o.prompted { // once: the tail is seen again when its line ends
			o.prompted, st.NeedsCode = true, true
			st.Message = "open the URL, sign in with your Claude account, then paste the code the page shows"
		}
	case strings.HasPrefix(line, "That doesn't look like the full code"):
		// The CLI refused the pasted code and waits for another.
		st.NeedsCode, st.Message = true, line
	case strings.HasPrefix(line, "Couldn't log in"), strings.HasPrefix(line, "OAuth login failed"),
		strings.HasPrefix(line, "Input ended before a code was pasted"), strings.HasPrefix(line, "Login interrupted"):
		st.Message = line
	}
}
