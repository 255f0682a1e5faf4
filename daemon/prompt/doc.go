// Package prompt is the prompt service: it admits a prompt (validation,
// storage bounds, the provider's capabilities and readiness, the allowed
// roots of a loose chat, the project check of a project chat), builds the
// provider-neutral RunRequest from the chat's state (saved sessions,
// visible history, skills), runs the provider under the run hub's lock as
// one turn, and turns what it emits into stored chat events (projected by
// daemon/prompt/projection), ending every run with a terminal event. It also owns the provider registry, the
// directories loose chats may run in (Roots), usage records and restart
// recovery; the storage guard ([daemon] min_free, max_run_bytes,
// max_chat_bytes) is daemon/storageguard.
//
// Its errors are errdefs classes; it never chooses an HTTP status and must
// never import net/http, the HTTP layer (package daemon), the project
// routes or a provider adapter (cmd/remoted wires those). It builds on
// api, providers, provisioning (checkpoint turns), runner (host users),
// the run hub, the store, the storage guard and metrics.
package prompt
