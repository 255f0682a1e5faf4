package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/daemon"
	"remote/daemon/doctor"
	"remote/daemon/loginapi"
	"remote/daemon/projectapi"
	"remote/daemon/prompt"
	"remote/daemon/repoapi"
	"remote/daemon/schedule"
	"remote/daemon/scheduleapi"
	"remote/daemon/socket"
	"remote/daemon/store"
	"remote/daemon/webhook"
	"remote/internal/version"
	"remote/providers"
	"remote/providers/probe"
	"remote/providers/runner"
	"remote/systemd"
)

// shutdownTimeout bounds the graceful stop: runs persist their terminal
// events, streams end, the listener closes.
const shutdownTimeout = 30 * time.Second

// remoted owns the daemon's lifetime: start builds its parts in order
// (store, LXD link, projects, providers, server, socket) and starts its
// goroutines; loop serves signals and the watchdog; close stops the
// goroutines, waits for every one of them, and only then closes the store
// they write to.
type remoted struct {
	flags  flags
	cfg    config.Config
	log    hclog.InterceptLogger
	notify *systemd.Notifier

	// ctx ends when the daemon stops; every goroutine of wg watches it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	store    *store.Store
	metrics  *daemon.Metrics
	lxd      *lxdLink
	hostUser runner.HostUser
	shim     *runner.ShimConfig // nil: runs go direct
	projects projectWiring
	ports    providers.AdapterConfig
	reg      *prompt.Registry
	srv      *daemon.Server
	serveErr chan error
	status   string // the systemd status while serving
}

func newRemoted(f flags, cfg config.Config, log hclog.InterceptLogger) *remoted {
	d := &remoted{flags: f, cfg: cfg, log: log, notify: systemd.NewNotifier(log.Named("systemd")),
		metrics: daemon.NewMetrics(), serveErr: make(chan error, 1)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// goJoined runs fn in a goroutine that close waits for before it closes
// what fn uses; fn must return once ctx ends.
func (d *remoted) goJoined(fn func(ctx context.Context)) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		fn(d.ctx)
	}()
}

// close stops every goroutine started, waits for them, then closes the
// store. It is safe after a failed or partial start.
func (d *remoted) close() {
	d.cancel()
	d.wg.Wait()
	if d.store != nil {
		if err := d.store.Close(); err != nil {
			d.log.Error("close store", "error", err)
		}
		d.store = nil
	}
}

// start builds the daemon and serves its socket.
func (d *remoted) start() error {
	t0 := time.Now()
	step := func(name string) { d.log.Debug("start-up step done", "step", name, "elapsed", time.Since(t0)) }
	if err := d.openStore(); err != nil {
		return err
	}
	step("store")
	d.connectLXD()
	step("lxd")
	if err := d.wireProviders(); err != nil {
		return err
	}
	step("providers")
	if err := d.newServer(); err != nil {
		return err
	}
	step("server")
	d.releaseOrphans()
	return d.serve()
}

// releaseOrphans releases, beside serving, the shims of the runs whose end
// was already stored (the previous daemon died before telling them): each
// one may take until its answer or a timeout. The run directories are
// listed before the daemon serves, so a run started later is never taken
// for one.
func (d *remoted) releaseOrphans() {
	runs, err := d.srv.Service().Runs()
	if err != nil {
		return
	}
	keep := make(map[string]bool, len(runs))
	for _, r := range runs {
		keep[r.RunID] = true
	}
	orphans := map[string]bool{}
	for _, id := range d.shim.Orphans(func(id string) bool { return keep[id] }) {
		orphans[id] = true
	}
	if len(orphans) == 0 {
		return
	}
	d.goJoined(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if n := d.shim.ReleaseOrphans(ctx, func(id string) bool { return !orphans[id] }); n > 0 {
			d.log.Info("released remote-shims of runs whose end was already stored", "shims", n)
		}
	})
}

func (d *remoted) openStore() error {
	d.notify.Status("opening the store")
	dir := d.cfg.Daemon.StateDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state directory %s: %w", dir, err)
	}
	key, err := loadSecretsKey(d.cfg.Daemon, os.Getenv("CREDENTIALS_DIRECTORY"))
	if err != nil {
		return fmt.Errorf("secrets key: %w", err)
	}
	st, err := store.Open(filepath.Join(dir, "remoted.db"), store.Options{Key: key, Logger: d.log.Named("store")})
	clear(key)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	d.store = st
	return nil
}

// connectLXD tries LXD once: reachable, or degraded mode (loose chats
// only) while the projects' goroutine keeps dialing.
func (d *remoted) connectLXD() {
	d.notify.Status("connecting to LXD")
	d.lxd = dialLXD(d.ctx, lxdOptions(d.cfg.LXD), 10*time.Second, d.metrics)
	if d.lxd.conn.Client() == nil {
		d.log.Named("lxd").Warn("LXD unreachable; serving loose chats only (degraded) and retrying", "error", d.lxd.Status(d.ctx).Error)
	}
}

// wireProviders resolves the host user, wires the projects (their
// reconciler runs until close) and configures the provider registry.
func (d *remoted) wireProviders() error {
	hostUser, err := runner.LookupHostUser(d.cfg.Agent.HostUser)
	if err != nil {
		return err
	}
	if int(hostUser.UID) != os.Getuid() && os.Getuid() != 0 {
		return fmt.Errorf("[agent] host_user %q: running agents as another user needs remoted to run as root", hostUser.Name)
	}
	if hostUser.UID == 0 {
		d.log.Warn("host agents run as root: a loose chat's agent can do anything root can on this host", "host_user", hostUser.Name)
	}
	d.hostUser = hostUser
	shim := shimConfig(d.cfg, d.log)
	d.shim = shim
	if d.projects, err = wireProjects(d.cfg, d.store, d.lxd.conn, shim, d.log.Named("projects")); err != nil {
		return fmt.Errorf("wire projects: %w", err)
	}
	if d.projects.Run != nil {
		d.goJoined(d.projects.Run) // writes project status to the store
	}
	d.ports = providers.AdapterConfig{
		Host:       runner.HostUserLauncher(&runner.HostLauncher{Shim: shim, Nice: d.cfg.Agent.Nice}, hostUser),
		Containers: d.projects.Containers,
		Preparer:   d.projects.Preparer,
		Logger:     d.log.Named("providers"),
		ExitGrace:  d.cfg.Agent.ExitGrace.Duration,
	}
	d.reg = prompt.NewRegistry()
	d.reg.Configure(adapters(), providerSettings(d.cfg), d.ports)
	d.warmProviders()
	return nil
}

// warmProviders runs the providers' readiness checks and capabilities in
// the background, so no prompt waits for a CLI's probe: after start-up
// and after each reload (which builds the adapters again).
func (d *remoted) warmProviders() {
	var ps []providers.Provider
	for _, e := range d.reg.List() {
		if e.Provider != nil {
			ps = append(ps, e.Provider)
		}
	}
	d.goJoined(func(ctx context.Context) { probe.Warm(ctx, ps) })
}

// newServer builds the API server and repairs chats a crash left running.
func (d *remoted) newServer() error {
	cfg, hostUser := d.cfg, d.hostUser
	schedules := &scheduleapi.Routes{}
	srv, err := daemon.New(daemon.Options{
		Store: d.store, Registry: d.reg, Logger: d.log.Named("api"), Metrics: d.metrics, Version: version.String(),
		Access:          access(cfg),
		TranscriptBytes: cfg.Agent.TranscriptBytes,
		SkillsDir:       cfg.Projects.SkillsDir,
		Roots:           prompt.NewUserRoots(cfg.Agent.AllowedRoots, hostUser),
		IdleTimeout:     cfg.Agent.IdleTimeout.Duration,
		DefaultCwd:      hostUser.Home,
		StateDir:        cfg.Daemon.StateDir,
		MinFree:         int64(cfg.Daemon.MinFree),
		MaxRunBytes:     int64(cfg.Daemon.MaxRunBytes),
		MaxChatBytes:    int64(cfg.Daemon.MaxChatBytes),
		LXD:             d.lxd,
		Projects:        d.projects.Chats,
		RouteProviders: append(d.projects.Routes, &doctor.Doctor{
			LXD: d.lxd, Registry: d.reg, SocketPath: cfg.Daemon.Socket, SocketGroup: cfg.Daemon.SocketGroup,
			StateDir: cfg.Daemon.StateDir, HostUser: hostUser, Roots: prompt.NewRoots(cfg.Agent.AllowedRoots, hostUser.Home),
			SecretsKeyPath: cfg.Daemon.SecretsKeyPath(os.Getenv("CREDENTIALS_DIRECTORY")),
			CLIStore:       d.projects.CLIStore,
			Images:         d.projects.Images,
			Warm:           d.projects.Warm,
			Profiles:       d.projects.Profiles,
			Uses:           d.store,
			Forges:         doctorForges(cfg.Forges),
		}, &loginapi.ProviderLogins{Registry: d.reg, HostUser: hostUser}, schedules),
		Notify: webhook.NotifierOptions{URL: cfg.Notify.WebhookURL, Headers: cfg.Notify.Headers},
		Queue: daemon.QueueBounds{Prompt: int64(cfg.Daemon.MaxQueuedPromptBytes),
			Chat: int64(cfg.Daemon.MaxChatQueuedBytes), User: int64(cfg.Daemon.MaxUserQueuedBytes)},
	})
	if err != nil {
		return err
	}
	d.srv = srv
	if w := d.projects.Warm; w != nil {
		srv.Metrics().WarmPool(func() (int, int, uint64, uint64) {
			st := w.Stats()
			return st.Ready, st.Creating, st.Claims, st.Misses
		})
	}
	d.projects.OnEvacuated(srv.Service().ContainerEvacuated)
	for _, rp := range d.projects.Routes {
		if pr, ok := rp.(*projectapi.Projects); ok {
			pr.Attach(srv) // restore and fork with a container reach the chats
		}
		if rr, ok := rp.(*repoapi.Routes); ok {
			rr.Attach(srv) // diff and push reach the chats
		}
	}
	// Recovery never fails start-up for want of space: chats it cannot
	// repair yet are logged, counted and retried while the daemon serves.
	if err := srv.Service().RecoverInterrupted(); err != nil {
		return err
	}
	if n := len(srv.Service().Unrepaired()); n > 0 {
		d.log.Error("serving with interrupted chats not yet repaired (state directory full?); retrying every 30 s", "chats", n)
	}
	// The schedules fire once runs are recovered: a catch-up run sees the
	// chats as they really are.
	sched, err := schedule.New(schedule.Options{Store: d.store, Prompts: srv.Service(), Logger: d.log.Named("schedule"),
		CatchUp: cfg.Schedules.CatchUp, MinInterval: cfg.Schedules.MinInterval.Duration,
		MaxPerChat: cfg.Schedules.MaxPerChat, MaxPerUser: cfg.Schedules.MaxPerUser})
	if err != nil {
		return err
	}
	schedules.Attach(sched)
	d.goJoined(sched.Run)
	return nil
}

// serve listens (systemd's socket, or our own) and serves until close.
func (d *remoted) serve() error {
	ln, err := systemd.ActivatedListener()
	if err != nil {
		return fmt.Errorf("socket activation: %w", err)
	}
	if ln == nil {
		if ln, err = socket.Listen(d.cfg.Daemon.Socket, d.cfg.Daemon.SocketGroup); err != nil {
			return err
		}
	}
	d.goJoined(func(ctx context.Context) { d.serveErr <- d.srv.Serve(ctx, ln) })
	lxdUp := d.lxd.conn.Client() != nil
	d.log.Info("serving", "socket", addrString(ln.Addr()), "lxd", lxdUp)
	d.status = "serving on " + addrString(ln.Addr())
	if !lxdUp {
		d.status += " (LXD unreachable: loose chats only)"
	}
	d.notify.Ready(d.status)
	return nil
}

// loop handles signals and the watchdog until the daemon stops: SIGHUP
// reloads, SIGTERM and SIGINT shut down gracefully.
func (d *remoted) loop(sigs <-chan os.Signal) error {
	var watchdog <-chan time.Time
	if iv := d.notify.WatchdogInterval(); iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		watchdog = t.C
	}
	for {
		select {
		case <-watchdog:
			d.notify.Watchdog()
		case err := <-d.serveErr:
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				d.notify.Reloading()
				d.reload()
				d.notify.Ready(d.status)
				continue
			}
			d.log.Info("stopping", "signal", sig.String())
			d.notify.Stopping()
			d.shutdown()
			d.log.Info("stopped")
			return nil
		}
	}
}

// shutdown stops the server gracefully (runs persist their terminal
// events) within shutdownTimeout; close then joins the goroutines.
func (d *remoted) shutdown() {
	ctx, cancel := context.WithTimeout(d.ctx, shutdownTimeout)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil {
		d.log.Error("shutdown incomplete", "error", err)
	}
	d.cancel()
}

// reload re-reads the config: log level, provider settings, the allowed
// peers, the frontends, the allowed roots (access for connections made
// after the reload), the run timeouts (exit grace, idle timeout) and the
// warm pool's size change in place; everything else (socket, state, LXD, host user, nice) needs a
// restart.
func (d *remoted) reload() {
	cfg, source, err := loadConfig(d.flags)
	if err != nil {
		d.log.Error("reload failed; keeping the running config", "config", source, "error", err)
		return
	}
	d.log.SetLevel(hclog.LevelFromString(cfg.Daemon.LogLevel))
	d.ports.ExitGrace = cfg.Agent.ExitGrace.Duration
	d.reg.Configure(adapters(), providerSettings(cfg), d.ports)
	d.warmProviders()
	d.srv.Service().SetIdleTimeout(cfg.Agent.IdleTimeout.Duration)
	if err := d.projects.Warm.SetSize(cfg.Projects.Warm); err != nil {
		d.log.Warn("[projects] warm not changed", "error", err)
	}
	d.srv.SetAccess(access(cfg))
	if hu, err := runner.LookupHostUser(cfg.Agent.HostUser); err == nil {
		d.srv.Service().SetRoots(prompt.NewUserRoots(cfg.Agent.AllowedRoots, hu))
	}
	d.log.Info("reloaded", "config", source, "log_level", cfg.Daemon.LogLevel)
}

// doctorForges lists the [forges."<host>"] tables for the doctor, by host.
func doctorForges(forges map[string]config.Forge) []doctor.Forge {
	out := make([]doctor.Forge, 0, len(forges))
	for _, host := range slices.Sorted(maps.Keys(forges)) {
		out = append(out, doctor.Forge{Host: host, Kind: forges[host].Kind, API: forges[host].API})
	}
	return out
}
