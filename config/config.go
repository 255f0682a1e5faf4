package config

import (
	"fmt"
	"net"
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
	Version int    `toml:"version" doc:"schema version of this file; only 1 exists"`
	Daemon  Daemon `toml:"daemon" doc:"remoted itself: its API socket, who may use it, its state, its logs and its storage bounds"`
	LXD     LXD    `toml:"lxd" doc:"how to reach LXD: the local socket (found by itself when socket and url are empty) or HTTPS"`
	Agent   Agent  `toml:"agent" doc:"settings shared by every agent run"`
	// Providers is keyed by provider id, see ProviderIDs.
	Providers map[string]Provider `toml:"providers" doc:"one table per agent CLI: claude, codex, minimax, kimi, antigravity"`
	Projects  Projects            `toml:"projects" doc:"what is published into project containers, and the containers' defaults"`
	Web       Web                 `toml:"web" doc:"remote-web, the browser frontend (it reads this same file)"`
	Notify    Notify              `toml:"notify" doc:"webhook notifications: approval waiting, run completed, run failed"`
	Schedules Schedules           `toml:"schedules" doc:"prompts sent to chats on a cron schedule (docs/api.md, Schedules)"`
	// Forges is keyed by the host of clone URLs ("github.com",
	// "gitea.example:3000"); see config/forges.go.
	Forges map[string]Forge `toml:"forges" doc:"the forges pull requests are opened on, one table per host of clone URLs, e.g. [forges.'gitea.example.com']"`
}

// Notify configures the run notifications remoted POSTs to a webhook
// (approval waiting, run completed, run failed).
type Notify struct {
	// WebhookURL is an absolute http or https URL; "" sends nothing.
	WebhookURL string `toml:"webhook_url" doc:"absolute http(s) URL the daemon POSTs run notifications to; empty sends nothing"`
	// Headers are sent with every POST, e.g. Authorization. Values may be
	// secrets: they never appear in errors or logs.
	Headers map[string]string `toml:"headers" doc:"headers sent with every POST, e.g. Authorization; values never appear in errors or logs"`
}

// Schedules configures the chats' schedules (daemon/schedule).
type Schedules struct {
	// CatchUp fires once at start a schedule whose time passed while the
	// daemon was down; false records that run as missed.
	CatchUp bool `toml:"catch_up" doc:"a schedule whose time passed while the daemon was down runs once at start; false records it as missed"`
	// MinInterval is the shortest time between two firings a cron
	// expression may ask for.
	MinInterval Duration `toml:"min_interval" doc:"the shortest interval between two firings a schedule's cron expression may ask for"`
	// MaxPerChat and MaxPerUser bound how many schedules exist.
	MaxPerChat int `toml:"max_per_chat" doc:"the most schedules one chat may have"`
	MaxPerUser int `toml:"max_per_user" doc:"the most schedules one user may have over all their chats"`
}

// Daemon configures remoted's own process: its API socket, who may use it,
// where it keeps state and how it logs.
type Daemon struct {
	// Socket is the Unix socket the API listens on (absolute path). Under
	// socket activation the activated socket is used instead.
	Socket string `toml:"socket" doc:"the API's Unix socket (absolute); under socket activation systemd's socket is used instead"`
	// SocketGroup, when set, is the group the socket file is chowned to.
	SocketGroup string `toml:"socket_group" doc:"group the socket file is given when the daemon creates it; empty leaves it"`
	// AllowUIDs and AllowGIDs are the peers (besides root and the daemon's
	// own uid) allowed to use the API.
	AllowUIDs []int `toml:"allow_uids" doc:"uids allowed to use the API besides root and the daemon's own (checked per connection)"`
	AllowGIDs []int `toml:"allow_gids" doc:"gids whose members may use the API (checked per connection from the peer's groups)"`
	// FrontendUIDs are the peers (remote-web's uid) that may name the acting
	// user in X-Remote-User, as root and the daemon's own uid may; they may
	// also use the API. Every other peer acts as its own login name.
	FrontendUIDs []int `toml:"frontend_uids" doc:"uids that may act for other users in X-Remote-User (put remote-web's uid here)"`
	// StateDir holds the store and the default secrets key (absolute path).
	StateDir string `toml:"state_dir" doc:"holds the store remoted.db, the default secrets key and the run directories (absolute)"`
	// LogLevel is one of trace, debug, info, warn, error.
	LogLevel string `toml:"log_level" doc:"trace, debug, info, warn or error (reloaded on SIGHUP)"`
	// LogFormat is text or json.
	LogFormat string `toml:"log_format" doc:"text or json; under journald text lines carry no timestamps"`
	// SecretsKeyFile overrides where the secrets key is read; see
	// Daemon.SecretsKeyPath for the default.
	SecretsKeyFile string `toml:"secrets_key_file" doc:"the secrets key; empty: systemd's credential secrets-key, else secrets.key in state_dir"`
	// MinFree is the free space the state directory's filesystem must
	// have for a prompt to start (checked before each run and every 30 s;
	// below it prompts answer 507 storage_full). 0 turns the check off.
	MinFree Size `toml:"min_free" doc:"free space the state directory needs for a prompt to start (else 507 storage_full); 0 = off"`
	// MaxRunBytes bounds the event bytes one run may store; a run that
	// outgrows it is stopped with an error event. 0 = no bound.
	MaxRunBytes Size `toml:"max_run_bytes" doc:"event bytes one run may store before it is stopped with an error; 0 = no bound"`
	// MaxChatBytes bounds the event bytes one chat may store: a run is
	// stopped when the chat reaches it and the chat takes no new prompts.
	// 0 = no bound.
	MaxChatBytes Size `toml:"max_chat_bytes" doc:"event bytes one chat may store; a full chat takes no new prompts; 0 = no bound"`
	// MaxQueuedPromptBytes bounds one queued prompt (its text, synthetic
	// and skill names); MaxChatQueuedBytes and MaxUserQueuedBytes bound
	// the stored bytes of one chat's queue and of all of one user's
	// queues. Over one, queueing is refused naming it. 0 = no bound.
	MaxQueuedPromptBytes Size `toml:"max_queued_prompt_bytes" doc:"bytes of one queued prompt (text, synthetic, skill names); over it: 400; 0 = no bound"`
	MaxChatQueuedBytes   Size `toml:"max_chat_queued_bytes" doc:"stored bytes of one chat's queue; over it: 409; 0 = no bound"`
	MaxUserQueuedBytes   Size `toml:"max_user_queued_bytes" doc:"stored bytes of all one user's queues; over it: 409; 0 = no bound"`
}

// LXD says how to reach LXD: the local Unix socket (Socket, or discovery when
// both Socket and URL are empty) or HTTPS (URL with a client certificate).
type LXD struct {
	// Socket is the absolute path of LXD's unix.socket.
	Socket string `toml:"socket" doc:"LXD's unix.socket; empty with url empty: $LXD_SOCKET, $LXD_DIR, the snap's, then Debian's"`
	// URL is https://host:port of a remote LXD or cluster member.
	URL string `toml:"url" doc:"https://host:port of a remote LXD or of any cluster member (with the three PEM files)"`
	// URLs are several members of one LXD cluster, tried in order: the
	// daemon uses the first that answers and fails over on connection
	// errors. Set url or urls, not both.
	URLs       []string `toml:"urls" doc:"several members of one LXD cluster, tried in order with failover; set url or urls, not both"`
	ClientCert string   `toml:"client_cert" doc:"PEM file of the daemon's client certificate (with url or urls)"`
	ClientKey  string   `toml:"client_key" doc:"PEM file of that certificate's key (with url or urls)"`
	ServerCert string   `toml:"server_cert" doc:"PEM file of the pinned server certificate (a cluster's cluster.crt)"`
	Project    string   `toml:"project" doc:"LXD project holding the containers; empty is LXD's default project"`
	Target     string   `toml:"target" doc:"cluster member or @group new containers go to; empty lets LXD decide"`
	Image      string   `toml:"image" doc:"local image alias or fingerprint new containers are made from (remote-dev: built by make image)"`
	Profiles   []string `toml:"profiles" doc:"LXD profiles applied to new containers (review what they let a container reach)"`
	// ImageServers are the image servers an image may name as
	// "<name>:<alias>", keyed by name; none by default (the usual one:
	// images = { url = "https://images.linuxcontainers.org", protocol = "simplestreams" }).
	ImageServers map[string]ImageServer `toml:"image_servers" doc:"image servers a project's image may name as <name>:<alias>; none by default; the usual one: images = { url = 'https://images.linuxcontainers.org', protocol = 'simplestreams' }"`
}

// Agent holds settings shared by every agent run.
type Agent struct {
	// CredentialSyncTimeout bounds copying credentials back from a container.
	CredentialSyncTimeout Duration `toml:"credential_sync_timeout" doc:"bound on copying provider credentials back from a container after a run"`
	// TranscriptBytes bounds the transcript a run keeps.
	TranscriptBytes int `toml:"transcript_bytes" doc:"bytes of visible chat history a run gets when a provider session must start afresh"`
	// HostUser is the host user loose chats run as; "" is the daemon's own.
	HostUser string `toml:"host_user" doc:"host user loose chats run as; empty is the daemon's own user (root under systemd)"`
	// AllowedRoots are the absolute directories a loose chat may run in;
	// nil means the host user's home directory and /tmp.
	AllowedRoots []string `toml:"allowed_roots" doc:"absolute directories a loose chat may run in; empty: the host user's home and /tmp"`
	// ExitGrace is how long a CLI that has reported the end of its turn
	// may take to exit before it is stopped (the turn stands).
	ExitGrace Duration `toml:"exit_grace" doc:"how long a CLI that reported the end of its turn may take to exit before it is stopped"`
	// IdleTimeout ends a run whose CLI produced no output for that long,
	// with an error; 0 (the default) never does.
	IdleTimeout Duration `toml:"idle_timeout" doc:"a run whose CLI prints nothing for this long is stopped with an error; 0s = never"`
	// ShimBinary is the remote-shim that supervises runs so they outlive
	// the daemon (an absolute path); "" is remote-shim next to remoted.
	ShimBinary string `toml:"shim_binary" doc:"remote-shim that lets runs outlive the daemon (absolute); empty: remote-shim next to remoted"`
	// Nice is added to the daemon's nice value for agent CLIs run on the
	// host (loose chats, readiness checks, their remote-shim), so a busy
	// host still answers the API at once; 0 runs them as the daemon runs.
	Nice int `toml:"nice" doc:"added to the daemon's CPU nice value for agent CLIs on the host, so the API stays responsive under load; 0 to 19, 0 = same as the daemon; read at start"`
}

// Provider configures one agent CLI, under [providers.<id>].
type Provider struct {
	// Enabled switches the provider off when false; nil means enabled.
	Enabled *bool `toml:"enabled" doc:"false switches the provider off; unset (as here) means enabled"`
	// Binary is the CLI to run: a bare name is looked up on PATH (on the
	// host, or inside the container), otherwise an absolute path.
	Binary string `toml:"binary" doc:"the CLI: a bare name is looked up on PATH (host or container), else an absolute path"`
	// Args are appended to the adapter's own arguments.
	Args []string `toml:"args" doc:"arguments appended to the adapter's own"`
	// Env is extra environment for the CLI. Values may be secrets: they
	// never appear in errors. Loose chats get all of it; project
	// containers only what ProjectEnv names.
	Env map[string]string `toml:"env" doc:"extra environment for the CLI, e.g. ANTHROPIC_API_KEY; loose chats get all, project containers only project_env; values never appear in errors"`
	// ProjectEnv names the keys of Env that also reach the CLI in
	// credentials = "shared" project containers (an operator's API key is
	// otherwise readable by every project's agent). Containers of
	// credentials = "project" projects never get any of Env.
	ProjectEnv []string `toml:"project_env" doc:"keys of env that also reach shared-credentials project containers; project-credentials ones never get env"`
	// ProviderProvisioning adds the project-container keys (config/projects.go).
	ProviderProvisioning
}

// IsEnabled reports whether the provider is enabled (a nil Enabled is true).
func (p Provider) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// Projects configures what is published into project containers.
type Projects struct {
	InstructionsDir string `toml:"instructions_dir" doc:"directory of instruction files published into every container (absolute); empty = none"`
	SkillsDir       string `toml:"skills_dir" doc:"directory of skills published into every container (absolute); empty = none"`
	// ProjectsProvisioning adds the container keys (config/projects.go).
	ProjectsProvisioning
}

// Web configures remote-web, the browser frontend.
type Web struct {
	Listen     string    `toml:"listen" doc:"host:port remote-web serves the page on"`
	TLSCert    string    `toml:"tls_cert" doc:"PEM certificate; with tls_key remote-web serves HTTPS"`
	TLSKey     string    `toml:"tls_key" doc:"PEM key of tls_cert"`
	SessionTTL Duration  `toml:"session_ttl" doc:"browser session lifetime"`
	Users      []WebUser `toml:"users" doc:"browser logins, one [[web.users]] table each"`
	// CookieSecure marks the session cookie Secure; unset means "when
	// tls_cert is set" (IsCookieSecure). Set it true behind a TLS-ending
	// reverse proxy.
	CookieSecure *bool `toml:"cookie_secure" doc:"mark the session cookie Secure; unset (as here): exactly when tls_cert is set"`
	// AllowedHosts are the DNS names browsers may use in the Host header,
	// besides localhost and IP addresses (always allowed: a rebinding DNS
	// name is never one of them).
	AllowedHosts []string `toml:"allowed_hosts" doc:"DNS names browsers may use in Host, besides localhost and IP addresses"`
	// TrustedProxies are reverse proxies (IP addresses or CIDR prefixes)
	// whose X-Forwarded-For and X-Forwarded-Proto remote-web believes.
	TrustedProxies []string `toml:"trusted_proxies" doc:"reverse proxies (IPs or CIDR prefixes) whose X-Forwarded-For and -Proto are believed"`
	// PreviewListen is the host:port of the preview origin, where the
	// apps of users' projects are served (never on the page's origin);
	// "" turns previews off in remote-web.
	PreviewListen string `toml:"preview_listen" doc:"host:port of the preview origins serving projects' apps; empty turns previews off"`
	// PreviewURL is how browsers reach the previews: a wildcard origin
	// like "https://*.preview.example.net", whose "*" becomes
	// "<port>-<project id>" (one origin per project and port). Unset
	// means http(s)://*.localhost:<preview_listen port> (PreviewOrigin).
	PreviewURL string `toml:"preview_url" doc:"wildcard origin of the previews, e.g. https://*.preview.example.net (* becomes <port>-<project id>); empty: http(s)://*.localhost:<preview_listen port>"`
	// PublicURL is the page's address as people open it; the daemon links
	// chats with it in the comments it writes on forge issues.
	PublicURL string `toml:"public_url" doc:"the page's public URL, e.g. https://remote.example.net, for the chat links the daemon comments on forge issues; empty: the chat's id"`
}

// PreviewOrigin is the wildcard origin of the previews: preview_url, or
// the scheme of the page (https with tls_cert), "*.localhost" and
// preview_listen's port; "" when previews are off.
func (w Web) PreviewOrigin() string {
	if w.PreviewListen == "" {
		return ""
	}
	if w.PreviewURL != "" {
		return strings.TrimSuffix(w.PreviewURL, "/")
	}
	scheme := "http"
	if w.TLSCert != "" {
		scheme = "https"
	}
	_, port, _ := net.SplitHostPort(w.PreviewListen)
	return scheme + "://*.localhost:" + port
}

// WebUser is one browser login. PasswordHash is never echoed in errors.
type WebUser struct {
	Name         string `toml:"name" doc:"login name: letters, digits, . _ @ + -"`
	PasswordHash string `toml:"password_hash" doc:"bcrypt hash, as remote-web -hash-password prints it"`
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

// MarshalText writes the duration in time.Duration.String form without
// trailing zero units: "12h", "1h30m", "30s", "0s".
func (d Duration) MarshalText() ([]byte, error) {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return []byte(s), nil
}

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
			// Storage bounds (docs/operating.md, "Disk space").
			MinFree:      256 << 20,
			MaxRunBytes:  64 << 20,
			MaxChatBytes: 1 << 30,
			// Queue bounds (README "Disk space").
			MaxQueuedPromptBytes: 256 << 10,
			MaxChatQueuedBytes:   1 << 20,
			MaxUserQueuedBytes:   8 << 20,
		},
		LXD: LXD{
			Image:    "remote-dev", // make image (scripts/image)
			Profiles: []string{"default"},
		},
		Agent: Agent{
			CredentialSyncTimeout: Duration{30 * time.Second},
			TranscriptBytes:       24000,
			ExitGrace:             Duration{10 * time.Second},
			Nice:                  10,
		},
		Providers: make(map[string]Provider, len(providerIDs)),
		Forges:    defaultForges(),
		Projects: Projects{ProjectsProvisioning: ProjectsProvisioning{
			Network:        ProjectsNetwork{Mode: "allowlist"},
			MaxUploadBytes: 100 << 20, // docs/api.md, Projects: files
		}},
		Web: Web{
			Listen:     "127.0.0.1:8080",
			SessionTTL: Duration{12 * time.Hour},
		},
		Schedules: Schedules{CatchUp: true, MinInterval: Duration{time.Minute}, MaxPerChat: 20, MaxPerUser: 100},
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
