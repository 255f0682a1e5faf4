package config

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ProviderProvisioning is how a provider's CLI, credentials and files get
// into project containers. It is embedded in Provider, so its keys sit
// directly under [providers.<id>]. Every empty value means the built-in
// default of that provider (provisioning.DefaultSetups).
type ProviderProvisioning struct {
	// Check is run in the container; exit 0 means the CLI is installed.
	Check []string `toml:"check" doc:"command run in the container; exit 0 means the CLI is installed; empty: built-in"`
	// Install is a command run in the container when Check fails (the
	// default method, e.g. an npm global install).
	Install []string `toml:"install" doc:"command run in the container when check fails (e.g. npm install -g); empty: built-in"`
	// InstallFiles, when set, replace Install: files pushed from the host
	// (the binary and its shared libraries) for containers without network.
	InstallFiles []ContainerFile `toml:"install_files" doc:"files pushed from the host instead of running install, for containers without network"`
	// Credentials are host credential files pushed 0600 with the container
	// user's ownership and, with sync, copied back after a run when newer.
	Credentials []CredentialFile `toml:"credentials" doc:"host credential files pushed 0600 before a run; empty: the provider's built-in login files"`
	// InstructionsPath is the user-level instruction file in the container.
	InstructionsPath string `toml:"instructions_path" doc:"user-level instruction file in the container (absolute); empty: built-in"`
	// SkillLinkDir is where the provider looks for skills in the container.
	SkillLinkDir string `toml:"skill_link_dir" doc:"where the CLI looks for skills in the container (absolute); empty: built-in"`
	// Assets are non-secret runtime files (settings, model catalog, MCP).
	Assets []ContainerFile `toml:"assets" doc:"non-secret runtime files pushed before a run (settings, model catalog, MCP)"`
	// BrowserAssets are published only for runs that ask for the browser.
	BrowserAssets []ContainerFile `toml:"browser_assets" doc:"files pushed only for runs that ask for the browser"`
}

// ContainerFile is a host file copied to a container path.
type ContainerFile struct {
	Host      string   `toml:"host" doc:"absolute host path"`
	Container string   `toml:"container" doc:"absolute container path"`
	Mode      FileMode `toml:"mode" doc:"octal string such as 0755; 0000 means 0644"`
}

// CredentialFile is one credential file of a provider.
type CredentialFile struct {
	Host      string `toml:"host" doc:"absolute host path"`
	Container string `toml:"container" doc:"absolute container path"`
	Sync      bool   `toml:"sync" doc:"copy it back to the host after a successful run when newer"`
	// RejectAPIKey refuses a record marked as API-key authentication
	// (Codex, S13).
	RejectAPIKey bool `toml:"reject_api_key" doc:"refuse a copied-back record marked as API-key authentication (Codex, S13)"`
}

// FileMode is a file mode written in TOML as an octal string ("0644").
type FileMode os.FileMode

// UnmarshalText parses an octal mode of at most 0777.
func (m *FileMode) UnmarshalText(text []byte) error {
	s := strings.TrimPrefix(string(text), "0o")
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return fmt.Errorf("invalid file mode %q: want an octal string such as \"0644\"", text)
	}
	*m = FileMode(v)
	return nil
}

// MarshalText writes the mode as a 4-digit octal string.
func (m FileMode) MarshalText() ([]byte, error) { return []byte(fmt.Sprintf("%04o", uint32(m))), nil }

// ProjectsProvisioning holds the [projects] keys of project containers,
// embedded in Projects.
type ProjectsProvisioning struct {
	// ScheduleDir holds the scheduled-tasks skill and its helper; "" uses
	// the built-in SKILL.md.
	ScheduleDir string `toml:"schedule_dir" doc:"the scheduled-tasks skill and its helper (absolute); empty: the built-in SKILL.md"`
	// ContainerHome is the container user's home (default /root).
	ContainerHome string `toml:"container_home" doc:"the container user's home; empty: /root"`
	// ContainerUID and ContainerGID own published files (default 0).
	ContainerUID int `toml:"container_uid" doc:"uid that owns files published into containers"`
	ContainerGID int `toml:"container_gid" doc:"gid that owns files published into containers"`
	// MaxUploadBytes bounds one upload through PUT
	// /v1/projects/{name}/files/raw (default 100 MiB; 0: no bound).
	MaxUploadBytes Size `toml:"max_upload_bytes" doc:"bytes of one file uploaded into a project's /workspace; over it: 413; 0 = no bound"`
	// StartParallel bounds concurrent container starts at daemon start-up
	// (default 4).
	StartParallel int `toml:"start_parallel" doc:"containers started at once at daemon start-up; 0: 4 (at most 64)"`
	// CheckpointKeep is how many turn checkpoints each project keeps
	// (default 20; at most 1000).
	CheckpointKeep int `toml:"checkpoint_keep" doc:"turn checkpoints each project keeps; 0: 20 (at most 1000)"`
	// CheckpointExpiry, when set, is how long LXD keeps a turn checkpoint
	// before deleting it itself (the snapshot's expires_at); "" or "0s":
	// checkpoints never expire (retention by checkpoint_keep only).
	CheckpointExpiry Duration `toml:"checkpoint_expiry" doc:"LXD deletes a turn checkpoint this long after it was taken; 0s = never (at least 1m)"`
	// MaxDiffBytes bounds the patch of GET /v1/chats/{id}/diff (default
	// 1 MiB; at most 64 MiB); the file list is always complete.
	MaxDiffBytes int `toml:"max_diff_bytes" doc:"bytes of a chat diff's patch, cut beyond (truncated: true); 0: 1048576 (at most 67108864)"`
	// GitAuthorName and GitAuthorEmail sign the commits of a chat push;
	// "" takes the acting user's name (and <name>@localhost).
	GitAuthorName  string `toml:"git_author_name" doc:"author of the commits a chat push makes; empty: the acting user"`
	GitAuthorEmail string `toml:"git_author_email" doc:"author email of the commits a chat push makes; empty: <user>@localhost"`
	// Pool is the LXD storage pool of new projects' root disks when the
	// request names none ("": the profile's root disk). The daemon checks
	// that LXD has it when a project is created.
	Pool string `toml:"pool" doc:"LXD storage pool of new projects' root disks when the request names none; empty: the profile's"`
	// Limits are the resource limits of project containers: the defaults
	// of a new project and the caps of every project (a capped limit may
	// be lowered through the API, never raised above its cap nor removed).
	Limits ProjectLimits `toml:"limits" doc:"resource limits of project containers: defaults of new projects and caps of every project; empty or 0 = no limit"`
	// Network is what project containers may reach: the mode of new
	// projects, the hosts every allowlist project reaches through the
	// daemon's egress proxy, and what a project's own allow may name.
	Network ProjectsNetwork `toml:"network" doc:"what project containers may reach through the daemon's egress proxy (docs/operating.md)"`
	// AllowedPools, AllowedImages and AllowedTargets are the storage
	// pools, images and cluster targets a new project may name; empty
	// means the configured default only ([projects] pool, [lxd] image,
	// [lxd] target; see Config.ProjectAllowlists).
	// Idmap is how new project containers' uids map onto the host's:
	// "auto" (the default, also ""): a host uid range of its own per
	// container (LXD security.idmap.isolated) where LXD has one free,
	// else the shared range with a warning; "isolated": its own or no
	// container; "shared": LXD's default, one range for all.
	Idmap string `toml:"idmap" doc:"uid ranges of new project containers: auto (own range where LXD has one, else shared with a warning), isolated, or shared"`
	// Warm is how many containers are kept created and started ahead of
	// need (default image, pool and profiles), each claimed by one new
	// project: its first prompt skips the container's create and start.
	Warm           int      `toml:"warm" doc:"containers kept created and started ahead of need for new projects on the default image and pool (0 to 16; 0: none)"`
	AllowedPools   []string `toml:"allowed_pools" doc:"storage pools a new project may name; empty: [projects] pool only"`
	AllowedImages  []string `toml:"allowed_images" doc:"images a new project may name; empty: [lxd] image only"`
	AllowedTargets []string `toml:"allowed_targets" doc:"cluster members a new project may name; empty: [lxd] target only"`
}

// ProjectAllowlists returns the pools, images and targets a new project
// may name: each [projects] allowed_* key as set, else the configured
// default alone ([projects] pool, [lxd] image, [lxd] target; none when
// that is empty too).
func (c Config) ProjectAllowlists() (pools, images, targets []string) {
	orDefault := func(list []string, def string) []string {
		if len(list) > 0 || def == "" {
			return slices.Clone(list)
		}
		return []string{def}
	}
	return orDefault(c.Projects.AllowedPools, c.Projects.Pool), orDefault(c.Projects.AllowedImages, c.LXD.Image),
		orDefault(c.Projects.AllowedTargets, c.LXD.Target)
}

// ProjectsNetwork is [projects.network].
type ProjectsNetwork struct {
	// Mode is the network of a new project naming none: "off" (no NIC;
	// the proxy reaches the model providers only), "allowlist" (no NIC;
	// the proxy reaches Allow, the project's own allow and the model
	// providers) or "open" (the profiles' NICs, as before network modes).
	Mode string `toml:"mode" doc:"network of a new project naming none: off, allowlist (no NIC; only the egress proxy) or open (the profiles' NICs)"`
	// Allow are the hosts every allowlist project may reach
	// ("pypi.org", "*.pythonhosted.org", "host:port"; without a port 80
	// and 443). Unlike a project's own, they may be IP addresses or
	// resolve to private ones.
	Allow []string `toml:"allow" doc:"hosts every allowlist project may reach, e.g. registry.npmjs.org, *.pythonhosted.org, host:8080 (no port: 80 and 443); may be IPs or private"`
	// ProjectMayAllow bounds what a project's own allow may name; empty:
	// any host name and port ("*:*"), never an IP address, and never
	// reaching a private, loopback or link-local address.
	ProjectMayAllow []string `toml:"project_may_allow" doc:"patterns a project's own allow must fall under; empty: any host name (never an IP; never reaching a private address)"`
}

// ProjectLimits are LXD resource limits of a project container: CPU
// (limits.cpu, e.g. "2"), Memory (limits.memory, e.g. "2GiB"), Processes
// (limits.processes) and Disk (the root disk's size, e.g. "10GiB"). Empty
// or zero means no limit.
type ProjectLimits struct {
	CPU       string `toml:"cpu" doc:"LXD limits.cpu, e.g. 2"`
	Memory    string `toml:"memory" doc:"LXD limits.memory, e.g. 2GiB (a hard limit: swap off)"`
	Processes int    `toml:"processes" doc:"LXD limits.processes"`
	Disk      string `toml:"disk" doc:"size of the root disk, e.g. 10GiB"`
}

func (p ProviderProvisioning) validate(ps *problems, base []pathElem) {
	for key, args := range map[string][]string{"check": p.Check, "install": p.Install} {
		for i, a := range args {
			if strings.ContainsRune(a, 0) {
				ps.add(ErrInvalidValue, appendIndex(appendKey(base, key), i), "contains a NUL byte")
			}
		}
	}
	files := func(key string, fs []ContainerFile) {
		for i, f := range fs {
			b := appendIndex(appendKey(base, key), i)
			requireAbs(ps, appendKey(b, "host"), f.Host, true)
			requireAbs(ps, appendKey(b, "container"), f.Container, true)
		}
	}
	files("install_files", p.InstallFiles)
	files("assets", p.Assets)
	files("browser_assets", p.BrowserAssets)
	for i, c := range p.Credentials {
		b := appendIndex(appendKey(base, "credentials"), i)
		requireAbs(ps, appendKey(b, "host"), c.Host, true)
		requireAbs(ps, appendKey(b, "container"), c.Container, true)
	}
	requireAbs(ps, appendKey(base, "instructions_path"), p.InstructionsPath, false)
	requireAbs(ps, appendKey(base, "skill_link_dir"), p.SkillLinkDir, false)
}

func (p ProjectsProvisioning) validate(ps *problems) {
	requireAbs(ps, keyPath("projects", "schedule_dir"), p.ScheduleDir, false)
	requireAbs(ps, keyPath("projects", "container_home"), p.ContainerHome, false)
	if p.ContainerUID < 0 {
		ps.add(ErrInvalidValue, keyPath("projects", "container_uid"), "must not be negative")
	}
	if p.ContainerGID < 0 {
		ps.add(ErrInvalidValue, keyPath("projects", "container_gid"), "must not be negative")
	}
	if p.StartParallel < 0 || p.StartParallel > 64 {
		ps.add(ErrInvalidValue, keyPath("projects", "start_parallel"), "must be 0 (default) to 64")
	}
	if p.CheckpointKeep < 0 || p.CheckpointKeep > 1000 {
		ps.add(ErrInvalidValue, keyPath("projects", "checkpoint_keep"), "must be 0 (default 20) to 1000")
	}
	if e := p.CheckpointExpiry.Duration; e < 0 || (e > 0 && e < time.Minute) {
		ps.add(ErrInvalidValue, keyPath("projects", "checkpoint_expiry"), "must be 0 (never) or at least 1m")
	}
	if p.MaxDiffBytes < 0 || p.MaxDiffBytes > 64<<20 {
		ps.add(ErrInvalidValue, keyPath("projects", "max_diff_bytes"), "must be 0 (default 1048576) to 67108864")
	}
	if strings.ContainsAny(p.GitAuthorName+p.GitAuthorEmail, "<>\n\x00") {
		ps.add(ErrInvalidValue, keyPath("projects", "git_author_name"), "git_author_name and git_author_email must not hold <, >, newlines or NUL")
	}
	if p.Pool != "" && !validPoolName(p.Pool) {
		ps.add(ErrInvalidValue, keyPath("projects", "pool"), "must be an LXD storage pool name (letters, digits, '.', '_', '-'; at most 63)")
	}
	if !slices.Contains([]string{"", "auto", "isolated", "shared"}, p.Idmap) {
		ps.add(ErrInvalidValue, keyPath("projects", "idmap"), "%q: want auto, isolated or shared", p.Idmap)
	}
	if p.Warm < 0 || p.Warm > 16 {
		ps.add(ErrInvalidValue, keyPath("projects", "warm"), "%d: want 0 (no warm containers) to 16", p.Warm)
	}
	for i, pool := range p.AllowedPools {
		if !validPoolName(pool) {
			ps.add(ErrInvalidValue, appendIndex(keyPath("projects", "allowed_pools"), i), "%q is not an LXD storage pool name", pool)
		}
	}
	for i, image := range p.AllowedImages {
		if image == "" || strings.ContainsAny(image, " \t\n\x00") {
			ps.add(ErrInvalidValue, appendIndex(keyPath("projects", "allowed_images"), i), "%q is not an image alias or fingerprint", image)
		}
	}
	for i, target := range p.AllowedTargets {
		if !nameRE.MatchString(strings.TrimPrefix(target, "@")) {
			ps.add(ErrInvalidValue, appendIndex(keyPath("projects", "allowed_targets"), i), "%q is not a cluster member name or @group", target)
		}
	}
	if !slices.Contains([]string{"off", "allowlist", "open"}, p.Network.Mode) {
		ps.add(ErrInvalidValue, keyPath("projects", "network", "mode"), "%q: want off, allowlist or open", p.Network.Mode)
	}
	for key, list := range map[string][]string{"allow": p.Network.Allow, "project_may_allow": p.Network.ProjectMayAllow} {
		for i, h := range list {
			if h == "" || strings.ContainsAny(h, " \t\n\x00/") {
				ps.add(ErrInvalidValue, appendIndex(keyPath("projects", "network", key), i), "%q is not a host pattern", h)
			}
		}
	}
	if p.Limits.Processes < 0 {
		ps.add(ErrInvalidValue, keyPath("projects", "limits", "processes"), "must not be negative")
	}
	for key, v := range map[string]string{"cpu": p.Limits.CPU, "memory": p.Limits.Memory, "disk": p.Limits.Disk} {
		if strings.ContainsAny(v, " \t\n\x00") {
			ps.add(ErrInvalidValue, keyPath("projects", "limits", key), "must not contain spaces")
		}
	}
}

// validPoolName reports whether s can be an LXD storage pool name.
func validPoolName(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '.' || s[0] == '-' || s[0] == '_' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
