package api

import "time"

// Schedule is a prompt sent to a chat on a cron schedule (docs/api.md,
// "Schedules"). Only the chat's owner sees it.
type Schedule struct {
	ID       string `json:"id"`
	ChatID   string `json:"chatId"`
	Cron     string `json:"cron"`
	Timezone string `json:"timezone"`
	Prompt   string `json:"prompt"`
	// Overlap is what a firing does while the chat runs: "skip" (a
	// skipped run is recorded) or "queue" (queued behind the run).
	Overlap string `json:"overlap"`
	Enabled bool   `json:"enabled"`
	// NextRun is when it fires next; absent while disabled.
	NextRun *time.Time `json:"nextRun,omitempty"`
	Created time.Time  `json:"created"`
	// HasToken says a routine token was made for it (never the token).
	HasToken bool `json:"hasToken,omitempty"`
}

// Schedule overlap modes.
const (
	OverlapSkip  = "skip"
	OverlapQueue = "queue"
)

// ScheduleRequest creates a schedule (POST /v1/chats/{id}/schedules).
type ScheduleRequest struct {
	Cron     string `json:"cron"`
	Prompt   string `json:"prompt"`
	Timezone string `json:"timezone,omitempty"`
	Overlap  string `json:"overlap,omitempty"`
	Enabled  *bool  `json:"enabled,omitempty"`
}

// SchedulePatch changes a schedule (PATCH /v1/schedules/{id}); absent
// fields are left as they are.
type SchedulePatch struct {
	Cron     *string `json:"cron,omitempty"`
	Prompt   *string `json:"prompt,omitempty"`
	Timezone *string `json:"timezone,omitempty"`
	Overlap  *string `json:"overlap,omitempty"`
	Enabled  *bool   `json:"enabled,omitempty"`
}

// Schedule run outcomes.
const (
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunSkipped   = "skipped"
	RunMissed    = "missed"
	// RunRunning is a run that has not ended yet (or is still queued).
	RunRunning = "running"
)

// ScheduleRun is one firing of a schedule (GET /v1/schedules/{id}/history).
type ScheduleRun struct {
	Start   time.Time  `json:"start"`
	End     *time.Time `json:"end,omitempty"`
	Outcome string     `json:"outcome"`
	// Seq is the seq of the turn's user event: GET
	// /v1/chats/{id}/diff?turn=<seq> is the turn's diff.
	Seq   int64  `json:"seq,omitempty"`
	Error string `json:"error,omitempty"`
}

// RoutineToken answers POST /v1/schedules/{id}/token, once.
type RoutineToken struct {
	Token string `json:"token"`
}

// RoutineFired answers a routine fired over HTTP (POST
// /hooks/routines/{id} on remote-web).
type RoutineFired struct {
	ChatID  string `json:"chatId"`
	RunID   string `json:"runId,omitempty"`
	QueueID string `json:"queueId,omitempty"`
}

// RoutineTokenPrefix starts every routine token, so remote-web can refuse
// one anywhere but its hook.
const RoutineTokenPrefix = "rrt_"
