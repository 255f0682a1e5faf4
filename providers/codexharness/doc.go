// Package codexharness owns the `codex app-server` JSON-RPC session shared by
// the Codex and MiniMax adapters (S19–S23): the message decoder, the
// notification parser that turns app-server output into normalized
// providers.Event values, and Run, which drives one turn over stdio through a
// providers.Launcher (initialize, thread start/resume/fork, turn start,
// pending server requests, native interrupt on cancel).
//
// Decisions beyond docs/behaviour.md (S19–S23), checked against Codex 0.169:
//   - Every server→client request, known or not, is shown as
//     interaction.request (InteractionID = the JSON text of its id) and stays
//     pending until an explicit InteractionResponse names it; nothing is ever
//     answered for the user, not even -32601 for unknown methods. Requests
//     still pending when the turn ends (Codex does not settle them on an
//     interrupt) are closed with interaction.resolved status "expired".
//     interaction.resolved carries a status (approved, denied, cancelled,
//     answered, error, resolved, expired), never the answer itself.
//   - Tool output deltas and reasoning part announcements are dropped: the
//     completed item carries the whole output. Streaming deltas of child
//     threads are dropped too; their other notifications become collaboration
//     events and never end the run.
//   - A terminal `error` notification followed by a failed turn/completed
//     with the same message yields only run.failed, so a chat shows the
//     failure once.
//   - Token usage counts only for the current turn: a resumed thread replays
//     its last usage before the turn starts, and that becomes provider.native.
//   - A cancel before turn/start skips the turn; after it, turn/interrupt is
//     sent and the process gets InterruptTimeout to report the interrupted
//     turn before it is killed. Either way the run ends run.interrupted and
//     Run returns nil.
//   - After the parent turn's turn/completed, stdin is closed (S19) and the
//     process gets ExitGrace to exit; one still running then is stopped
//     (the launcher's SIGTERM, then SIGKILL) and the turn it reported
//     stands: a CLI that never exits cannot hold the chat running.
//
// It imports only the providers contracts; it must not import the daemon,
// store, transport, lxdexec, runner or any adapter package. Building the
// command line and environment is the adapters' job.
package codexharness
