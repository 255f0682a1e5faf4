// Package daemon owns remoted's Unix-socket HTTP API: peer-credential access
// control and who a peer may act as, the route table with its audit line,
// the single error mapping (ToHTTP: errdefs classes to statuses and envelope
// codes), the JSON helpers, the handlers of chats, events, history, usage,
// info and metrics, the chat and workspace WebSockets, fork at a turn and
// webhook notifications.
//
// The layers below it are packages of their own: the prompt service
// (daemon/prompt), the run hub (daemon/runhub), the Prometheus series
// (daemon/metrics) and the store (daemon/store). It builds on those,
// providers, provisioning and lxdexec; nothing outside
// cmd/ and the project routes imports it, and it never imports a provider
// adapter or the project routes (cmd/remoted wires those).
//
// Extending it: the project routes (daemon/projectapi) join the table
// through Options.RouteProviders (a RouteProvider returns []Route); project
// chats are admitted through Options.Projects (ProjectChats). Handlers
// outside this package use DecodeBody, WriteJSON, UserFrom and errdefs
// classes, and get the same peer check, Origin rule, access check, audit
// line and JSON error envelope as every other route.
package daemon
