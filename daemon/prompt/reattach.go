package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"remote/api"
	"remote/daemon/store"
	"remote/providers"
)

// Runs that outlive the daemon. Every run has a record in the store (its
// request, its user event, later its shim's handle) and a RunSlot in its
// context; a launcher with a shim configured starts the run's CLI under
// remote-shim and reports the handle (Started). Every stored event of the
// run carries its position (providers.Pos) into the transaction that
// stores it. When the daemon stops, runs under a shim are detached, not
// cancelled; at start-up RecoverInterrupted re-attaches each run whose
// record names a shim: the provider runs again on the stored request, its
// launcher attaches instead of starting, the spool is parsed again from its
// first byte and every event before the stored position is dropped.

// msgShimGone starts the error of a run whose shim could not be found
// again after a restart.
const msgShimGone = "the run was interrupted by a daemon restart and could not be re-attached"

// storedRequest is a RunRequest as the run record keeps it: everything but
// the runtime environment (backend-issued tokens stay in memory) and the
// interaction channel.
type storedRequest struct {
	Provider            providers.ProviderID     `json:"provider"`
	ConversationID      string                   `json:"conversationId"`
	RunID               string                   `json:"runId"`
	Prompt              string                   `json:"prompt"`
	Cwd                 string                   `json:"cwd,omitempty"`
	Model               string                   `json:"model,omitempty"`
	Mode                providers.RunMode        `json:"mode,omitempty"`
	ResumeID            string                   `json:"resumeId,omitempty"`
	Fork                bool                     `json:"fork,omitempty"`
	ProjectID           string                   `json:"projectId,omitempty"`
	ProjectUID          string                   `json:"projectUid,omitempty"`
	Preferences         providers.RunPreferences `json:"preferences"`
	EnableBrowser       bool                     `json:"enableBrowser,omitempty"`
	EnableScheduleTools bool                     `json:"enableScheduleTools,omitempty"`
	Skills              []string                 `json:"skills,omitempty"`
}

func encodeRequest(r providers.RunRequest) json.RawMessage {
	raw, _ := json.Marshal(storedRequest{
		Provider: r.Provider, ConversationID: r.ConversationID, RunID: r.RunID, Prompt: r.Prompt, Cwd: r.Cwd,
		Model: r.Model, Mode: r.Mode, ResumeID: r.ResumeID, Fork: r.Fork, ProjectID: r.ProjectID,
		ProjectUID: r.ProjectUID, Preferences: r.Preferences, EnableBrowser: r.EnableBrowser,
		EnableScheduleTools: r.EnableScheduleTools, Skills: r.Skills,
	})
	return raw
}

func decodeRequest(raw json.RawMessage) (providers.RunRequest, error) {
	var s storedRequest
	if err := json.Unmarshal(raw, &s); err != nil {
		return providers.RunRequest{}, fmt.Errorf("stored run request: %w", err)
	}
	return providers.RunRequest{
		Provider: s.Provider, ConversationID: s.ConversationID, RunID: s.RunID, Prompt: s.Prompt, Cwd: s.Cwd,
		Model: s.Model, Mode: s.Mode, ResumeID: s.ResumeID, Fork: s.Fork, ProjectID: s.ProjectID,
		ProjectUID: s.ProjectUID, Preferences: s.Preferences, EnableBrowser: s.EnableBrowser,
		EnableScheduleTools: s.EnableScheduleTools, Skills: s.Skills,
	}, nil
}

// startSlot records a fresh run (its request) and returns its slot. slotID
// names the shim's run directory: the run id, with a suffix for a retry.
func (s *Service) startSlot(t *turn, slotID string, req providers.RunRequest) (*providers.RunSlot, error) {
	chatID, runID := t.chat.ID, slotID
	if err := s.store.PutRun(chatID, store.RunRecord{
		RunID: runID, Provider: t.chat.Provider, UserSeq: t.userSeq, Started: time.Now(), Request: encodeRequest(req),
	}); err != nil {
		return nil, fmt.Errorf("record the run: %w", err)
	}
	slot := &providers.RunSlot{RunID: runID, Cursor: providers.NewCursor(false, providers.Pos{}, false)}
	slot.Started = func(h providers.ShimHandle) error {
		raw, err := json.Marshal(h)
		if err != nil {
			return err
		}
		if err := s.store.SetRunShim(chatID, runID, raw); err != nil {
			return fmt.Errorf("record the run's shim: %w", err)
		}
		t.em.shimmed.Store(true)
		return nil
	}
	return slot, nil
}

// attachSlot is the slot of a run re-attached after a restart.
func attachSlot(rec store.RunRecord) (*providers.RunSlot, error) {
	var h providers.ShimHandle
	if err := json.Unmarshal(rec.Shim, &h); err != nil || h.Dir == "" {
		return nil, fmt.Errorf("%w: the stored handle is unreadable", providers.ErrShimGone)
	}
	next := providers.Pos{Line: -1}
	if rec.HasNext {
		next = providers.Pos{Line: rec.Next.Line, Index: rec.Next.Index}
	}
	return &providers.RunSlot{RunID: rec.RunID, Attach: &h, Cursor: providers.NewCursor(true, next, false)}, nil
}

// reattach takes the run lock of chat again and carries its run on from
// its shim (RecoverInterrupted). It reports false when the run cannot be
// taken back at all (the caller then records it as interrupted).
func (s *Service) reattach(chat api.Chat, rec store.RunRecord) bool {
	if len(rec.Shim) == 0 || !s.enter() {
		return false
	}
	p, err := s.reg.Get(chat.Provider)
	if err != nil {
		s.wg.Done()
		return false
	}
	runCtx, cancel := context.WithCancelCause(context.Background())
	run, err := s.hub.StartRun(chat.ID, cancel)
	if err != nil {
		s.wg.Done()
		cancel(nil)
		return false
	}
	s.log.Info("re-attaching a run that outlived the daemon", "chat", chat.ID, "run", rec.RunID, "provider", chat.Provider)
	// No capability query here: it may run the CLI, and start-up waits
	// for this loop. The re-attached run needs none (its request is
	// stored); a session recovery asks for them.
	t := &turn{run: run, chat: chat, p: p, userSeq: rec.UserSeq, attach: &rec,
		in: Input{Skills: chat.SelectedSkills, Mode: chat.Mode}}
	go s.run(runCtx, t)
	return true
}

// detachShimmed detaches every run under a shim (Shutdown): the daemon
// stores nothing more of it, its chat stays running, and the next daemon
// re-attaches. It returns how many were detached.
func (s *Service) detachShimmed() int {
	type held struct {
		t  *turn
		rs *providers.RunSlot
	}
	s.mu.Lock()
	turns := make([]held, 0, len(s.turns))
	for _, t := range s.turns {
		turns = append(turns, held{t, t.rs})
	}
	s.mu.Unlock()
	n := 0
	for _, h := range turns {
		if h.rs == nil || !h.t.em.shimmed.Load() || !h.t.em.detach() {
			continue
		}
		h.rs.Detach()
		h.t.run.Cancel(providers.ErrDetached)
		n++
	}
	return n
}

func (s *Service) track(t *turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns == nil {
		s.turns = map[string]*turn{}
	}
	s.turns[t.chat.ID] = t
}

func (s *Service) untrack(t *turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns[t.chat.ID] == t {
		delete(s.turns, t.chat.ID)
	}
}

// RunInfo is one run in flight as `remotectl runs` shows it.
type RunInfo struct {
	ChatID   string
	RunID    string
	Provider string
	Started  time.Time
	Shim     *providers.ShimHandle // nil: the run has no shim (it ends with the daemon)
	Attached bool                  // this daemon follows it
}

// Runs lists the runs in flight, oldest first.
func (s *Service) Runs() ([]RunInfo, error) {
	recs, err := s.store.Runs()
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := make([]RunInfo, 0, len(recs))
	for chatID, rec := range recs {
		ri := RunInfo{ChatID: chatID, RunID: rec.RunID, Provider: rec.Provider, Started: rec.Started, Attached: s.hub.Running(chatID)}
		if len(rec.Shim) > 0 {
			var h providers.ShimHandle
			if json.Unmarshal(rec.Shim, &h) == nil {
				ri.Shim = &h
			}
		}
		out = append(out, ri)
	}
	// A run that started a moment ago may not have its record yet (the
	// run's goroutine writes it): the hub knows it from the 202 on.
	for chatID, r := range s.hub.Active() {
		if _, ok := recs[chatID]; ok {
			continue
		}
		c, err := s.store.Chat(chatID)
		if err != nil {
			continue
		}
		out = append(out, RunInfo{ChatID: chatID, RunID: r.ID, Provider: c.Provider, Started: r.Started, Attached: true})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.Before(out[j].Started)
		}
		return out[i].ChatID < out[j].ChatID
	})
	return out, nil
}

// shimGone reports whether err says a re-attached run's shim is gone.
func shimGone(err error) bool { return errors.Is(err, providers.ErrShimGone) }
