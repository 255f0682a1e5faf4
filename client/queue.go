package client

import (
	"context"
	"net/http"
	"net/url"

	"remote/api"
)

// Queue lists the chat's queued prompts in the order they will run.
func (c *Client) Queue(ctx context.Context, id string) ([]api.QueuedPrompt, error) {
	return fetch[[]api.QueuedPrompt](ctx, c, http.MethodGet, chatPath(id, "/queue"), nil, nil)
}

// Unqueue removes a queued prompt; not_found when the chat has none with
// that id (it may have started).
func (c *Client) Unqueue(ctx context.Context, id, qid string) error {
	return c.call(ctx, http.MethodDelete, chatPath(id, "/queue/", url.PathEscape(qid)), nil, nil, nil)
}

// Runs lists the runs in flight of the caller's chats (every chat's for
// root), with the shim that supervises each.
func (c *Client) Runs(ctx context.Context) ([]api.Run, error) {
	return fetch[[]api.Run](ctx, c, http.MethodGet, "/v1/runs", nil, nil)
}
