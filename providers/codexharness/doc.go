// Package codexharness owns the `codex app-server` JSON-RPC session shared by
// the Codex and MiniMax adapters (S19–S23): the message decoder, the
// notification parser that turns app-server output into normalized
// providers.Event values, and Run, which drives one turn over stdio through a
// providers.Launcher (initialize, thread start/resume/fork, turn start,
// pending server requests, native interrupt on cancel).
//
// It imports only the providers contracts; it must not import the daemon,
// store, transport, lxdexec or any adapter package. Building the command line
// and environment is the adapters' job.
package codexharness
