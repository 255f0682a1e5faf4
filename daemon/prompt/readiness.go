package prompt

import (
	"context"

	"remote/api"
	"remote/internal/errdefs"
	"remote/providers"
)

// ReadinessOf returns p's readiness for the API, or nil when the adapter
// cannot report one.
func ReadinessOf(ctx context.Context, p providers.Provider) *api.ProviderReadiness {
	rc, ok := p.(providers.ReadinessChecker)
	if !ok {
		return nil
	}
	r := rc.Readiness(ctx)
	return &api.ProviderReadiness{
		Ready: r.Ready, BinaryFound: r.BinaryFound, Binary: r.Binary, Version: r.Version,
		TestedVersion: r.TestedVersion, Tested: r.Tested, LoggedIn: r.LoggedIn, Auth: r.Auth,
		Action: r.Action, CheckedAt: r.CheckedAt,
	}
}

// checkReady refuses a loose-chat prompt to a provider whose host CLI is
// not ready (missing, not runnable, not logged in) at once, with the
// readiness's one-line action: 503 unavailable. Project chats run the CLI
// in the container with its own install and possibly project secrets, so
// they are not gated on the host CLI, only on a credential every run needs
// from the daemon's config (providers.CredentialChecker).
func checkReady(ctx context.Context, id string, p providers.Provider, chat api.Chat) error {
	if cc, ok := p.(providers.CredentialChecker); ok {
		if a := cc.MissingCredential(); a != "" {
			return errdefs.Unavailable("provider %q is not ready: %s", id, a)
		}
	}
	if chat.Project != "" {
		return nil
	}
	r := ReadinessOf(ctx, p)
	if r == nil || r.Ready {
		return nil
	}
	return errdefs.Unavailable("provider %q is not ready: %s", id, r.Action)
}
