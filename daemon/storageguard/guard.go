// Package storageguard keeps the daemon's store honest when space runs
// out: it checks the state directory's free space before each run and on
// a timer ([daemon] min_free, with fair shares near the bound), bounds
// what one run and one chat may store (max_run_bytes, max_chat_bytes) and
// records the ends of runs that could not be written when they happened,
// retrying until they are stored (remoted_chats_unrepaired).
//
// The prompt service calls it; it must never import the prompt service,
// net/http or the HTTP layer (package daemon), the project routes,
// provisioning, a provider or config. It builds on api, the store, the
// run hub, metrics and errdefs.
package storageguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/metrics"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/internal/errdefs"
)

// DefaultCheckEvery is how often the free space of the state directory is
// checked (and unrecorded run ends are retried) when Options.Every is 0.
const DefaultCheckEvery = 30 * time.Second

// MsgInterruptedByRestart is the terminal error of a run a daemon restart
// interrupted.
const MsgInterruptedByRestart = "the run was interrupted by a daemon restart"

// FailedMessage is the terminal error of a run whose events could not be
// stored.
func FailedMessage(err error) string {
	if errors.Is(err, store.ErrNoSpace) {
		return "storage full: the run was stopped because its events could not be saved (no space left in the daemon's state directory); free space, then prompt again"
	}
	return "storage: the run was stopped because its events could not be saved: " + err.Error()
}

// repair is the end of a chat's run that still has to be recorded: the
// running mark cleared, and the events in the same transaction.
type repair struct {
	msg       string // terminal error message; "" = only clear the mark
	restarted bool   // restart recovery: system/daemon_restarted first
	provider  string // for daemon_restarted's data
}

var errNothingToRepair = errors.New("chat is not marked running")

// Store is what the guard needs of the daemon's store; *store.Store
// implements it.
type Store interface {
	// UpdateChatAndAppend changes the chat and appends the events fn
	// returns in one transaction.
	UpdateChatAndAppend(id string, fn func(*api.Chat) ([]api.Event, error)) (api.Chat, []api.Event, error)
	// EventBytes is the stored size of a chat's events.
	EventBytes(chatID string) (int64, error)
	// StoredBytes is what each owner's chats hold (fair shares).
	StoredBytes() (map[string]int64, error)
}

var _ Store = (*store.Store)(nil)

// Options configures a Guard.
type Options struct {
	Store   Store
	Hub     *runhub.Hub
	Logger  hclog.Logger
	Metrics *metrics.Metrics
	// Dir is the state directory; "" turns the free-space check off.
	Dir string
	// MinFree is [daemon] min_free; 0 turns the check off.
	MinFree int64
	// MaxRun and MaxChat are [daemon] max_run_bytes and max_chat_bytes;
	// 0 = unbounded.
	MaxRun, MaxChat int64
	// Every is how often free space is checked and unrecorded run ends
	// are retried; 0 = DefaultCheckEvery.
	Every time.Duration
}

// Guard keeps the store honest when space runs out: it checks free space
// before each run and every interval, bounds what runs and chats store,
// and records run ends that could not be written when they happened, as
// soon as they can be.
type Guard struct {
	store   Store
	hub     *runhub.Hub
	log     hclog.Logger
	metrics *metrics.Metrics

	dir     string // state directory; "" = no free-space check
	minFree int64  // 0 = no check
	maxRun  int64  // 0 = unbounded
	maxChat int64  // 0 = unbounded
	every   time.Duration

	mu      sync.Mutex
	repairs map[string]repair // chat id -> its unrecorded run end
	lowLog  bool              // the last periodic check found too little space

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// New returns a guard whose periodic check runs until Close.
func New(o Options) *Guard {
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	g := &Guard{store: o.Store, hub: o.Hub, log: log, metrics: o.Metrics, dir: o.Dir,
		minFree: o.MinFree, maxRun: o.MaxRun, maxChat: o.MaxChat, every: o.Every,
		repairs: map[string]repair{}, stop: make(chan struct{}), done: make(chan struct{})}
	if g.every <= 0 {
		g.every = DefaultCheckEvery
	}
	go g.watch()
	return g
}

// Close stops the periodic check.
func (g *Guard) Close() {
	g.stopOnce.Do(func() { close(g.stop) })
	<-g.done
}

func (g *Guard) watch() {
	defer close(g.done)
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.check()
		}
	}
}

// check is the periodic check: free space (logged when it crosses
// min_free, exported as a metric) and the unrecorded run ends.
func (g *Guard) check() {
	if g.dir != "" {
		free, err := freeBytes(g.dir)
		if err != nil {
			g.log.Warn("check free space of the state directory", "dir", g.dir, "error", err)
		} else {
			g.metrics.SetStateFree(free)
			low := g.minFree > 0 && free < g.minFree
			g.mu.Lock()
			was := g.lowLog
			g.lowLog = low
			g.mu.Unlock()
			switch {
			case low && !was:
				g.log.Error("state directory short of space: prompts are refused (507 storage_full) until space is freed",
					"dir", g.dir, "free", FormatBytes(free), "min_free", FormatBytes(g.minFree))
			case !low && was:
				g.log.Info("state directory has space again: prompts are accepted", "dir", g.dir, "free", FormatBytes(free))
			}
		}
	}
	g.retryAll()
}

// freeBytes returns the space an unprivileged writer may still use on
// dir's filesystem.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// storageFull is the 507 answered while free space is below min_free.
func (g *Guard) storageFull(free int64) error {
	return errdefs.ResourceExhausted(
		"storage full: %s free in the daemon's state directory, below [daemon] min_free (%s); free space, then prompt again",
		FormatBytes(free), FormatBytes(g.minFree))
}

// BeforeRun is checked before a run of chat starts: the chat's last run
// end is recorded, space admits its owner, and the chat is under
// max_chat_bytes.
func (g *Guard) BeforeRun(chat api.Chat) error {
	chatID := chat.ID
	g.mu.Lock()
	r, pending := g.repairs[chatID]
	if pending {
		if err := g.applyLocked(chatID, r); err != nil {
			g.mu.Unlock()
			if errors.Is(err, store.ErrNoSpace) {
				free, _ := freeBytes(g.dir)
				// Not wrapping err: the answer is this text, not the store's.
				return errdefs.ResourceExhausted(
					"storage full: the end of this chat's last run could not be saved yet (%s free in the daemon's state directory); free space, then prompt again", FormatBytes(free))
			}
			// Exhausted for now but may clear by itself: 503 storage_full.
			return errdefs.Wrap(errdefs.ErrUnavailable, errdefs.ResourceExhausted(
				"storage: the end of this chat's last run could not be saved yet; try again later"))
		}
		g.forgetLocked(chatID)
	}
	g.mu.Unlock()
	if err := g.Space(chat.Owner); err != nil {
		return err
	}
	if g.maxChat > 0 {
		n, err := g.store.EventBytes(chatID)
		if err != nil {
			return fmt.Errorf("size of chat %s: %w", chatID, err)
		}
		if n >= g.maxChat-chatSlack(g.maxChat) {
			return errdefs.Conflict(
				"chat %s holds %s of events, at its limit [daemon] max_chat_bytes (%s): start a new chat", chatID, FormatBytes(n), FormatBytes(g.maxChat))
		}
	}
	return nil
}

// Space admits a prompt of owner's by the free space of the state
// directory: below min_free nobody's; below twice min_free (the fair
// zone) not of an owner whose chats hold more than an equal share of what
// the store holds (its bytes over the number of owners with chats). So
// the user who fills the disk is refused first, and the others keep
// min_free to work with.
func (g *Guard) Space(owner string) error {
	if g.dir == "" || g.minFree <= 0 {
		return nil
	}
	free, err := freeBytes(g.dir)
	if err != nil {
		g.log.Warn("check free space of the state directory", "dir", g.dir, "error", err)
		return nil
	}
	if g.metrics.SetStateFree(free); free < g.minFree {
		return g.storageFull(free)
	}
	if free >= 2*g.minFree {
		return nil
	}
	use, err := g.store.StoredBytes()
	if err != nil {
		return fmt.Errorf("stored bytes per user: %w", err)
	}
	var total int64
	for _, n := range use {
		total += n
	}
	if share := total / int64(max(len(use), 1)); use[owner] > share {
		return errdefs.ResourceExhausted(
			"storage nearly full: %s free in the daemon's state directory, below twice [daemon] min_free (%s), and your chats hold %s, more than an equal share (%s) of what the daemon stores for %d users; delete chats you no longer need, then prompt again",
			FormatBytes(free), FormatBytes(g.minFree), FormatBytes(use[owner]), FormatBytes(share), len(use))
	}
	return nil
}

// chatSlack is how close to max_chat_bytes a chat counts as full: a run
// stopped at the bound leaves the chat just under it, and a prompt that
// could store only a few more bytes would be stopped at once.
func chatSlack(maxChat int64) int64 { return min(maxChat/16, 1<<20) }

// Budget returns how many event bytes a run of chatID may store from now
// (0 = unbounded) and the message its run ends with when it needs more.
func (g *Guard) Budget(chatID string) (int64, string) {
	limit, msg := g.maxRun, fmt.Sprintf("run output exceeds max_run_bytes (%s)", FormatBytes(g.maxRun))
	if g.maxChat > 0 {
		n, err := g.store.EventBytes(chatID)
		if err != nil {
			g.log.Warn("size of chat", "chat", chatID, "error", err)
		}
		if left := max(g.maxChat-n, 1); limit == 0 || left < limit {
			limit, msg = left, fmt.Sprintf("chat exceeds max_chat_bytes (%s): start a new chat", FormatBytes(g.maxChat))
		}
	}
	return limit, msg
}

// EndRun records the end of a run whose events could not all be stored:
// the terminal error and the cleared running mark, in one transaction.
// When that cannot be written either, connected clients get the error
// live (without a seq) and it is retried until it is stored.
func (g *Guard) EndRun(chatID, msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := repair{msg: msg}
	err := g.applyLocked(chatID, r)
	if err == nil {
		return
	}
	g.log.Error("could not save the end of a run; clients were told live, retrying", "chat", chatID, "error", err)
	g.hub.Broadcast(chatID, api.Event{Type: api.EventError, Message: msg, T: time.Now().UnixMilli()})
	g.rememberLocked(chatID, r)
}

// ClearRunning clears the chat's running mark, or retries it later.
func (g *Guard) ClearRunning(chatID string, cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.applyLocked(chatID, repair{}); err != nil {
		g.log.Error("could not clear a chat's running mark; retrying", "chat", chatID, "error", err, "cause", cause)
		g.rememberLocked(chatID, repair{})
	}
}

// RecoverChat records a run interrupted by a restart: exactly one
// system/daemon_restarted and error, with the running mark cleared, in one
// transaction. A chat that cannot be repaired now is logged, counted in
// remoted_chats_unrepaired and retried; start-up goes on.
func (g *Guard) RecoverChat(c api.Chat) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, pending := g.repairs[c.ID]; pending {
		return
	}
	r := repair{msg: MsgInterruptedByRestart, restarted: true, provider: c.Provider}
	if err := g.applyLocked(c.ID, r); err != nil {
		g.log.Error("could not record a run interrupted by the restart; serving anyway and retrying", "chat", c.ID, "provider", c.Provider, "error", err)
		g.rememberLocked(c.ID, r)
		return
	}
	g.log.Warn("run interrupted by restart", "chat", c.ID, "provider", c.Provider)
}

// retryAll tries every unrecorded run end once.
func (g *Guard) retryAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, r := range g.repairs {
		if err := g.applyLocked(id, r); err != nil {
			g.log.Debug("run end still not saved", "chat", id, "error", err)
			continue
		}
		g.log.Info("saved the end of a run that could not be saved before", "chat", id)
		g.forgetLocked(id)
	}
}

// Unrepaired returns the ids of chats whose run end is not recorded yet.
func (g *Guard) Unrepaired() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.repairs))
	for id := range g.repairs {
		out = append(out, id)
	}
	return out
}

func (g *Guard) rememberLocked(chatID string, r repair) {
	g.repairs[chatID] = r
	g.metrics.SetUnrepaired(len(g.repairs))
}

func (g *Guard) forgetLocked(chatID string) {
	delete(g.repairs, chatID)
	g.metrics.SetUnrepaired(len(g.repairs))
}

// applyLocked writes r in one transaction, only while the chat is still
// marked running (so a retry after a success writes nothing); the store
// broadcasts what it stored. A chat that is gone or no longer running
// needs nothing.
func (g *Guard) applyLocked(chatID string, r repair) error {
	_, evs, err := g.store.UpdateChatAndAppend(chatID, func(c *api.Chat) ([]api.Event, error) {
		if !c.Running {
			return nil, errNothingToRepair
		}
		c.Running = false
		now := time.Now()
		var out []api.Event
		if r.restarted {
			data, _ := json.Marshal(map[string]string{"provider": r.provider})
			out = append(out, api.Event{Type: api.EventSystem, Subtype: api.SubtypeDaemonRestarted, Data: data, T: now.UnixMilli()})
		} else {
			c.LastMessageAt = now
		}
		if r.msg != "" {
			out = append(out, api.Event{Type: api.EventError, Message: r.msg, T: now.UnixMilli()})
		}
		return out, nil
	})
	if errors.Is(err, errNothingToRepair) || errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		g.metrics.AppendFailed()
		return err
	}
	for range evs {
		g.metrics.EventAppended() // the store broadcast them (runhub)
	}
	if !g.hub.Running(chatID) {
		// Stored after the run's closing sync (a retried repair): clients
		// learn the chat's state (docs/api.md). A run still holding the
		// chat sends its closing sync itself.
		g.hub.Sync(chatID)
	}
	return nil
}

// FormatBytes writes n in the largest binary unit below it, e.g. "64 MiB",
// "1.5 GiB", "512 B".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := fmt.Sprintf("%.1f", v)
	if v == float64(int64(v)) {
		s = fmt.Sprintf("%d", int64(v))
	}
	return s + " " + string("KMGTP"[exp]) + "iB"
}
