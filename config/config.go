package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Version is the only configuration schema version this build reads. A file
// may state it as a top-level `version = 1`; leaving it out means this one.
const Version = 1

// Config is the whole daemon configuration. The zero value is not useful;
// start from Default, Load or Parse.
type Config struct {
	// Version is the schema version; 0 (absent) and Version are accepted.
	Version   int                 `toml:"version"`
	Daemon    Daemon              `toml:"daemon"`
	LXD       LXD                 `toml:"lxd"`
	Agent     Agent               `toml:"agent"`
	Providers map[string]Provider `toml:"providers"` // keyed by provider id, see ProviderIDs
	Projects  Projects            `toml:"projects"`
	Web       Web                 `toml:"web"`
	Notify    Notify              `toml:"notify"`
}

// Notify configures the run notifications remoted POSTs to a webhook
// (approval waiting, run completed, run failed).
type Notify struct {
	// WebhookURL is an absolute http or https URL; "" sends nothing.
	WebhookURL string `toml:"webhook_url"`
	// Headers are sent with every POST, e.g. Authorization. Values may be
	// secrets: they never appear in errors or logs.
	Headers map[string]string `toml:"headers"`
}

// Daemon configures remoted's own process: its API socket, who may use it,
// where it keeps state and how it logs.
type Daemon struct {
	// Socket is the Unix socket the API listens on (absolute path). Under
	// socket activation the activated socket is used instead.
	Socket string `toml:"socket"`
	// SocketGroup, when set, is the group the socket file is chowned to.
	SocketGroup string `toml:"socket_group"`
	// AllowUIDs and AllowGIDs are the peers (besides root and the daemon's
	// own uid) allowed to use the API.
	AllowUIDs []int `toml:"allow_uids"`
	AllowGIDs []int `toml:"allow_gids"`
	// FrontendUIDs are the peers (remote-web's uid) that may name the acting
	// user in X-Remote-User, as root and the daemon's own uid may; they may
	// also use the API. Every other peer acts as its own login name.
	FrontendUIDs []int `toml:"frontend_uids"`
	// StateDir holds the store and the default secrets key (absolute path).
	StateDir string `toml:"state_dir"`
	// LogLevel is one of trace, debug, info, warn, error.
	LogLevel string `toml:"log_level"`
	// LogFormat is text or json.
	LogFormat string `toml:"log_format"`
	// SecretsKeyFile overrides where the secrets key is read; see
	// Daemon.SecretsKeyPath for the default.
	SecretsKeyFile string `toml:"secrets_key_file"`
	// MinFree is the free space the state directory's filesystem must
	// have for a prompt to start (checked before each run and every 30 s;
	// below it prompts answer 507 storage_full). 0 turns the check off.
	MinFree Size `toml:"min_free"`
	// MaxRunBytes bounds the event bytes one run may store; a run that
	// outgrows it is stopped with an error event. 0 = no bound.
	MaxRunBytes Size `toml:"max_run_bytes"`
	// MaxChatBytes bounds the event bytes one chat may store: a run is
	// stopped when the chat reaches it and the chat takes no new prompts.
	// 0 = no bound.
	MaxChatBytes Size `toml:"max_chat_bytes"`
}

// LXD says how to reach LXD: the local Unix socket (Socket, or discovery when
// both Socket and URL are empty) or HTTPS (URL with a client certificate).
type LXD struct {
	Socket string `toml:"socket"` // absolute path of LXD's unix.socket
	URL    string `toml:"url"`    // https://host:port of a remote LXD or cluster member
	// URLs are several members of one LXD cluster, tried in order: the
	// daemon uses the first that answers and fails over on connection
	// errors. Set url or urls, not both.
	URLs       []string `toml:"urls"`
	ClientCert string   `toml:"client_cert"` // PEM file of the client certificate (with URL)
	ClientKey  string   `toml:"client_key"`  // PEM file of its key (with URL)
	ServerCert string   `toml:"server_cert"` // PEM file of the pinned server certificate (with URL)
	Project    string   `toml:"project"`     // LXD project; "" is LXD's default project
	Target     string   `toml:"target"`      // cluster member new containers are placed on
	Image      string   `toml:"image"`       // local image alias for new containers (default remote-dev: make image)
	Profiles   []string `toml:"profiles"`    // profiles applied to new containers
}

// Agent holds settings shared by every agent run.
type Agent struct {
	// CredentialSyncTimeout bounds copying credentials back from a container.
	CredentialSyncTimeout Duration `toml:"credential_sync_timeout"`
	// TranscriptBytes bounds the transcript a run keeps.
	TranscriptBytes int `toml:"transcript_bytes"`
	// HostUser is the host user loose chats run as; "" is the daemon's own.
	HostUser string `toml:"host_user"`
	// AllowedRoots are the absolute directories a loose chat may run in;
	// nil means the host user's home directory and /tmp.
	AllowedRoots []string `toml:"allowed_roots"`
	// ExitGrace is how long a CLI that has reported the end of its turn
	// may take to exit before it is stopped (the turn stands).
	ExitGrace Duration `toml:"exit_grace"`
	// IdleTimeout ends a run whose CLI produced no output for that long,
	// with an error; 0 (the default) never does.
	IdleTimeout Duration `toml:"idle_timeout"`
	// ShimBinary is the remote-shim that supervises runs so they outlive
	// the daemon (an absolute path); "" is remote-shim next to remoted.
	ShimBinary string `toml:"shim_binary"`
}

// Provider configures one agent CLI, under [providers.<id>].
type Provider struct {
	// Enabled switches the provider off when false; nil means enabled.
	Enabled *bool `toml:"enabled"`
	// Binary is the CLI to run: a bare name is looked up on PATH (on the
	// host, or inside the container), otherwise an absolute path.
	Binary string `toml:"binary"`
	// Args are appended to the adapter's own arguments.
	Args []string `toml:"args"`
	// Env is extra environment for the CLI. Values may be secrets: they
	// never appear in errors.
	Env map[string]string `toml:"env"`
	// ProviderProvisioning adds the project-container keys (config/projects.go).
	ProviderProvisioning
}

// IsEnabled reports whether the provider is enabled (a nil Enabled is true).
func (p Provider) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// Projects configures what is published into project containers.
type Projects struct {
	InstructionsDir string `toml:"instructions_dir"` // absolute; "" = none
	SkillsDir       string `toml:"skills_dir"`       // absolute; "" = none
	// ProjectsProvisioning adds the container keys (config/projects.go).
	ProjectsProvisioning
}

// Web configures remote-web, the browser frontend.
type Web struct {
	Listen     string    `toml:"listen"`      // host:port
	TLSCert    string    `toml:"tls_cert"`    // PEM file; with TLSKey enables HTTPS
	TLSKey     string    `toml:"tls_key"`     // PEM file
	SessionTTL Duration  `toml:"session_ttl"` // browser session lifetime
	Users      []WebUser `toml:"users"`       // [[web.users]] entries
	// CookieSecure marks the session cookie Secure; unset means "when
	// tls_cert is set" (IsCookieSecure). Set it true behind a TLS-ending
	// reverse proxy.
	CookieSecure *bool `toml:"cookie_secure"`
	// AllowedHosts are the DNS names browsers may use in the Host header,
	// besides localhost and IP addresses (always allowed: a rebinding DNS
	// name is never one of them).
	AllowedHosts []string `toml:"allowed_hosts"`
	// TrustedProxies are reverse proxies (IP addresses or CIDR prefixes)
	// whose X-Forwarded-For and X-Forwarded-Proto remote-web believes.
	TrustedProxies []string `toml:"trusted_proxies"`
	// PreviewListen is the host:port of the preview origin, where the
	// apps of users' projects are served (never on the page's origin);
	// "" turns previews off in remote-web.
	PreviewListen string `toml:"preview_listen"`
	// PreviewURL is the preview origin as browsers reach it; unset means
	// http(s)://preview_listen (PreviewOrigin).
	PreviewURL string `toml:"preview_url"`
}

// PreviewOrigin is the preview origin browsers use: preview_url, or the
// scheme of the page (https with tls_cert) and preview_listen; "" when
// previews are off.
func (w Web) PreviewOrigin() string {
	switch {
	case w.PreviewListen == "":
		return ""
	case w.PreviewURL != "":
		return strings.TrimSuffix(w.PreviewURL, "/")
	case w.TLSCert != "":
		return "https://" + w.PreviewListen
	}
	return "http://" + w.PreviewListen
}

// WebUser is one browser login. PasswordHash is never echoed in errors.
type WebUser struct {
	Name         string `toml:"name"`
	PasswordHash string `toml:"password_hash"`
}

// Duration is a time.Duration written in TOML as a string such as "30s" or
// "1h30m" (time.ParseDuration syntax).
type Duration struct{ time.Duration }

// UnmarshalText parses a time.ParseDuration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("invalid duration %q", text)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in time.Duration.String form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// providerIDs are the provider ids [providers.<id>] accepts, in display order.
var providerIDs = []string{"claude", "codex", "minimax", "kimi", "antigravity"}

// ProviderIDs returns the provider ids [providers.<id>] accepts, in display
// order, as a fresh slice.
func ProviderIDs() []string { return slices.Clone(providerIDs) }

// defaultBinaries is the CLI each provider runs unless binary is set.
var defaultBinaries = map[string]string{
	"claude":      "claude",
	"codex":       "codex",
	"minimax":     "codex", // the codex app-server harness with its own home
	"kimi":        "kimi",
	"antigravity": "agy",
}

// Default returns the configuration used for every key a file leaves out.
// Each call returns fresh slices and maps.
func Default() Config {
	c := Config{
		Version: Version,
		Daemon: Daemon{
			Socket:    "/run/remote/remoted.sock",
			StateDir:  "/var/lib/remote",
			LogLevel:  "info",
			LogFormat: "text",
			// Storage bounds (README "Disk space").
			MinFree:      256 << 20,
			MaxRunBytes:  64 << 20,
			MaxChatBytes: 1 << 30,
		},
		LXD: LXD{
			Image:    "remote-dev", // make image (scripts/image)
			Profiles: []string{"default"},
		},
		Agent: Agent{
			CredentialSyncTimeout: Duration{30 * time.Second},
			TranscriptBytes:       24000,
			ExitGrace:             Duration{10 * time.Second},
		},
		Providers: make(map[string]Provider, len(providerIDs)),
		Web: Web{
			Listen:     "127.0.0.1:8080",
			SessionTTL: Duration{12 * time.Hour},
		},
	}
	for _, id := range providerIDs {
		c.Providers[id] = Provider{Binary: defaultBinaries[id]}
	}
	return c
}

// SecretsKeyPath returns the file the secrets key is read from:
// SecretsKeyFile when set; else "secrets-key" in credentialsDir (systemd's
// $CREDENTIALS_DIRECTORY, filled by LoadCredential=) when that is non-empty;
// else secrets.key in StateDir.
func (d Daemon) SecretsKeyPath(credentialsDir string) string {
	switch {
	case d.SecretsKeyFile != "":
		return d.SecretsKeyFile
	case credentialsDir != "":
		return filepath.Join(credentialsDir, "secrets-key")
	default:
		return filepath.Join(d.StateDir, "secrets.key")
	}
}
