// Package claude is the Claude Code adapter (S18): it runs
// `claude -p --output-format stream-json --include-partial-messages --verbose`
// with the prompt on stdin, on the host for loose chats or through LXD exec
// in a project container, and parses the stream-json lines into normalized
// events. It imports providers and providers/runner only — nothing of the
// daemon, store or transport.
package claude
