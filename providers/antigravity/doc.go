// Package antigravity is the Google Antigravity CLI (agy) adapter (S25).
// It writes the prompt to the CLI's stdin with no prompt flag, which agy
// 1.1.1 and later read in print mode; the prompt is never in argv, where
// every local user could read it. Print mode is unstructured, so the
// adapter streams raw stdout chunks as assistant deltas (blank lines and
// Markdown survive), keeps a 4 KiB tail of the combined output for
// errors, turns sign-in failures into a focused instruction, emits
// run.completed itself, and discovers the new conversation id from the
// CLI's brain directory. It imports providers and
// providers/runner only (never the daemon, store or transport).
package antigravity
