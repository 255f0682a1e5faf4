// Package fork owns fork at a turn (POST /v1/chats/{id}/fork with atSeq):
// finding the turn that holds a seq, the new chat with the visible history
// before it and a fresh provider session, and, with a container, the new
// project a ContainerForker (the project routes) makes from that turn's
// checkpoint, undone when the chat cannot be made. Package daemon serves
// the route and maps its errdefs errors to statuses.
//
// It imports api, errdefs and the run hub's ids only, and must never
// import package daemon (which imports it), the prompt service,
// provisioning, lxdexec, the runner or a provider adapter.
package fork
