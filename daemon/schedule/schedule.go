package schedule

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/robfig/cron/v3"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/internal/errdefs"
)

// Defaults of Options' bounds.
const (
	DefaultMinInterval = time.Minute
	DefaultMaxPerChat  = 20
	DefaultMaxPerUser  = 100
	// maxHistory is how many runs a schedule keeps.
	maxHistory = 50
	// maxPromptBytes bounds a schedule's prompt.
	maxPromptBytes = 64 << 10
	// tokenPrefix marks a routine token (remote-web refuses one anywhere
	// but its hook, package web's routineToken).
	tokenPrefix = api.RoutineTokenPrefix
)

// Store is what the scheduler needs of the store.
type Store interface {
	CreateSchedule(rec store.ScheduleRecord, check func(all []store.ScheduleRecord) error) error
	Schedule(id string) (store.ScheduleRecord, error)
	Schedules() ([]store.ScheduleRecord, error)
	UpdateSchedule(id string, fn func(*store.ScheduleRecord) error) (store.ScheduleRecord, error)
	DeleteSchedule(id string) error
	Chat(id string) (api.Chat, error)
	LastSeq(chatID string) (int64, error)
	Events(chatID string, afterSeq int64, limit int, fn func(api.Event) error) error
}

// Prompts submits prompts as a queued prompt is submitted (the prompt
// service).
type Prompts interface {
	Start(ctx context.Context, chatID string, in prompt.Input) (string, error)
	Enqueue(ctx context.Context, chatID string, in prompt.Input) (runID, qid string, err error)
}

// Options configure a Scheduler. Store and Prompts are required.
type Options struct {
	Store   Store
	Prompts Prompts
	Logger  hclog.Logger
	// CatchUp fires, once at start, a schedule whose boundary passed while
	// the daemon was down ([schedules] catch_up); false records it missed.
	CatchUp bool
	// MinInterval is the shortest time between two firings a cron may ask
	// for; MaxPerChat and MaxPerUser bound the schedules. Zero: defaults.
	MinInterval            time.Duration
	MaxPerChat, MaxPerUser int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Scheduler owns the schedules and fires them.
type Scheduler struct {
	o    Options
	log  hclog.Logger
	wake chan struct{}
	mu   sync.Mutex // serialises firings (Tick, RunNow, Fire)
}

// New returns a scheduler; Run drives it.
func New(o Options) (*Scheduler, error) {
	if o.Store == nil || o.Prompts == nil {
		return nil, errors.New("schedule: store and prompts are required")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MaxPerChat <= 0 {
		o.MaxPerChat = DefaultMaxPerChat
	}
	if o.MaxPerUser <= 0 {
		o.MaxPerUser = DefaultMaxPerUser
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Scheduler{o: o, log: o.Logger, wake: make(chan struct{}, 1)}, nil
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parse checks a cron expression and time zone and returns the schedule;
// errors name the field.
func (s *Scheduler) parse(expr, tz string) (cron.Schedule, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.HasPrefix(tz, "Local") {
		return nil, errdefs.InvalidArgument("timezone: unknown time zone %.64q (want an IANA name such as Europe/Paris)", tz)
	}
	if strings.Contains(expr, "TZ=") || strings.HasPrefix(expr, "@every") {
		return nil, errdefs.InvalidArgument("cron: %.100q: give the zone in timezone, and five fields or a descriptor such as @hourly", expr)
	}
	sc, err := parser.Parse(expr)
	if err != nil {
		return nil, errdefs.InvalidArgument("cron: %.100q is not a cron expression: %v", expr, err)
	}
	// Wrap it in the zone: Next is then computed in tz.
	spec, ok := sc.(*cron.SpecSchedule)
	if !ok {
		return nil, errdefs.InvalidArgument("cron: %.100q is not supported", expr)
	}
	spec.Location = loc
	return spec, nil
}

// validate is parse, plus the minimum interval (create and change only:
// firing parses without it).
func (s *Scheduler) validate(expr, tz string) error {
	sc, err := s.parse(expr, tz)
	if err != nil {
		return err
	}
	spec := sc.(*cron.SpecSchedule)
	loc := spec.Location
	// The minimum interval: the shortest gap between the next firings
	// over two days (a cron's pattern repeats at most daily, but for
	// month and weekday fields, which only widen gaps).
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
	prev := spec.Next(t)
	for i := 0; i < 3000 && !prev.IsZero() && prev.Before(t.Add(72*time.Hour)); i++ {
		n := spec.Next(prev)
		if n.IsZero() {
			break
		}
		if n.Sub(prev) < s.o.MinInterval {
			return errdefs.InvalidArgument("cron: %.100q fires more often than every %s (the shortest interval allowed)", expr, s.o.MinInterval)
		}
		prev = n
	}
	if prev.IsZero() {
		return errdefs.InvalidArgument("cron: %.100q never fires", expr)
	}
	return nil
}

func validPrompt(p string) error {
	if strings.TrimSpace(p) == "" {
		return errdefs.InvalidArgument("prompt: must not be empty")
	}
	if len(p) > maxPromptBytes {
		return errdefs.InvalidArgument("prompt: longer than %d bytes", maxPromptBytes)
	}
	return nil
}

func validOverlap(o string) error {
	if o != api.OverlapSkip && o != api.OverlapQueue {
		return errdefs.InvalidArgument("overlap: %.40q (want \"skip\" or \"queue\")", o)
	}
	return nil
}

// notFound is what another user's schedule or chat is: the same as a
// missing one.
func notFound(what, id string) error {
	return fmt.Errorf("%s %.40q: %w", what, id, errdefs.ErrNotFound)
}

// ownedChat loads owner's chat.
func (s *Scheduler) ownedChat(owner, chatID string) (api.Chat, error) {
	c, err := s.o.Store.Chat(chatID)
	if err != nil || c.Owner != owner {
		if err != nil && !errdefs.IsNotFound(err) {
			return api.Chat{}, err
		}
		return api.Chat{}, notFound("chat", chatID)
	}
	return c, nil
}

// owned loads owner's schedule.
func (s *Scheduler) owned(owner, id string) (store.ScheduleRecord, error) {
	r, err := s.o.Store.Schedule(id)
	if err != nil || r.Owner != owner {
		if err != nil && !errdefs.IsNotFound(err) {
			return r, err
		}
		return r, notFound("schedule", id)
	}
	return r, nil
}

// view is a record's API form, with its next run.
func (s *Scheduler) view(r store.ScheduleRecord) api.Schedule {
	out := r.Schedule
	out.NextRun = nil
	out.HasToken = len(r.TokenHash) > 0
	if r.Enabled {
		if sc, err := s.parse(r.Cron, r.Timezone); err == nil {
			n := sc.Next(s.base(r)).UTC()
			out.NextRun = &n
		}
	}
	return out
}

// base is the time a record's next firing is counted from.
func (s *Scheduler) base(r store.ScheduleRecord) time.Time {
	if r.LastFired.After(r.Created) {
		return r.LastFired
	}
	return r.Created
}

// Create makes a schedule on owner's chat.
func (s *Scheduler) Create(owner, chatID string, in api.ScheduleRequest) (api.Schedule, error) {
	if _, err := s.ownedChat(owner, chatID); err != nil {
		return api.Schedule{}, err
	}
	if in.Timezone == "" {
		in.Timezone = "UTC"
	}
	if in.Overlap == "" {
		in.Overlap = api.OverlapSkip
	}
	if err := s.validate(in.Cron, in.Timezone); err != nil {
		return api.Schedule{}, err
	}
	if err := validPrompt(in.Prompt); err != nil {
		return api.Schedule{}, err
	}
	if err := validOverlap(in.Overlap); err != nil {
		return api.Schedule{}, err
	}
	enabled := in.Enabled == nil || *in.Enabled
	rec := store.ScheduleRecord{Owner: owner, Schedule: api.Schedule{ID: runhub.NewID(6), ChatID: chatID,
		Cron: in.Cron, Timezone: in.Timezone, Prompt: in.Prompt, Overlap: in.Overlap, Enabled: enabled,
		Created: s.o.Now().UTC().Truncate(time.Second)}}
	err := s.o.Store.CreateSchedule(rec, func(all []store.ScheduleRecord) error {
		var chat, user int
		for _, r := range all {
			if r.ChatID == chatID {
				chat++
			}
			if r.Owner == owner {
				user++
			}
		}
		switch {
		case chat >= s.o.MaxPerChat:
			return errdefs.Conflict("chat %s already has %d schedules (the most allowed)", chatID, s.o.MaxPerChat)
		case user >= s.o.MaxPerUser:
			return errdefs.Conflict("you already have %d schedules (the most allowed)", s.o.MaxPerUser)
		}
		return nil
	})
	if err != nil {
		return api.Schedule{}, err
	}
	s.poke()
	return s.view(rec), nil
}

// List returns the schedules of owner's chat, oldest first.
func (s *Scheduler) List(owner, chatID string) ([]api.Schedule, error) {
	if _, err := s.ownedChat(owner, chatID); err != nil {
		return nil, err
	}
	all, err := s.o.Store.Schedules()
	if err != nil {
		return nil, err
	}
	out := []api.Schedule{}
	for _, r := range all {
		if r.ChatID == chatID && r.Owner == owner {
			out = append(out, s.view(r))
		}
	}
	slices.SortFunc(out, func(a, b api.Schedule) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Patch changes owner's schedule.
func (s *Scheduler) Patch(owner, id string, p api.SchedulePatch) (api.Schedule, error) {
	if _, err := s.owned(owner, id); err != nil {
		return api.Schedule{}, err
	}
	rec, err := s.o.Store.UpdateSchedule(id, func(r *store.ScheduleRecord) error {
		if p.Cron != nil && *p.Cron != r.Cron || p.Timezone != nil && *p.Timezone != r.Timezone {
			// A new time counts from now, never from before the change
			// (which would fire at once).
			r.LastFired = s.o.Now().UTC()
		}
		if p.Cron != nil {
			r.Cron = *p.Cron
		}
		if p.Timezone != nil {
			r.Timezone = *p.Timezone
			if r.Timezone == "" {
				r.Timezone = "UTC"
			}
		}
		if p.Prompt != nil {
			r.Prompt = *p.Prompt
		}
		if p.Overlap != nil {
			r.Overlap = *p.Overlap
		}
		if p.Enabled != nil {
			if *p.Enabled && !r.Enabled {
				// Re-enabled: count from now, not from the firings
				// skipped while it was off.
				r.LastFired = s.o.Now().UTC()
			}
			r.Enabled = *p.Enabled
		}
		if err := s.validate(r.Cron, r.Timezone); err != nil {
			return err
		}
		if err := validPrompt(r.Prompt); err != nil {
			return err
		}
		return validOverlap(r.Overlap)
	})
	if err != nil {
		return api.Schedule{}, err
	}
	s.poke()
	return s.view(rec), nil
}

// Delete removes owner's schedule.
func (s *Scheduler) Delete(owner, id string) error {
	if _, err := s.owned(owner, id); err != nil {
		return err
	}
	return s.o.Store.DeleteSchedule(id)
}

// History returns owner's schedule's runs, newest first.
func (s *Scheduler) History(owner, id string) ([]api.ScheduleRun, error) {
	r, err := s.owned(owner, id)
	if err != nil {
		return nil, err
	}
	out := make([]api.ScheduleRun, 0, len(r.History))
	ended := map[int]api.ScheduleRun{} // index in r.History -> its end, to store
	for i := len(r.History) - 1; i >= 0; i-- {
		run := s.resolve(r.ChatID, r.History[i])
		if r.History[i].Outcome == api.RunRunning && run.Outcome != api.RunRunning {
			ended[i] = run
		}
		out = append(out, run)
	}
	if len(ended) > 0 {
		// Stored once ended: a run's turn is read from the log only
		// while it runs.
		if _, err := s.o.Store.UpdateSchedule(id, func(cur *store.ScheduleRecord) error {
			for i, run := range ended {
				if i < len(cur.History) && cur.History[i].Start.Equal(r.History[i].Start) && cur.History[i].Outcome == api.RunRunning {
					cur.History[i].ScheduleRun = run
				}
			}
			return nil
		}); err != nil && !errdefs.IsNotFound(err) {
			s.log.Warn("store a schedule's ended runs", "schedule", id, "error", err)
		}
	}
	return out, nil
}

// maxScan bounds the events read to find one run's turn and end.
const maxScan = 20000

// resolve fills a run that was submitted with its turn's seq, end and
// outcome, from the chat's log.
func (s *Scheduler) resolve(chatID string, h store.ScheduleRun) api.ScheduleRun {
	out := h.ScheduleRun
	if out.Outcome != api.RunRunning {
		return out
	}
	stop := errors.New("stop")
	seq := out.Seq
	_ = s.o.Store.Events(chatID, h.AfterSeq, maxScan, func(ev api.Event) error {
		if seq == 0 {
			switch {
			case ev.Type == api.EventUser && h.QueueID == "":
				// A started run whose seq was not found when it
				// fired: its user event is the first after AfterSeq.
				seq = ev.Seq
				out.Seq = seq
			case ev.Type == api.EventUser && ev.ID == h.QueueID:
				seq = ev.Seq
				out.Seq = seq
			case ev.Type == api.EventUnqueued && h.QueueID != "" && ev.ID == h.QueueID:
				end := time.UnixMilli(ev.T).UTC()
				out.End, out.Outcome, out.Error = &end, api.RunFailed, "removed from the chat's queue before it ran"
				return stop
			}
			return nil
		}
		if ev.Seq <= seq {
			return nil
		}
		switch ev.Type {
		case api.EventComplete, api.EventError:
			end := time.UnixMilli(ev.T).UTC()
			out.End = &end
			out.Outcome = api.RunCompleted
			if ev.Type == api.EventError {
				out.Outcome, out.Error = api.RunFailed, ev.Message
			}
			return stop
		case api.EventUser:
			return stop // the next turn began: this one's end is not in the log
		}
		return nil
	})
	return out
}

// Token makes a new routine token for owner's schedule and returns it;
// only its SHA-256 is stored, and an older token stops working.
func (s *Scheduler) Token(owner, id string) (string, error) {
	if _, err := s.owned(owner, id); err != nil {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := tokenPrefix + hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(tok))
	if _, err := s.o.Store.UpdateSchedule(id, func(r *store.ScheduleRecord) error {
		r.TokenHash = sum[:]
		return nil
	}); err != nil {
		return "", err
	}
	return tok, nil
}

// errBadToken is every refusal of a routine token alike: unknown
// schedule, no token, another schedule's token, a wrong one.
var errBadToken = errdefs.New(errdefs.ErrPermissionDenied, "this token may not fire this routine")

// Fire fires schedule id for the holder of its routine token: the token's
// SHA-256 is compared in constant time with the stored one.
func (s *Scheduler) Fire(ctx context.Context, id, token string) (api.RoutineFired, error) {
	r, err := s.o.Store.Schedule(id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return api.RoutineFired{}, errBadToken
		}
		return api.RoutineFired{}, err
	}
	sum := sha256.Sum256([]byte(token))
	if len(r.TokenHash) != sha256.Size || subtle.ConstantTimeCompare(sum[:], r.TokenHash) != 1 {
		return api.RoutineFired{}, errBadToken
	}
	runID, qid, err := s.fire(ctx, r, s.o.Now().UTC(), false)
	if err != nil {
		return api.RoutineFired{}, err
	}
	return api.RoutineFired{ChatID: r.ChatID, RunID: runID, QueueID: qid}, nil
}

// RunNow fires owner's schedule at once (its overlap applies).
func (s *Scheduler) RunNow(ctx context.Context, owner, id string) (api.PromptResponse, error) {
	r, err := s.owned(owner, id)
	if err != nil {
		return api.PromptResponse{}, err
	}
	runID, qid, err := s.fire(ctx, r, s.o.Now().UTC(), false)
	return api.PromptResponse{RunID: runID, QueueID: qid}, err
}

// fire submits r's prompt and records the run. With boundary set, the
// firing is the schedule's boundary at or before now: it is recorded as
// fired (in the same transaction that checks it was not already) before
// anything is submitted, so a crash in between loses the run rather than
// running it twice.
func (s *Scheduler) fire(ctx context.Context, r store.ScheduleRecord, now time.Time, boundary bool) (runID, qid string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	after, _ := s.o.Store.LastSeq(r.ChatID)
	if boundary {
		claimed := false
		_, err := s.o.Store.UpdateSchedule(r.ID, func(cur *store.ScheduleRecord) error {
			sc, err := s.parse(cur.Cron, cur.Timezone)
			if err != nil || !cur.Enabled || sc.Next(s.base(*cur)).After(now) {
				return errAlreadyFired
			}
			cur.LastFired = now
			claimed = true
			return nil
		})
		if err != nil || !claimed {
			if errors.Is(err, errAlreadyFired) {
				err = nil
			}
			return "", "", err
		}
	}
	run := store.ScheduleRun{ScheduleRun: api.ScheduleRun{Start: now, Outcome: api.RunRunning}, AfterSeq: after}
	chat, cerr := s.o.Store.Chat(r.ChatID)
	in := prompt.Input{Text: r.Prompt}
	switch {
	case cerr != nil || chat.Owner != r.Owner:
		err = fmt.Errorf("chat %s: %w", r.ChatID, errdefs.ErrNotFound)
	case r.Overlap == api.OverlapQueue:
		runID, qid, err = s.o.Prompts.Enqueue(context.WithoutCancel(ctx), r.ChatID, in)
	default:
		runID, err = s.o.Prompts.Start(context.WithoutCancel(ctx), r.ChatID, in)
	}
	switch {
	case errors.Is(err, runhub.ErrPromptAlreadyRunning):
		end := now
		run.Outcome, run.End, run.Error = api.RunSkipped, &end, "the chat was running"
	case err != nil:
		end := now
		run.Outcome, run.End, run.Error = api.RunFailed, &end, err.Error()
	case qid != "":
		run.QueueID = qid
	default:
		run.RunID = runID
		if seq, serr := s.userSeq(r.ChatID, after); serr == nil {
			run.Seq = seq
		}
	}
	s.record(r.ID, run)
	s.log.Info("schedule fired", "schedule", r.ID, "chat", r.ChatID, "outcome", run.Outcome, "queued", qid != "")
	return runID, qid, err
}

var errAlreadyFired = errors.New("already fired")

// userSeq finds the seq of the user event a started run stored (the first
// user event after after).
func (s *Scheduler) userSeq(chatID string, after int64) (int64, error) {
	var seq int64
	stop := errors.New("stop")
	err := s.o.Store.Events(chatID, after, maxScan, func(ev api.Event) error {
		if ev.Type == api.EventUser {
			seq = ev.Seq
			return stop
		}
		return nil
	})
	if seq == 0 {
		return 0, fmt.Errorf("no user event: %w", err)
	}
	return seq, nil
}

// record adds run to schedule id's history (the newest maxHistory kept).
func (s *Scheduler) record(id string, run store.ScheduleRun) {
	if _, err := s.o.Store.UpdateSchedule(id, func(r *store.ScheduleRecord) error {
		r.History = append(r.History, run)
		if n := len(r.History); n > maxHistory {
			r.History = slices.Clone(r.History[n-maxHistory:])
		}
		return nil
	}); err != nil && !errdefs.IsNotFound(err) {
		s.log.Error("record a schedule's run", "schedule", id, "error", err)
	}
}

// Tick fires every enabled schedule whose next boundary is at or before
// now, once however many boundaries passed, and returns when the next one
// is due (zero when none is).
func (s *Scheduler) Tick(ctx context.Context, now time.Time) time.Time {
	return s.tick(ctx, now, true)
}

// Start is the tick at start-up: a boundary that passed while the daemon
// was down fires once with catch-up, and is recorded missed without.
func (s *Scheduler) Start(ctx context.Context, now time.Time) time.Time {
	return s.tick(ctx, now, s.o.CatchUp)
}

func (s *Scheduler) tick(ctx context.Context, now time.Time, catchUp bool) time.Time {
	all, err := s.o.Store.Schedules()
	if err != nil {
		s.log.Error("list schedules", "error", err)
		return now.Add(time.Minute)
	}
	var next time.Time
	for _, r := range all {
		if !r.Enabled {
			continue
		}
		sc, err := s.parse(r.Cron, r.Timezone)
		if err != nil {
			continue
		}
		due := sc.Next(s.base(r))
		if !due.After(now) {
			if catchUp {
				_, _, _ = s.fire(ctx, r, now, true)
			} else {
				s.miss(r, due, now)
			}
			due = sc.Next(now)
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

// miss records a boundary that passed while the daemon was down, without
// running it.
func (s *Scheduler) miss(r store.ScheduleRecord, due, now time.Time) {
	claimed := false
	if _, err := s.o.Store.UpdateSchedule(r.ID, func(cur *store.ScheduleRecord) error {
		if cur.LastFired.After(s.base(r)) || cur.LastFired.Equal(now) {
			return nil
		}
		cur.LastFired = now
		claimed = true
		return nil
	}); err == nil && claimed {
		end := now
		s.record(r.ID, store.ScheduleRun{ScheduleRun: api.ScheduleRun{Start: due.UTC(), End: &end, Outcome: api.RunMissed,
			Error: "the daemon was not running at this time ([schedules] catch_up is off)"}})
	}
}

// poke wakes Run to recompute its next firing.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run fires the schedules until ctx ends: Start once, then a Tick at each
// next boundary (or after a change).
func (s *Scheduler) Run(ctx context.Context) {
	next := s.Start(ctx, s.o.Now())
	for {
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(s.o.Now()), 0)
		}
		t := time.NewTimer(min(wait, time.Hour))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
		next = s.Tick(ctx, s.o.Now())
	}
}
