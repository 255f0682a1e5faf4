package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/daemon"
	"remote/daemon/prompt"
	"remote/daemon/socket"
	"remote/daemon/store"
	"remote/daemon/system"
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
	ports    providers.AdapterConfig
	reg      *prompt.Registry
	sys      *system.System
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
	runs, err := d.sys.Service.Runs()
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

// wireProviders resolves the host user and remote-shim; the system is
// built from them and the config by newServer.
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
	d.shim = shimConfig(d.cfg, d.log)
	d.reg = prompt.NewRegistry()
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

// newServer builds the daemon through the composition root (system.New)
// from the config: the projects (their loop runs until close), the
// providers, the routes and the server; it repairs the chats a crash left
// running.
func (d *remoted) newServer() error {
	o, err := systemOptions(d.cfg, d.store, d.lxd, d.hostUser, d.shim, d.log)
	if err != nil {
		return fmt.Errorf("wire projects: %w", err)
	}
	o.Metrics = d.metrics
	o.Go = d.goJoined
	o.Registry = d.reg
	o.Providers = func(ports providers.AdapterConfig) {
		d.ports = ports
		d.reg.Configure(adapters(), providerSettings(d.cfg), ports)
		d.warmProviders()
	}
	sys, err := system.New(o)
	if err != nil {
		return err
	}
	d.sys = sys
	d.goJoined(sys.Scheduler.Run) // the schedules fire once runs are recovered
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
	d.goJoined(func(ctx context.Context) { d.serveErr <- d.sys.Server.Serve(ctx, ln) })
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
	if err := d.sys.Server.Shutdown(ctx); err != nil {
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
	d.sys.Service.SetIdleTimeout(cfg.Agent.IdleTimeout.Duration)
	if err := d.sys.Warm.SetSize(cfg.Projects.Warm); err != nil {
		d.log.Warn("[projects] warm not changed", "error", err)
	}
	d.sys.Server.SetAccess(access(cfg))
	if hu, err := runner.LookupHostUser(cfg.Agent.HostUser); err == nil {
		d.sys.Service.SetRoots(prompt.NewUserRoots(cfg.Agent.AllowedRoots, hu))
	}
	d.log.Info("reloaded", "config", source, "log_level", cfg.Daemon.LogLevel)
}
