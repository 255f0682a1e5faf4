// Package lxdws owns the client side of LXD's websockets for lxdexec:
// Conn (one writer at a time, pings answered while reading even after a
// failed pong) and a running exec's streams (Exec): stdin in frames of at
// most 64 KiB, stdout and stderr read with backpressure up to LXD's
// end-of-stream barrier, the control socket (signal, window size), and
// the supervision that sends SIGTERM, then SIGKILL after the grace, when
// the caller's context ends.
//
// lxdexec dials the websockets and waits for the operation; this package
// never makes a request of its own. It imports only the standard library
// and gorilla/websocket, and must never import lxdexec (which imports it)
// or anything else of this module.
package lxdws
