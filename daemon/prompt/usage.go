package prompt

import (
	"encoding/json"
	"time"

	"remote/daemon/store"
	"remote/providers"
)

// cumulativeCost says which providers report a session's running total as
// a run's cost (Claude Code's total_cost_usd, providers.md): their runs are
// charged the difference.
func cumulativeCost(p providers.ProviderID) bool { return p == providers.Claude }

// recordUsage stores a completed run's usage, converted from the
// providers' normalized names, and counts it in the metrics. A failure is
// logged: usage accounting never fails a run.
func (s *Service) recordUsage(e *emitter, raw json.RawMessage) {
	var u struct {
		InputTokens           int64   `json:"inputTokens"`
		OutputTokens          int64   `json:"outputTokens"`
		CachedInputTokens     int64   `json:"cachedInputTokens"`
		CacheWriteInputTokens int64   `json:"cacheWriteInputTokens"`
		CostUSD               float64 `json:"costUsd"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		s.log.Warn("usage not recorded: unreadable usage", "chat", e.chatID, "error", err)
		return
	}
	rec := store.UsageRecord{T: time.Now().UnixMilli(), RunID: e.runID, ChatID: e.chatID, Project: e.chat.Project,
		Owner: e.chat.Owner, Provider: string(e.provider), InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CachedInputTokens, CacheCreationTokens: u.CacheWriteInputTokens, CostUSD: u.CostUSD}
	rec, err := s.store.RecordUsage(rec, cumulativeCost(e.provider))
	if err != nil {
		s.log.Error("usage not recorded", "chat", e.chatID, "run", e.runID, "error", err)
		return
	}
	s.metrics.Usage(rec)
}
