// Package kimi is the Kimi CLI adapter (S24): it runs
// `kimi --print --output-format stream-json [--model m] [--session id]`
// on the host or in a project container, with the prompt on its stdin
// (never in argv, where every local user could read it), and parses its
// OpenAI-chat-shaped JSON lines. Kimi has no native fork: a fork request
// starts fresh. It imports providers and providers/runner only (never the
// daemon, store or transport).
package kimi
