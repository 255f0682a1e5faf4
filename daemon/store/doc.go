// Package store owns the daemon's durable state in one bbolt file: projects,
// chats, per-chat event logs with gapless sequence numbers, and project
// secrets encrypted at rest (AES-256-GCM).
//
// Layout: buckets meta (schema version, key check), chats (id -> JSON
// api.Chat), events (one sub-bucket per chat: 8-byte big-endian seq -> JSON
// api.Event without its seq), projects (name -> JSON api.Project) and
// secrets (one sub-bucket per project: key -> sealed value), plus eventbytes
// (chat id -> the byte size of its event log, for the daemon's caps) and
// queue (one sub-bucket per chat: 8-byte position -> JSON
// api.QueuedPrompt; the chat record keeps only their count). A
// write that fails for want of disk space is ErrNoSpace. Appends are
// group-committed: one committer goroutine writes everything queued in one
// transaction and fsync, then acknowledges in order.
//
// It imports only api, internal/errdefs (its error classes), bbolt and
// hclog; nothing of the daemon, providers or LXD, so it can be tested and
// benchmarked alone.
package store
