// Package daemon owns remoted's Unix-socket HTTP API: peer-credential access
// control and who a peer may act as, the route table with its audit line and
// its single error mapping to the JSON envelope, the chat and workspace
// WebSockets, event replay and follow streams, the prompt service with its
// storage guard (free space, byte caps, run ends that could not be stored
// yet), the run hub and the provider registry. docs/architecture.md shows
// how these layers meet; the guarantees its comments cite as (S1)…(S31) are
// the items of docs/behaviour.md, and the API it serves is docs/api.md.
//
// It builds on config, providers, provisioning, lxdexec and the store;
// nothing outside cmd/ imports it (daemon/daemontest, for tests, aside), and
// it never imports a provider adapter (cmd/remoted wires those).
//
// Extending it: the project routes join the table through
// Options.RouteProviders (a RouteProvider returns []Route); project chats
// are admitted through Options.Projects (ProjectChats). Their handlers use
// decodeBody, writeJSON, UserFrom and the error classes, and get the same
// peer check, Origin rule, access check, audit line and JSON error envelope
// as every other route.
package daemon
