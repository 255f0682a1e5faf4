// Package shim owns remote-shim: the small supervisor that runs one run's CLI so
// the run outlives the daemon (docs/architecture.md, "Runs that outlive the
// daemon"; providers/runslot.go).
//
// It holds the wire protocol between the daemon and a shim (a JSON hello
// line each way, then length-prefixed frames), the layout of a run
// directory (shim.sock, the stdout and stderr spools, exit, pid), the
// server loop cmd/remote-shim runs (Serve), and the daemon-side client
// (Client) the launchers of providers/runner use. A run is either a run
// with frames (a container's: the shim copies the output to the spool
// files and streams it, from memory, providers/shim/live, or the files) or
// a spool run (the host's, spool.go: the connected daemon splices the
// CLI's pipes into the spool files itself, nothing copies the output).
//
// A run directory D (mode 0700) holds:
//
//	shim.sock  the unix socket (0600) the daemon connects to
//	stdout     the CLI's stdout: byte offsets are file offsets (a run with
//	           frames writes it in blocks: the newest bytes may be only
//	           in the shim's memory until the pipe ends; a spool run's
//	           holds every byte its splicer took from the pipe)
//	stderr     the CLI's stderr, likewise
//	exit       {"code":N}, written once the CLI exited and both pipes ended
//	pid        the shim's pid
//
// The start spec (argv, environment, user) travels only over the socket:
// never in the shim's argv and never on disk, since the environment holds
// project secrets.
//
// It imports internal/reaper and providers/shim/live of ours, nothing of
// the daemon's.
package shim
