// Package daemon owns remoted's Unix-socket HTTP API: peer-credential access
// control and who a peer may act as (access.go), the route table, its
// audit line and its single error mapping (routes.go, errors.go, httpx.go), the chat WebSocket (ws.go), event replay
// and follow streams (events.go), the prompt service (service.go,
// promptbuild.go, projection.go, sessions.go), its storage guard (storage.go:
// free space, byte caps, run ends that could not be stored yet), the run hub
// (hub.go) and the provider registry (registry.go). It builds on config, providers,
// provisioning, lxdexec and the store; nothing outside cmd/ imports it, and
// it never imports a provider adapter (cmd/remoted wires those).
//
// Extending it: the project routes live in project*.go and join the table
// through Options.RouteProviders (a RouteProvider returns []Route); project
// chats are admitted through Options.Projects (ProjectChats). Their handlers
// use decodeBody, writeJSON, UserFrom and the error classes, and get the same
// peer check, Origin rule, access check, audit line and JSON error envelope
// as every other route.
package daemon
