// Command remoted is Remote's daemon: it serves the JSON API on a Unix
// socket, runs agent CLIs for loose chats on the host and project chats in
// LXD containers, and keeps every chat's events durable and replayable.
// main only parses flags and wires the packages together.
package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/daemon"
	"remote/daemon/prompt"
	"remote/daemon/store/keyfile"
	"remote/internal/version"
	"remote/providers"
	"remote/systemd"
)

// defaultConfigPath is read when -config is not given.
const defaultConfigPath = "/etc/remote/remoted.toml"

//go:embed default.toml
var embeddedConfig []byte

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, fatalPrefix(systemd.UnderJournal())+"remoted:", err)
		os.Exit(1)
	}
}

// fatalPrefix is what the line saying why remoted stops begins with: under
// journald the sd-daemon priority of an error, so that `journalctl -p err`
// shows it (a plain line reaches the journal at priority 6, info).
func fatalPrefix(underJournal bool) string {
	if underJournal {
		return "<3>"
	}
	return ""
}

type flags struct {
	config, socket, stateDir, logLevel, logFormat string
	checkConfig, printDefaultConfig, version      bool
	initSecretsKey                                string
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fset := flag.NewFlagSet("remoted", flag.ContinueOnError)
	fset.StringVar(&f.config, "config", "", "TOML config `path` (default "+defaultConfigPath+"; built-in defaults when that is absent)")
	fset.BoolVar(&f.checkConfig, "check-config", false, "load and validate the config, print the result and exit")
	fset.BoolVar(&f.printDefaultConfig, "print-default-config", false, "print the complete default configuration as commented TOML (docs/config.md) and exit")
	fset.BoolVar(&f.version, "version", false, "print the version (make build stamps `git describe`) and exit")
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
// missingKeyCredential is the unit's SetCredential= fallback for
// secrets-key, handed over when its LoadCredential= file is missing.
const missingKeyCredential = "remoted-secrets-key-file-missing"

func loadSecretsKey(d config.Daemon, credentialsDir string) ([]byte, error) {
	path := d.SecretsKeyPath(credentialsDir)
	if d.SecretsKeyFile == "" && credentialsDir != "" {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("systemd credential secrets-key is missing from $CREDENTIALS_DIRECTORY (%s): "+
				"the unit needs LoadCredential=secrets-key:/etc/remote/secrets.key", credentialsDir)
		}
		missing := err == nil && string(data) == missingKeyCredential
		clear(data)
		if missing {
			// The unit's SetCredential= fallback: LoadCredential='s file
			// could not be read.
			return nil, errors.New("the secrets key file is missing: systemd could not load the credential secrets-key " +
				"from the unit's LoadCredential= file (/etc/remote/secrets.key unless a drop-in changed it); " +
				"create it with: remoted -init-secrets-key /etc/remote/secrets.key")
		}
	}
	return keyfile.LoadOrCreate(path)
}

// initSecretsKey creates the secrets key file at path (O_EXCL, mode 0600,
// 32 random bytes) for the unit's LoadCredential=, or checks and keeps the
// one already there; it never replaces a key, since the store cannot be
// read with another.
func initSecretsKey(path string) error {
	_, statErr := os.Lstat(path)
	key, err := keyfile.LoadOrCreate(path)
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
	journal := systemd.UnderJournal()
	var out io.Writer = os.Stderr
	if journal {
		out = systemd.JournalWriter(out) // priorities for journalctl -p
	}
	return hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:        "remoted",
		Level:       hclog.LevelFromString(cfg.LogLevel),
		JSONFormat:  cfg.LogFormat == "json",
		DisableTime: journal,
		Output:      out,
	})
}

func providerSettings(cfg config.Config) map[providers.ProviderID]prompt.ProviderSetting {
	out := map[providers.ProviderID]prompt.ProviderSetting{}
	for id, p := range cfg.Providers {
		out[providers.ProviderID(id)] = prompt.ProviderSetting{Enabled: p.IsEnabled(), Binary: p.Binary, Args: p.Args, Env: p.Env, ProjectEnv: p.ProjectEnv}
	}
	return out
}

func run(args []string) error {
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	if f.version {
		fmt.Println("remoted", version.String())
		return nil
	}
	if f.initSecretsKey != "" {
		return initSecretsKey(f.initSecretsKey)
	}
	if f.printDefaultConfig {
		out, err := config.DefaultTOML()
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
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
	// Signals are caught from here on, so a SIGTERM during start-up still
	// ends in a graceful shutdown instead of killing the process.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	d := newRemoted(f, cfg, newLogger(cfg.Daemon))
	defer d.close()
	d.log.Info("starting", "version", version.String(), "config", source, "pid", os.Getpid())
	if err := d.start(); err != nil {
		return err
	}
	return d.loop(sigs)
}

func addrString(a net.Addr) string { return a.String() }

// access is who may use the socket and who may act for other users.
func access(cfg config.Config) daemon.Access {
	return daemon.Access{UIDs: cfg.Daemon.AllowUIDs, GIDs: cfg.Daemon.AllowGIDs, Frontends: cfg.Daemon.FrontendUIDs}
}
