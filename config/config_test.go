package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

const minimal = `[daemon]
socket = "/run/remote/remoted.sock"
state_dir = "/var/lib/remote"
`

func TestParseMinimalIsComplete(t *testing.T) {
	got, err := Parse("remoted.toml", []byte(minimal))
	if err != nil {
		t.Fatalf("Parse(minimal) = %v", err)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(minimal) =\n%+v\nwant Default() =\n%+v", got, want)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
}

func TestParseEmptyFile(t *testing.T) {
	got, err := Parse("empty.toml", nil)
	if err != nil {
		t.Fatalf("Parse(empty) = %v", err)
	}
	if !reflect.DeepEqual(got, Default()) {
		t.Errorf("Parse(empty) differs from Default()")
	}
}

func TestParseEveryKey(t *testing.T) {
	const full = `version = 1
[daemon]
socket = "/run/r.sock"
socket_group = "remote"
allow_uids = [1000, 1001]
allow_gids = [27]
frontend_uids = [991]
state_dir = "/srv/remote"
log_level = "debug"
log_format = "json"
secrets_key_file = "/etc/remote/secrets.key"
min_free = "1 GiB"
max_run_bytes = 1048576
max_chat_bytes = "0"
max_queued_prompt_bytes = "64KiB"
max_chat_queued_bytes = "512KiB"
max_user_queued_bytes = "0"

[lxd]
url = "https://lxd.example:8443"
client_cert = "/etc/remote/client.crt"
client_key = "/etc/remote/client.key"
server_cert = "/etc/remote/server.crt"
project = "remote"
target = "node2"
image = "ubuntu/24.04"
profiles = ["default", "remote"]

[agent]
credential_sync_timeout = "1m"
transcript_bytes = 4096
host_user = "dev"
allowed_roots = ["/home/dev", "/srv"]
exit_grace = "3s"
idle_timeout = "30m"
nice = 5
shim_binary = "/opt/remote/remote-shim"

[providers.claude]
enabled = false
binary = "/opt/claude/bin/claude"
args = ["--verbose"]
env = { CLAUDE_CONFIG_DIR = "/x", ANTHROPIC_API_KEY = "k" }
project_env = ["CLAUDE_CONFIG_DIR"]

[providers.codex.env]
RUST_LOG = "info"

[projects]
instructions_dir = "/etc/remote/instructions"
skills_dir = "/etc/remote/skills"
max_upload_bytes = "8MiB"

[web]
listen = "[::1]:9090"
tls_cert = "/etc/remote/web.crt"
tls_key = "/etc/remote/web.key"
session_ttl = "2h"

[[web.users]]
name = "alice"
password_hash = "$2a$10$abc"
`
	got, err := Parse("full.toml", []byte(full))
	if err != nil {
		t.Fatalf("Parse(full) = %v", err)
	}
	off := false
	want := Default()
	want.Daemon = Daemon{Socket: "/run/r.sock", SocketGroup: "remote", AllowUIDs: []int{1000, 1001}, AllowGIDs: []int{27},
		StateDir: "/srv/remote", LogLevel: "debug", LogFormat: "json", SecretsKeyFile: "/etc/remote/secrets.key",
		MinFree: 1 << 30, MaxRunBytes: 1 << 20, MaxChatBytes: 0,
		MaxQueuedPromptBytes: 64 << 10, MaxChatQueuedBytes: 512 << 10, MaxUserQueuedBytes: 0}
	want.Daemon.FrontendUIDs = []int{991}
	want.LXD = LXD{URL: "https://lxd.example:8443", ClientCert: "/etc/remote/client.crt", ClientKey: "/etc/remote/client.key",
		ServerCert: "/etc/remote/server.crt", Project: "remote", Target: "node2", Image: "ubuntu/24.04", Profiles: []string{"default", "remote"}}
	want.Agent = Agent{CredentialSyncTimeout: Duration{time.Minute}, TranscriptBytes: 4096, HostUser: "dev", AllowedRoots: []string{"/home/dev", "/srv"},
		ExitGrace: Duration{3 * time.Second}, IdleTimeout: Duration{30 * time.Minute}, ShimBinary: "/opt/remote/remote-shim", Nice: 5}
	want.Providers["claude"] = Provider{Enabled: &off, Binary: "/opt/claude/bin/claude", Args: []string{"--verbose"}, Env: map[string]string{"CLAUDE_CONFIG_DIR": "/x", "ANTHROPIC_API_KEY": "k"},
		ProjectEnv: []string{"CLAUDE_CONFIG_DIR"}}
	want.Providers["codex"] = Provider{Binary: "codex", Env: map[string]string{"RUST_LOG": "info"}}
	want.Projects = Projects{InstructionsDir: "/etc/remote/instructions", SkillsDir: "/etc/remote/skills",
		ProjectsProvisioning: ProjectsProvisioning{MaxUploadBytes: 8 << 20, Network: ProjectsNetwork{Mode: "allowlist"}}}
	want.Web = Web{Listen: "[::1]:9090", TLSCert: "/etc/remote/web.crt", TLSKey: "/etc/remote/web.key", SessionTTL: Duration{2 * time.Hour},
		Users: []WebUser{{Name: "alice", PasswordHash: "$2a$10$abc"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(full) =\n%+v\nwant\n%+v", got, want)
	}
	if got.Providers["claude"].IsEnabled() || !got.Providers["codex"].IsEnabled() {
		t.Errorf("IsEnabled: claude %v codex %v, want false true", got.Providers["claude"].IsEnabled(), got.Providers["codex"].IsEnabled())
	}
}

// TestParseRejects covers every rejection: each input is a complete file,
// want is the exact first error text, kind its class.
func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		kind error
		want string
	}{
		// syntax
		{"syntax", "[daemon\n", ErrSyntax, "remoted.toml:2: expected"},
		{"duplicate key", "[agent]\ntranscript_bytes = 1\ntranscript_bytes = 2\n", ErrSyntax, "remoted.toml:3: "},
		// unknown keys
		{"unknown top-level", "colour = 1\n", ErrUnknownKey, "remoted.toml:1: colour: unknown key"},
		{"unknown table", "[deamon]\nsocket = \"/x\"\n", ErrUnknownKey, "remoted.toml:1: deamon: unknown key"},
		{"unknown daemon key", "[daemon]\n\nsockt = \"/x\"\n", ErrUnknownKey, "remoted.toml:3: [daemon] sockt: unknown key"},
		{"case differs", "[daemon]\nSocket = \"/x\"\n", ErrUnknownKey, "remoted.toml:2: [daemon] Socket: unknown key"},
		{"unknown provider key", "[providers.claude]\nbinari = \"c\"\n", ErrUnknownKey, "remoted.toml:2: [providers.claude] binari: unknown key"},
		{"unknown web user key", "[[web.users]]\nname = \"a\"\npassword = \"x\"\n", ErrUnknownKey, "remoted.toml:1: [web.users[0]] password: unknown key"},
		{"dotted unknown", "agent.foo.bar = 1\n", ErrUnknownKey, "remoted.toml:1: [agent] foo: unknown key"},
		// types
		{"string as int", "[daemon]\nlog_level = 3\n", ErrInvalidValue, "remoted.toml:2: [daemon] log_level: must be a string, not an integer"},
		{"int as string", "[agent]\ntranscript_bytes = \"big\"\n", ErrInvalidValue, "remoted.toml:2: [agent] transcript_bytes: must be an integer, not a string"},
		{"bool as string", "[providers.kimi]\nenabled = \"no\"\n", ErrInvalidValue, "remoted.toml:2: [providers.kimi] enabled: must be true or false, not a string"},
		{"array as string", "[lxd]\nprofiles = \"default\"\n", ErrInvalidValue, "remoted.toml:2: [lxd] profiles: must be an array, not a string"},
		{"array element type", "[daemon]\nallow_uids = [1, \"x\"]\n", ErrInvalidValue, "remoted.toml:2: [daemon] allow_uids[1]: must be an integer, not a string"},
		{"table as value", "daemon = 1\n", ErrInvalidValue, "remoted.toml:1: daemon: must be a table, not an integer"},
		{"map as value", "providers = []\n", ErrInvalidValue, "remoted.toml:1: providers: must be a table, not an array"},
		{"env value type", "[providers.codex.env]\nTOKEN = 5\n", ErrInvalidValue, "remoted.toml:2: [providers.codex.env] TOKEN: must be a string, not an integer"},
		{"float", "[agent]\ntranscript_bytes = 1.5\n", ErrInvalidValue, "remoted.toml:2: [agent] transcript_bytes: must be an integer, not a float"},
		{"date", "[daemon]\nsocket = 1979-05-27\n", ErrInvalidValue, "remoted.toml:2: [daemon] socket: must be a string, not a date-time"},
		// durations
		{"bad duration", "[agent]\n\n\n\n\n\ncredential_sync_timeout = \"soon\"\n", ErrInvalidValue, `remoted.toml:7: [agent] credential_sync_timeout: invalid duration "soon"`},
		{"duration as int", "[agent]\ncredential_sync_timeout = 30\n", ErrInvalidValue, `remoted.toml:2: [agent] credential_sync_timeout: must be a duration string such as "30s", not an integer`},
		{"zero duration", "[agent]\ncredential_sync_timeout = \"0s\"\n", ErrInvalidValue, "remoted.toml:2: [agent] credential_sync_timeout: must be positive, not 0s"},
		{"negative ttl", "[web]\nsession_ttl = \"-1h\"\n", ErrInvalidValue, "remoted.toml:2: [web] session_ttl: must be positive, not -1h0m0s"},
		// version
		{"version", "version = 2\n", ErrInvalidValue, "remoted.toml:1: version: unsupported version 2 (this build reads 1)"},
		// daemon
		{"empty socket", "[daemon]\nsocket = \"\"\n", ErrInvalidValue, "remoted.toml:2: [daemon] socket: must not be empty"},
		{"relative socket", "[daemon]\nsocket = \"run/r.sock\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] socket: "run/r.sock" must be an absolute path`},
		{"bad group", "[daemon]\nsocket_group = \"re mote\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] socket_group: invalid group name "re mote"`},
		{"negative uid", "[daemon]\nallow_uids = [0, -1]\n", ErrInvalidValue, "remoted.toml:2: [daemon] allow_uids[1]: uid -1 out of range"},
		{"negative frontend uid", "[daemon]\nfrontend_uids = [-5]\n", ErrInvalidValue, "remoted.toml:2: [daemon] frontend_uids[0]: uid -5 out of range"},
		{"frontend uid as string", "[daemon]\nfrontend_uids = [\"www-data\"]\n", ErrInvalidValue, "remoted.toml:2: [daemon] frontend_uids[0]: must be an integer, not a string"},
		{"huge gid", "[daemon]\nallow_gids = [4294967295]\n", ErrInvalidValue, "remoted.toml:2: [daemon] allow_gids[0]: gid 4294967295 out of range"},
		{"bad size", "[daemon]\nmin_free = \"lots\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] min_free: invalid size "lots": want a byte count such as "256MiB", "1GiB" or "4096"`},
		{"size unit", "[daemon]\nmax_run_bytes = \"64 MiBs\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] max_run_bytes: invalid size "64 MiBs": want a byte count such as "256MiB", "1GiB" or "4096"`},
		{"negative size", "[daemon]\nmax_chat_bytes = -1\n", ErrInvalidValue, "remoted.toml:2: [daemon] max_chat_bytes: invalid size -1: must not be negative"},
		{"size as bool", "[daemon]\nmin_free = true\n", ErrInvalidValue, `remoted.toml:2: [daemon] min_free: must be a size string such as "256MiB" or an integer of bytes, not a boolean`},
		{"huge size", "[daemon]\nmin_free = \"9000000TiB\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] min_free: invalid size "9000000TiB": too large`},
		{"relative state", "[daemon]\nstate_dir = \"state\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] state_dir: "state" must be an absolute path`},
		{"empty state", "[daemon]\nstate_dir = \"\"\n", ErrInvalidValue, "remoted.toml:2: [daemon] state_dir: must not be empty"},
		{"log level", "[daemon]\nlog_level = \"loud\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] log_level: "loud" is not one of trace, debug, info, warn, error`},
		{"log format", "[daemon]\nlog_format = \"xml\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] log_format: "xml" is not one of text, json`},
		{"relative key file", "[daemon]\nsecrets_key_file = \"k\"\n", ErrInvalidValue, `remoted.toml:2: [daemon] secrets_key_file: "k" must be an absolute path`},
		// lxd
		{"relative lxd socket", "[lxd]\nsocket = \"unix.socket\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] socket: "unix.socket" must be an absolute path`},
		{"socket and url", "[lxd]\nsocket = \"/s\"\nurl = \"https://h\"\nclient_cert = \"/c\"\nclient_key = \"/k\"\n", ErrInvalidValue, "remoted.toml:3: [lxd] url: set either socket or url, not both"},
		{"http url", "[lxd]\nurl = \"http://h:8443\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] url: url "http://h:8443" must use https`},
		{"bad url", "[lxd]\nurl = \"https://h:x:y\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] url: invalid url "https://h:x:y"`},
		{"url with path", "[lxd]\nurl = \"https://h/1.0\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] url: url "https://h/1.0" must be https://host[:port] only`},
		{"url without host", "[lxd]\nurl = \"https://\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] url: url "https://" must be https://host[:port] only`},
		{"url without key", "[lxd]\nurl = \"https://h:8443\"\nclient_cert = \"/c\"\n", ErrInvalidValue, "remoted.toml:2: [lxd] url: an https url needs both client_cert and client_key"},
		{"url without cert", "[lxd]\nurl = \"https://h:8443\"\nclient_key = \"/k\"\n", ErrInvalidValue, "remoted.toml:2: [lxd] url: an https url needs both client_cert and client_key"},
		{"url and urls", "[lxd]\nurl = \"https://h:8443\"\nurls = [\"https://g:8443\"]\nclient_cert = \"/c\"\nclient_key = \"/k\"\n", ErrInvalidValue, "remoted.toml:3: [lxd] urls: set either url or urls, not both"},
		{"empty urls", "[lxd]\nurls = []\n", ErrInvalidValue, "remoted.toml:2: [lxd] urls: is empty: list at least one https://host[:port]"},
		{"http member", "[lxd]\nurls = [\"https://a:8443\", \"http://b:8443\"]\nclient_cert = \"/c\"\nclient_key = \"/k\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] urls[1]: url "http://b:8443" must use https`},
		{"duplicate member", "[lxd]\nurls = [\"https://a:8443\", \"https://a:8443\"]\nclient_cert = \"/c\"\nclient_key = \"/k\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] urls[1]: duplicate url "https://a:8443"`},
		{"socket and urls", "[lxd]\nsocket = \"/s\"\nurls = [\"https://h\"]\nclient_cert = \"/c\"\nclient_key = \"/k\"\n", ErrInvalidValue, "remoted.toml:3: [lxd] urls[0]: set either socket or urls, not both"},
		{"urls without key", "[lxd]\nurls = [\"https://h:8443\"]\nclient_cert = \"/c\"\n", ErrInvalidValue, "remoted.toml:2: [lxd] urls[0]: an https url needs both client_cert and client_key"},
		{"cert without url", "[lxd]\nclient_cert = \"/c\"\n", ErrInvalidValue, "remoted.toml:2: [lxd] client_cert: only applies with url"},
		{"server cert without url", "[lxd]\nserver_cert = \"/s\"\n", ErrInvalidValue, "remoted.toml:2: [lxd] server_cert: only applies with url"},
		{"relative cert", "[lxd]\nurl = \"https://h\"\nclient_cert = \"c.pem\"\nclient_key = \"/k\"\n", ErrInvalidValue, `remoted.toml:3: [lxd] client_cert: "c.pem" must be an absolute path`},
		{"bad project", "[lxd]\nproject = \"a/b\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] project: invalid name "a/b"`},
		{"bad target", "[lxd]\ntarget = \"node 1\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] target: invalid name "node 1"`},
		{"empty image", "[lxd]\nimage = \"\"\n", ErrInvalidValue, `remoted.toml:2: [lxd] image: "" is not an image alias or fingerprint`},
		{"empty profile", "[lxd]\nprofiles = [\"\"]\n", ErrInvalidValue, "remoted.toml:2: [lxd] profiles[0]: must not be empty"},
		{"duplicate profile", "[lxd]\nprofiles = [\"a\", \"a\"]\n", ErrInvalidValue, `remoted.toml:2: [lxd] profiles[1]: duplicate profile "a"`},
		// agent
		{"transcript zero", "[agent]\ntranscript_bytes = 0\n", ErrInvalidValue, "remoted.toml:2: [agent] transcript_bytes: must be positive, not 0"},
		{"host user", "[agent]\nhost_user = \"a:b\"\n", ErrInvalidValue, `remoted.toml:2: [agent] host_user: invalid name "a:b"`},
		{"relative root", "[agent]\nallowed_roots = [\"/ok\", \"home\"]\n", ErrInvalidValue, `remoted.toml:2: [agent] allowed_roots[1]: "home" must be an absolute path`},
		{"relative shim binary", "[agent]\nshim_binary = \"remote-shim\"\n", ErrInvalidValue, `remoted.toml:2: [agent] shim_binary: "remote-shim" must be an absolute path`},
		{"zero exit grace", "[agent]\nexit_grace = \"0s\"\n", ErrInvalidValue, "remoted.toml:2: [agent] exit_grace: must be positive, not 0s"},
		{"negative idle timeout", "[agent]\nidle_timeout = \"-1m\"\n", ErrInvalidValue, "remoted.toml:2: [agent] idle_timeout: must be 0 (off) or positive, not -1m0s"},
		{"nice below 0", "[agent]\nnice = -5\n", ErrInvalidValue, "remoted.toml:2: [agent] nice: must be 0 to 19 (added to the daemon's nice value), not -5"},
		{"nice above 19", "[agent]\nnice = 20\n", ErrInvalidValue, "remoted.toml:2: [agent] nice: must be 0 to 19 (added to the daemon's nice value), not 20"},
		{"idle timeout word", "[agent]\nidle_timeout = \"off\"\n", ErrInvalidValue, `remoted.toml:2: [agent] idle_timeout: invalid duration "off"`},
		// providers
		{"unknown provider", "[providers.gemini]\nbinary = \"g\"\n", ErrInvalidValue, `remoted.toml:1: [providers] gemini: unknown provider "gemini" (known: claude, codex, minimax, kimi, antigravity)`},
		{"relative binary", "[providers.claude]\nbinary = \"bin/claude\"\n", ErrInvalidValue, `remoted.toml:2: [providers.claude] binary: "bin/claude" must be a bare name looked up on PATH or an absolute path`},
		{"nul binary", "[providers.claude]\nbinary = \"cl\\u0000aude\"\n", ErrInvalidValue, "remoted.toml:2: [providers.claude] binary: contains a NUL byte"},
		{"nul arg", "[providers.codex]\nargs = [\"ok\", \"a\\u0000\"]\n", ErrInvalidValue, "remoted.toml:2: [providers.codex] args[1]: contains a NUL byte"},
		{"env name", "[providers.kimi.env]\n\"BAD-NAME\" = \"secret-value\"\n", ErrInvalidValue, `remoted.toml:2: [providers.kimi.env] BAD-NAME: invalid environment variable name`},
		{"env nul value", "[providers.kimi.env]\nTOKEN = \"sec\\u0000ret\"\n", ErrInvalidValue, "remoted.toml:2: [providers.kimi.env] TOKEN: value contains a NUL byte"},
		{"project env not in env", "[providers.claude]\nenv = { A = \"1\" }\nproject_env = [\"A\", \"ANTHROPIC_API_KEY\"]\n", ErrInvalidValue, `remoted.toml:3: [providers.claude] project_env[1]: "ANTHROPIC_API_KEY" is not a key of [providers.claude] env`},
		{"project env name", "[providers.claude]\nenv = { A = \"1\" }\nproject_env = [\"A-B\"]\n", ErrInvalidValue, `remoted.toml:3: [providers.claude] project_env[0]: "A-B" is not an environment variable name`},
		{"project env twice", "[providers.claude]\nenv = { A = \"1\" }\nproject_env = [\"A\", \"A\"]\n", ErrInvalidValue, `remoted.toml:3: [providers.claude] project_env[1]: "A" is listed twice`},
		// projects
		{"instructions dir", "[projects]\ninstructions_dir = \"i\"\n", ErrInvalidValue, `remoted.toml:2: [projects] instructions_dir: "i" must be an absolute path`},
		{"skills dir", "[projects]\nskills_dir = \"s\"\n", ErrInvalidValue, `remoted.toml:2: [projects] skills_dir: "s" must be an absolute path`},
		// web
		{"listen no port", "[web]\nlisten = \"localhost\"\n", ErrInvalidValue, `remoted.toml:2: [web] listen: "localhost" is not host:port`},
		{"listen bad port", "[web]\nlisten = \"localhost:http\"\n", ErrInvalidValue, `remoted.toml:2: [web] listen: "localhost:http": port must be 1-65535`},
		{"listen port 0", "[web]\nlisten = \":0\"\n", ErrInvalidValue, `remoted.toml:2: [web] listen: ":0": port must be 1-65535`},
		{"listen big port", "[web]\nlisten = \"127.0.0.1:70000\"\n", ErrInvalidValue, `remoted.toml:2: [web] listen: "127.0.0.1:70000": port must be 1-65535`},
		{"listen bad host", "[web]\nlisten = \"a b:80\"\n", ErrInvalidValue, `remoted.toml:2: [web] listen: "a b:80": invalid host`},
		{"tls cert only", "[web]\ntls_cert = \"/c\"\n", ErrInvalidValue, "remoted.toml:2: [web] tls_cert: set both tls_cert and tls_key, or neither"},
		{"tls key only", "[web]\ntls_key = \"/k\"\n", ErrInvalidValue, "remoted.toml:1: [web] tls_cert: set both tls_cert and tls_key, or neither"},
		{"relative tls", "[web]\ntls_cert = \"c\"\ntls_key = \"/k\"\n", ErrInvalidValue, `remoted.toml:2: [web] tls_cert: "c" must be an absolute path`},
		{"user no name", "[[web.users]]\npassword_hash = \"h\"\n", ErrInvalidValue, "remoted.toml:1: [web.users[0]] name: must not be empty"},
		{"user bad name", "[[web.users]]\nname = \"a:b\"\npassword_hash = \"h\"\n", ErrInvalidValue, `remoted.toml:1: [web.users[0]] name: "a:b": no colons, control characters or surrounding spaces`},
		{"user spaces", "[[web.users]]\nname = \" a\"\npassword_hash = \"h\"\n", ErrInvalidValue, `remoted.toml:1: [web.users[0]] name: " a": no colons, control characters or surrounding spaces`},
		{"user duplicate", "[[web.users]]\nname = \"a\"\npassword_hash = \"h\"\n\n[[web.users]]\nname = \"a\"\npassword_hash = \"h\"\n", ErrInvalidValue, `remoted.toml:5: [web.users[1]] name: duplicate user "a"`},
		{"user empty hash", "[[web.users]]\nname = \"a\"\npassword_hash = \"\"\n", ErrInvalidValue, "remoted.toml:1: [web.users[0]] password_hash: must not be empty"},
		{"inline users", "[web]\nusers = [{name = \"a\", password_hash = \"\"}]\n", ErrInvalidValue, "remoted.toml:2: [web.users[0]] password_hash: must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("remoted.toml", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want %q", tt.in, tt.want)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("Parse(%q) = %v, want class %v", tt.in, err, tt.kind)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse(%q) = %T, want *Error", tt.in, err)
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if errors.Is(tt.kind, ErrSyntax) {
				if !strings.HasPrefix(first, tt.want) {
					t.Errorf("Parse(%q) = %q, want prefix %q", tt.in, first, tt.want)
				}
				return
			}
			if first != tt.want {
				t.Errorf("Parse(%q)\n got %q\nwant %q", tt.in, first, tt.want)
			}
		})
	}
}

func TestErrorsAreJoinedInFileOrder(t *testing.T) {
	in := "[web]\nlisten = \"x\"\n[daemon]\nlog_level = \"loud\"\n[agent]\ntranscript_bytes = 0\n"
	_, err := Parse("f.toml", []byte(in))
	want := "f.toml:2: [web] listen: \"x\" is not host:port\n" +
		"f.toml:4: [daemon] log_level: \"loud\" is not one of trace, debug, info, warn, error\n" +
		"f.toml:6: [agent] transcript_bytes: must be positive, not 0"
	if err == nil || err.Error() != want {
		t.Errorf("Parse = %v\nwant %s", err, want)
	}
}

func TestErrorsNeverShowSecrets(t *testing.T) {
	const secret = "s3cr3t-Value"
	for _, in := range []string{
		"[providers.claude.env]\n\"BAD KEY\" = \"" + secret + "\"\n",
		"[providers.claude.env]\nKEY = \"" + secret + "\\u0000\"\n",
		"[[web.users]]\nname = \"\"\npassword_hash = \"" + secret + "\"\n",
		"[[web.users]]\nname = \"a\"\npassword_hash = \"" + secret + "\"\nsalt = \"" + secret + "\"\n",
		"[providers.claude]\nenv = \"" + secret + "\"\n",
	} {
		_, err := Parse("f.toml", []byte(in))
		if err == nil {
			t.Fatalf("Parse(%q) = nil, want an error", in)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Parse error shows the secret: %v", err)
		}
	}
}

func TestValidateWithoutFile(t *testing.T) {
	c := Default()
	c.Daemon.LogFormat = "yaml"
	err := c.Validate()
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "daemon.log_format" || ce.File != "" || ce.Line != 0 {
		t.Fatalf("Validate() = %#v, want an *Error for daemon.log_format without file or line", err)
	}
	if want := `[daemon] log_format: "yaml" is not one of text, json`; err.Error() != want {
		t.Errorf("Validate() = %q, want %q", err.Error(), want)
	}
}

func TestDefaultsFillNamedProviders(t *testing.T) {
	c, err := Parse("f.toml", []byte("[providers.minimax]\nargs = [\"-c\", \"model=x\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Providers["minimax"].Binary; got != "codex" {
		t.Errorf("minimax binary = %q, want the default %q", got, "codex")
	}
	if len(c.Providers) != len(ProviderIDs()) {
		t.Errorf("providers = %d entries, want %d", len(c.Providers), len(ProviderIDs()))
	}
}

// The queue's byte bounds an operator gets without setting them: 256 KiB
// a prompt, 1 MiB a chat's queue, 8 MiB all of one user's queues.
func TestDefaultQueueBounds(t *testing.T) {
	for _, c := range []Config{Default(), mustParse(t, "version = 1\n")} {
		d := c.Daemon
		if d.MaxQueuedPromptBytes != 262144 || d.MaxChatQueuedBytes != 1048576 || d.MaxUserQueuedBytes != 8388608 {
			t.Errorf("queue bounds %d %d %d, want 262144 1048576 8388608", d.MaxQueuedPromptBytes, d.MaxChatQueuedBytes, d.MaxUserQueuedBytes)
		}
	}
}

func TestDefaultIsFresh(t *testing.T) {
	a := Default()
	a.LXD.Profiles[0] = "changed"
	a.Providers["claude"] = Provider{Binary: "x"}
	b := Default()
	if b.LXD.Profiles[0] != "default" || b.Providers["claude"].Binary != "claude" {
		t.Errorf("Default() shares state between calls: %+v", b)
	}
}

func TestSecretsKeyPath(t *testing.T) {
	tests := []struct {
		name     string
		d        Daemon
		credsDir string
		want     string
	}{
		{"state dir", Daemon{StateDir: "/var/lib/remote"}, "", "/var/lib/remote/secrets.key"},
		{"credentials", Daemon{StateDir: "/var/lib/remote"}, "/run/credentials/remoted.service", "/run/credentials/remoted.service/secrets-key"},
		{"explicit", Daemon{StateDir: "/v", SecretsKeyFile: "/etc/k"}, "/run/c", "/etc/k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.SecretsKeyPath(tt.credsDir); got != tt.want {
				t.Errorf("SecretsKeyPath(%q) = %q, want %q", tt.credsDir, got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "remoted.toml")
	if err := os.WriteFile(good, []byte(minimal+"[agent]\ntranscript_bytes = 10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil || c.Agent.TranscriptBytes != 10 {
		t.Fatalf("Load = %+v, %v", c.Agent, err)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[agent]\nfoo = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || err.Error() != bad+":2: [agent] foo: unknown key" {
		t.Errorf("Load(bad) = %v", err)
	}

	if _, err := Load(filepath.Join(dir, "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want os.ErrNotExist", err)
	}

	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", maxFileBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("Load(big) = %v, want ErrInvalidValue", err)
	}
}

func TestExampleConfigParses(t *testing.T) {
	c, err := Load("remoted.example.toml")
	if err != nil {
		t.Fatalf("the shipped example does not load: %v", err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("the example's active settings differ from Default():\n%+v", c)
	}
}

// TestExampleDocumentsRealKeys uncomments every commented-out setting of
// the example: each must be a key of the schema with a value of its type
// (the settings as a whole may conflict, e.g. lxd socket and url).
func TestExampleDocumentsRealKeys(t *testing.T) {
	data, err := os.ReadFile("remoted.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	setting := regexp.MustCompile(`^#(\[|[a-z_]+ = )`)
	lines := strings.Split(string(data), "\n")
	n := 0
	for i, l := range lines {
		if setting.MatchString(l) {
			lines[i] = l[1:]
			n++
		}
	}
	if n < 40 {
		t.Fatalf("found %d commented settings; the pattern no longer matches the example", n)
	}
	_, err = Parse("uncommented.toml", []byte(strings.Join(lines, "\n")))
	if errors.Is(err, ErrSyntax) || errors.Is(err, ErrUnknownKey) {
		t.Errorf("the example documents settings that do not parse:\n%v", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "lxd.url" {
		t.Errorf("uncommented example: %v; want only the socket/url conflict", err)
	}
}

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1m30s")); err != nil || d.Duration != 90*time.Second {
		t.Fatalf("UnmarshalText = %v, %v", d, err)
	}
	b, _ := d.MarshalText()
	if string(b) != "1m30s" {
		t.Errorf("MarshalText = %q", b)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil {
		t.Error("UnmarshalText(soon) = nil error")
	}
}

func TestSizeText(t *testing.T) {
	for in, want := range map[string]Size{
		"0": 0, "4096": 4096, "256MiB": 256 << 20, "256 mib": 256 << 20, "1GiB": 1 << 30, "1G": 1 << 30,
		"64k": 64 << 10, "500MB": 500e6, "1.5GiB": 3 << 29, "2 TB": 2e12, " 10B ": 10,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1..2GiB", "1 GiBs", "1e3", "0x10"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for z, want := range map[Size]string{0: "0", 256 << 20: "256MiB", 1 << 30: "1GiB", 1536: "1536", 3 << 10: "3KiB"} {
		if b, _ := z.MarshalText(); string(b) != want {
			t.Errorf("MarshalText(%d) = %q, want %q", int64(z), b, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte("[agent]\ncredential_sync_timeout = \"soon\"\n"))
	f.Add([]byte("[[web.users]]\nname = \"a\"\npassword_hash = \"h\"\n[[web.users]]\nname = \"a\"\n"))
	f.Add([]byte("[providers.claude]\nenv = { A = \"b\" }\nargs = [\"x\"]\nenabled = false\n"))
	f.Add([]byte("a.b.c = 1\n[x.\"y,z\"]\n\"-\" = 2\n"))
	f.Add([]byte("[lxd]\nurl = \"https://h:8443\"\nclient_cert = \"/c\"\nclient_key = \"/k\"\n"))
	if data, err := os.ReadFile("remoted.example.toml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.toml", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error %T is not *Error: %v", err, err)
			}
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("Parse error has no class: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate rejects: %v", err)
		}
	})
}

func TestParseLXDURLs(t *testing.T) {
	c, err := Parse("remoted.toml", []byte("[lxd]\nurls = [\"https://10.0.0.11:8443\", \"https://10.0.0.12\"]\n"+
		"client_cert = \"/c\"\nclient_key = \"/k\"\nserver_cert = \"/cluster.crt\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.LXD.URLs, " "); got != "https://10.0.0.11:8443 https://10.0.0.12" || c.LXD.URL != "" {
		t.Fatalf("urls %q, url %q", got, c.LXD.URL)
	}
}

func TestMaxUploadBytes(t *testing.T) {
	if got := Default().Projects.MaxUploadBytes; got != 104857600 {
		t.Errorf("default max_upload_bytes %d, want 104857600 (100 MiB)", got)
	}
	_, err := Parse("remoted.toml", []byte("[projects]\nmax_upload_bytes = -1\n"))
	if err == nil || !strings.Contains(err.Error(), "remoted.toml:2: [projects] max_upload_bytes: invalid size -1: must not be negative") {
		t.Errorf("negative max_upload_bytes: %v", err)
	}
}
