// Package eventstream writes a chat's events to an HTTP client for the
// events route (GET /v1/chats/{id}/events): the JSON array replay straight
// from the store's wire JSON, and the followed stream, replay then sync
// and live events, framed as NDJSON or SSE (id: SEQ) and flushed one
// event at a time with a bounded write.
//
// It reads the store through RawEvents and follows the chat through the
// run hub (Follower); the route's parsing, the caller's access and the
// stream's end at shutdown stay package daemon's, which imports it. It
// imports api and runhub only of ours, and must never import daemon, the
// prompt service, the route providers, provisioning or config.
package eventstream
