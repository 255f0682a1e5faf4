// Command remoted is Remote's daemon: it serves the JSON API on a Unix
// socket, runs agent CLIs for loose chats on the host and project chats in
// LXD containers, and keeps every chat's events durable and replayable.
// main only parses flags and wires the packages together.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/daemon"
	"remote/daemon/store"
	"remote/providers"
	"remote/providers/runner"
	"remote/systemd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultConfigPath is read when -config is not given.
const defaultConfigPath = "/etc/remote/remoted.toml"

//go:embed default.toml
var embeddedConfig []byte

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "remoted:", err)
		os.Exit(1)
	}
}

type flags struct {
	config, socket, stateDir, logLevel, logFormat string
	checkConfig                                   bool
	initSecretsKey                                string
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fset := flag.NewFlagSet("remoted", flag.ContinueOnError)
	fset.StringVar(&f.config, "config", "", "TOML config `path` (default "+defaultConfigPath+"; built-in defaults when that is absent)")
	fset.BoolVar(&f.checkConfig, "check-config", false, "load and validate the config, print the result and exit")
	fset.StringVar(&f.socket, "socket", "", "API socket `path`, overriding [daemon] socket")
	fset.StringVar(&f.stateDir, "state-dir", "", "state `directory`, overriding [daemon] state_dir")
	fset.StringVar(&f.logLevel, "log-level", "", "log `level` (trace, debug, info, warn, error), overriding [daemon] log_level")
	fset.StringVar(&f.logFormat, "log-format", "", "log `format` (text or json), overriding [daemon] log_format")
	fset.StringVar(&f.initSecretsKey, "init-secrets-key", "", "create the secrets key file at `path` (32 random bytes, mode 0600) unless it exists, then exit")
	return f, fset.Parse(args)
}

// loadConfig reads the config file (or the embedded defaults) and applies
// the flag overrides; the result is validated.
func loadConfig(f flags) (config.Config, string, error) {
	var cfg config.Config
	var err error
	source := f.config
	switch {
	case f.config != "":
		cfg, err = config.Load(f.config)
	default:
		if _, statErr := os.Stat(defaultConfigPath); errors.Is(statErr, fs.ErrNotExist) {
			source = "embedded defaults"
			cfg, err = config.Parse("embedded default.toml", embeddedConfig)
		} else {
			source = defaultConfigPath
			cfg, err = config.Load(defaultConfigPath)
		}
	}
	if err != nil {
		return cfg, source, err
	}
	abs := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		return filepath.Abs(p)
	}
	if f.stateDir != "" {
		if cfg.Daemon.StateDir, err = abs(f.stateDir); err != nil {
			return cfg, source, fmt.Errorf("-state-dir %q: %w", f.stateDir, err)
		}
	}
	if f.socket != "" {
		if cfg.Daemon.Socket, err = abs(f.socket); err != nil {
			return cfg, source, fmt.Errorf("-socket %q: %w", f.socket, err)
		}
	}
	if f.logLevel != "" {
		cfg.Daemon.LogLevel = f.logLevel
	}
	if f.logFormat != "" {
		cfg.Daemon.LogFormat = f.logFormat
	}
	return cfg, source, cfg.Validate()
}

// loadSecretsKey returns the key that encrypts project secrets. Under
// systemd ($CREDENTIALS_DIRECTORY set) without [daemon] secrets_key_file it
// is the credential "secrets-key", which is only read: the unit keeps
// /etc/remote read-only and hands the key over with LoadCredential=, so a
// missing credential is a configuration error, never a reason to make a new
// key. Otherwise it is the key file, created on first start (make run).
func loadSecretsKey(d config.Daemon, credentialsDir string) ([]byte, error) {
	path := d.SecretsKeyPath(credentialsDir)
	if d.SecretsKeyFile == "" && credentialsDir != "" {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("systemd credential secrets-key is missing from $CREDENTIALS_DIRECTORY (%s): "+
				"the unit needs LoadCredential=secrets-key:/etc/remote/secrets.key", credentialsDir)
		}
	}
	return store.LoadOrCreateKey(path)
}

// initSecretsKey creates the secrets key file at path (O_EXCL, mode 0600,
// 32 random bytes) for the unit's LoadCredential=, or checks and keeps the
// one already there; it never replaces a key, since the store cannot be
// read with another.
func initSecretsKey(path string) error {
	_, statErr := os.Lstat(path)
	key, err := store.LoadOrCreateKey(path)
	if err != nil {
		return fmt.Errorf("-init-secrets-key: %w", err)
	}
	clear(key)
	if statErr == nil {
		fmt.Printf("secrets key %s exists; kept it\n", path)
	} else {
		fmt.Printf("created secrets key %s (mode 0600); back it up\n", path)
	}
	return nil
}

func newLogger(cfg config.Daemon) hclog.InterceptLogger {
	return hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:        "remoted",
		Level:       hclog.LevelFromString(cfg.LogLevel),
		JSONFormat:  cfg.LogFormat == "json",
		DisableTime: systemd.UnderJournal(),
		Output:      os.Stderr,
	})
}

func providerSettings(cfg config.Config) map[providers.ProviderID]daemon.ProviderSetting {
	out := map[providers.ProviderID]daemon.ProviderSetting{}
	for id, p := range cfg.Providers {
		out[providers.ProviderID(id)] = daemon.ProviderSetting{Enabled: p.IsEnabled(), Binary: p.Binary, Args: p.Args, Env: p.Env}
	}
	return out
}

func run(args []string) error {
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	if f.initSecretsKey != "" {
		return initSecretsKey(f.initSecretsKey)
	}
	cfg, source, err := loadConfig(f)
	if f.checkConfig {
		if err != nil {
			return err
		}
		fmt.Printf("config OK (%s)\n", source)
		return nil
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg.Daemon)
	log.Info("starting", "version", version, "config", source, "pid", os.Getpid())

	ctx, stop := context.WithCancel(context.Background())
	// Signals are caught from here on, so a SIGTERM during start-up still
	// ends in mainLoop's graceful shutdown instead of killing the process.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	defer stop()
	notify := systemd.NewNotifier(log.Named("systemd"))

	// Store.
	notify.Status("opening the store")
	if err := os.MkdirAll(cfg.Daemon.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state directory %s: %w", cfg.Daemon.StateDir, err)
	}
	key, err := loadSecretsKey(cfg.Daemon, os.Getenv("CREDENTIALS_DIRECTORY"))
	if err != nil {
		return fmt.Errorf("secrets key: %w", err)
	}
	st, err := store.Open(filepath.Join(cfg.Daemon.StateDir, "remoted.db"), store.Options{Key: key, Logger: log.Named("store")})
	clear(key)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()

	// LXD: reachable, or degraded mode (loose chats only) with retries.
	notify.Status("connecting to LXD")
	metrics := daemon.NewMetrics()
	lxd := dialLXD(ctx, lxdOptions(cfg.LXD), 10*time.Second, metrics)
	lxdUp := lxd.conn.Client() != nil
	if !lxdUp {
		log.Named("lxd").Warn("LXD unreachable; serving loose chats only (degraded) and retrying", "error", lxd.Status(ctx).Error)
	}

	// Providers.
	hostUser, err := daemon.LookupHostUser(cfg.Agent.HostUser)
	if err != nil {
		return err
	}
	if int(hostUser.UID) != os.Getuid() && os.Getuid() != 0 {
		return fmt.Errorf("[agent] host_user %q: running agents as another user needs remoted to run as root", hostUser.Name)
	}
	if hostUser.UID == 0 {
		log.Warn("host agents run as root: a loose chat's agent can do anything root can on this host", "host_user", hostUser.Name)
	}
	projects, err := wireProjects(cfg, st, lxd.conn, log.Named("projects"))
	if err != nil {
		return fmt.Errorf("wire projects: %w", err)
	}
	if projects.Run != nil {
		go projects.Run(ctx)
	}
	ports := providers.AdapterConfig{
		Host:       daemon.HostUserLauncher(&runner.HostLauncher{}, hostUser),
		Containers: projects.Containers,
		Preparer:   projects.Preparer,
		Logger:     log.Named("providers"),
		ExitGrace:  cfg.Agent.ExitGrace.Duration,
	}
	reg := daemon.NewRegistry()
	reg.Configure(adapters(), providerSettings(cfg), ports)

	srv, err := daemon.New(daemon.Options{
		Store: st, Registry: reg, Logger: log.Named("api"), Metrics: metrics, Version: version,
		Access:          access(cfg),
		TranscriptBytes: cfg.Agent.TranscriptBytes,
		SkillsDir:       cfg.Projects.SkillsDir,
		Roots:           daemon.NewUserRoots(cfg.Agent.AllowedRoots, hostUser),
		IdleTimeout:     cfg.Agent.IdleTimeout.Duration,
		DefaultCwd:      hostUser.Home,
		StateDir:        cfg.Daemon.StateDir,
		MinFree:         int64(cfg.Daemon.MinFree),
		MaxRunBytes:     int64(cfg.Daemon.MaxRunBytes),
		MaxChatBytes:    int64(cfg.Daemon.MaxChatBytes),
		LXD:             lxd,
		Projects:        projects.Chats,
		RouteProviders: append(projects.Routes, &daemon.Doctor{
			LXD: lxd, Registry: reg, SocketPath: cfg.Daemon.Socket, SocketGroup: cfg.Daemon.SocketGroup,
			StateDir: cfg.Daemon.StateDir, HostUser: hostUser, Roots: daemon.NewRoots(cfg.Agent.AllowedRoots, hostUser.Home),
			SecretsKeyPath: cfg.Daemon.SecretsKeyPath(os.Getenv("CREDENTIALS_DIRECTORY")),
		}),
		Notify: daemon.NotifierOptions{URL: cfg.Notify.WebhookURL, Headers: cfg.Notify.Headers},
	})
	if err != nil {
		return err
	}
	projects.OnEvacuated(srv.Service().ContainerEvacuated)
	for _, rp := range projects.Routes {
		if pr, ok := rp.(*daemon.Projects); ok {
			pr.Attach(srv) // restore and fork with a container reach the chats
		}
	}
	// Recovery never fails start-up for want of space: chats it cannot
	// repair yet are logged, counted and retried while the daemon serves.
	if err := srv.Service().RecoverInterrupted(); err != nil {
		return err
	}
	if n := len(srv.Service().Unrepaired()); n > 0 {
		log.Error("serving with interrupted chats not yet repaired (state directory full?); retrying every 30 s", "chats", n)
	}

	// Socket: systemd's, or our own.
	ln, err := systemd.ActivatedListener()
	if err != nil {
		return fmt.Errorf("socket activation: %w", err)
	}
	if ln == nil {
		if ln, err = daemon.Listen(cfg.Daemon.Socket, cfg.Daemon.SocketGroup); err != nil {
			return err
		}
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ctx, ln) }()
	log.Info("serving", "socket", addrString(ln.Addr()), "lxd", lxdUp)
	status := "serving on " + addrString(ln.Addr())
	if !lxdUp {
		status += " (LXD unreachable: loose chats only)"
	}
	notify.Ready(status)

	return mainLoop(ctx, f, log, notify, srv, reg, ports, serveErr, status, stop, sigs)
}

func addrString(a net.Addr) string { return a.String() }

// mainLoop handles signals and the watchdog until the daemon stops.
func mainLoop(ctx context.Context, f flags, log hclog.InterceptLogger, notify *systemd.Notifier, srv *daemon.Server, reg *daemon.Registry, ports providers.AdapterConfig, serveErr <-chan error, status string, stop context.CancelFunc, sigs <-chan os.Signal) error {
	var watchdog <-chan time.Time
	if iv := notify.WatchdogInterval(); iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		watchdog = t.C
	}
	for {
		select {
		case <-watchdog:
			notify.Watchdog()
		case err := <-serveErr:
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				notify.Reloading()
				reload(f, log, srv, reg, ports)
				notify.Ready(status)
				continue
			}
			log.Info("stopping", "signal", sig.String())
			notify.Stopping()
			shutdownCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := srv.Shutdown(shutdownCtx)
			cancel()
			stop()
			if err != nil {
				log.Error("shutdown incomplete", "error", err)
			}
			log.Info("stopped")
			return nil
		}
	}
}

// access is who may use the socket and who may act for other users.
func access(cfg config.Config) daemon.Access {
	return daemon.Access{UIDs: cfg.Daemon.AllowUIDs, GIDs: cfg.Daemon.AllowGIDs, Frontends: cfg.Daemon.FrontendUIDs}
}

// reload re-reads the config: log level, provider settings, the allowed
// peers, the frontends, the allowed roots (access for connections made
// after the reload) and the run timeouts (exit grace, idle timeout) change
// in place; everything else (socket, state, LXD, host user) needs a
// restart.
func reload(f flags, log hclog.InterceptLogger, srv *daemon.Server, reg *daemon.Registry, ports providers.AdapterConfig) {
	cfg, source, err := loadConfig(f)
	if err != nil {
		log.Error("reload failed; keeping the running config", "config", source, "error", err)
		return
	}
	log.SetLevel(hclog.LevelFromString(cfg.Daemon.LogLevel))
	ports.ExitGrace = cfg.Agent.ExitGrace.Duration
	reg.Configure(adapters(), providerSettings(cfg), ports)
	srv.Service().SetIdleTimeout(cfg.Agent.IdleTimeout.Duration)
	srv.SetAccess(access(cfg))
	if hu, err := daemon.LookupHostUser(cfg.Agent.HostUser); err == nil {
		srv.Service().SetRoots(daemon.NewUserRoots(cfg.Agent.AllowedRoots, hu))
	}
	log.Info("reloaded", "config", source, "log_level", cfg.Daemon.LogLevel)
}
