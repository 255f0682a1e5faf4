// Package store owns the daemon's durable state in one bbolt file: projects,
// chats, per-chat event logs with gapless sequence numbers, and project
// secrets encrypted at rest. It imports only api and its storage libraries.
package store
