// Package daemon owns remoted's Unix-socket HTTP API: peer-credential access
// control and who a peer may act as, the route table with its audit line,
// the single error mapping (ToHTTP: errdefs classes to statuses and envelope
// codes), the JSON helpers, the handlers of chats, events, history, usage,
// info and metrics, the chat and workspace WebSockets and the fork route.
//
// The layers below it are packages of their own: the prompt service
// (daemon/prompt), the run hub (daemon/runhub), the Prometheus series
// (daemon/metrics), webhook notifications (daemon/webhook), fork at a turn
// (daemon/fork), the events route's replay and follow streams
// (daemon/eventstream) and the store (daemon/store). It builds on those, api, providers and errdefs; nothing
// outside cmd/ and the route providers (daemon/projectapi, daemon/repoapi,
// daemon/loginapi: the host CLIs' logins, daemon/doctor)
// imports it, and it never imports provisioning, lxdexec, a provider
// adapter or a route provider (cmd/remoted wires those).
//
// docs/architecture.md shows how these layers meet; the guarantees its
// comments cite as (S1)…(S31) are the items of docs/behaviour.md, and the
// API it serves is docs/api.md.
//
// Extending it: the project routes (daemon/projectapi) join the table
// through Options.RouteProviders (a RouteProvider returns []Route); project
// chats are admitted through Options.Projects (ProjectChats). Handlers
// outside this package use DecodeBody, WriteJSON, UserFrom and errdefs
// classes, and get the same peer check, Origin rule, access check, audit
// line and JSON error envelope as every other route.
package daemon
