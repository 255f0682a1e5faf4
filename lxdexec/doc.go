// Package lxdexec is this project's client for LXD's REST API 1.0: server
// info, instances and their state, operations, exec over WebSockets, files,
// lifecycle events and proxy devices, over the local Unix socket or HTTPS with
// a client certificate. It imports nothing of this module.
package lxdexec
