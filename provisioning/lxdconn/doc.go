// Package lxdconn owns the daemon's one LXD connection: Conn, which may
// not exist yet (every call fails with ErrUnavailable until Dial
// succeeds, so the daemon starts and serves 503s while LXD is down), Dial's
// retry with backoff, and WarnBackoff, which keeps "lxd unreachable"
// warnings to a doubling gap instead of one per retry.
//
// It imports lxdexec and errdefs only, and must never import provisioning
// (which imports it), providers, the daemon or config.
package lxdconn
