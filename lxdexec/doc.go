// Package lxdexec is this project's client for LXD's REST API 1.0: server
// info, instances and their state, operations, exec over WebSockets, files,
// lifecycle events, proxy devices and local images (list, alias, import),
// over the local Unix socket or HTTPS
// with a client certificate and a pinned server certificate (a remote host
// or a cluster member). It works against LXD 5.0 and later and Incus; the
// version differences it absorbs are commented where it absorbs them.
//
// Every I/O method takes a context first; no context is kept in a struct.
// Errors are classes tested with errors.Is (ErrNotFound, ErrConflict, ...);
// *Error carries LXD's HTTP status and message. LXD forgets a finished
// operation after about 5 s; when it forgot one before the wait read its
// result, the outcome is decided from the instance or snapshot the
// operation was to change (ErrOperationForgotten when that does not show
// the change, or cannot).
//
// Exec streams output with backpressure: Stdout and Stderr are pipes fed
// straight from the websockets, so memory stays constant for any output
// size and an unread stream stalls the command. Pings from LXD are answered
// only while a stream is being read, so read continuously.
//
// It imports only the standard library, gorilla/websocket and its own
// sub-packages (lxdws: the websockets of exec and events; lxdtls: the TLS
// configuration and certificate pin), nothing else of this module, and
// never runs the lxc binary.
package lxdexec
