// Package shim owns remote-shim: the small supervisor that runs one run's
// CLI so the run outlives the daemon (issue 17, providers/runslot.go).
//
// It holds the wire protocol between the daemon and a shim (a JSON hello
// line each way, then length-prefixed frames), the layout of a run
// directory (shim.sock, the stdout and stderr spools, exit, pid), the
// server loop cmd/remote-shim runs (Serve), and the daemon-side client
// (Client) the launchers of providers/runner use.
//
// A run directory D (mode 0700) holds:
//
//	shim.sock  the unix socket (0600) the daemon connects to
//	stdout     the CLI's stdout, append-only: byte offsets are file offsets
//	           (written in blocks: the newest bytes may be only in the
//	           shim's memory until the pipe ends)
//	stderr     the CLI's stderr, likewise
//	exit       {"code":N}, written once the CLI exited and both pipes ended
//	pid        the shim's pid
//
// The start spec (argv, environment, user) travels only over the socket:
// never in the shim's argv and never on disk, since the environment holds
// project secrets.
package shim
