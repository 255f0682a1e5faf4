package client

import (
	"context"
	"net/http"
	"net/url"

	"remote/api"
)

func schedulePath(id string, rest ...string) string {
	p := "/v1/schedules/" + url.PathEscape(id)
	for _, r := range rest {
		p += r
	}
	return p
}

// CreateSchedule adds a schedule to a chat.
func (c *Client) CreateSchedule(ctx context.Context, chatID string, req api.ScheduleRequest) (api.Schedule, error) {
	return fetch[api.Schedule](ctx, c, http.MethodPost, chatPath(chatID, "/schedules"), nil, req)
}

// Schedules lists a chat's schedules.
func (c *Client) Schedules(ctx context.Context, chatID string) ([]api.Schedule, error) {
	return fetch[[]api.Schedule](ctx, c, http.MethodGet, chatPath(chatID, "/schedules"), nil, nil)
}

// PatchSchedule changes a schedule.
func (c *Client) PatchSchedule(ctx context.Context, id string, p api.SchedulePatch) (api.Schedule, error) {
	return fetch[api.Schedule](ctx, c, http.MethodPatch, schedulePath(id), nil, p)
}

// DeleteSchedule removes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, schedulePath(id), nil, nil, nil)
}

// RunSchedule fires a schedule now: its run id, or its queue id when it
// was queued behind a running turn.
func (c *Client) RunSchedule(ctx context.Context, id string) (api.PromptResponse, error) {
	return fetch[api.PromptResponse](ctx, c, http.MethodPost, schedulePath(id, "/run"), nil, nil)
}

// ScheduleHistory lists a schedule's runs, newest first.
func (c *Client) ScheduleHistory(ctx context.Context, id string) ([]api.ScheduleRun, error) {
	return fetch[[]api.ScheduleRun](ctx, c, http.MethodGet, schedulePath(id, "/history"), nil, nil)
}

// ScheduleToken makes a new routine token for a schedule (shown once).
func (c *Client) ScheduleToken(ctx context.Context, id string) (string, error) {
	t, err := fetch[api.RoutineToken](ctx, c, http.MethodPost, schedulePath(id, "/token"), nil, nil)
	return t.Token, err
}
