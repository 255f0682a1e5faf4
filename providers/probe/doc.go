// Package probe owns what a provider asks its CLI outside a turn: Probe,
// the cached readiness check (the binary on the host user's PATH, its
// --version against the tested one, its login through the adapter's
// AuthStatus), and Login/StartLogin/RunLogout, the interactive login and
// logout a CLI runs under a providers.Launcher, with RedactLoginMessage
// keeping tokens out of what it reports.
//
// It imports providers and providers/runner (the launch contract, HostEnv,
// LookPath) only, and must never import the daemon, the store, the
// transport, provisioning or any adapter.
package probe
