package config

import (
	"maps"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate reports every value the daemon cannot run with, as *Error values
// (joined when several) naming the key; File and Line are set only by
// Parse and Load.
func (c Config) Validate() error {
	var ps problems
	return c.validate(&ps)
}

var (
	logLevels  = []string{"trace", "debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
	// envKeyRE is what a portable environment variable name looks like.
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// nameRE covers Unix user and group names and LXD project, member,
	// profile and image-alias names: no spaces, slashes or colons.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
)

func (c Config) validate(ps *problems) error {
	if c.Version != 0 && c.Version != Version {
		ps.add(ErrInvalidValue, keyPath("version"), "unsupported version %d (this build reads %d)", c.Version, Version)
	}
	c.Daemon.validate(ps)
	c.LXD.validate(ps)
	c.Agent.validate(ps)
	for _, id := range sortedProviderIDs(c.Providers) {
		c.Providers[id].validate(ps, id)
	}
	c.Projects.validate(ps)
	for i, image := range c.Projects.AllowedImages {
		validateImageRef(ps, appendIndex(keyPath("projects", "allowed_images"), i), image, c.LXD.ImageServers)
	}
	c.Web.validate(ps)
	c.Notify.validate(ps)
	c.Schedules.validate(ps)
	validateForges(ps, c.Forges)
	return ps.err()
}

func (d Daemon) validate(ps *problems) {
	requireAbs(ps, keyPath("daemon", "socket"), d.Socket, true)
	if d.SocketGroup != "" && !nameRE.MatchString(d.SocketGroup) {
		ps.add(ErrInvalidValue, keyPath("daemon", "socket_group"), "invalid group name %q", d.SocketGroup)
	}
	for i, id := range d.AllowUIDs {
		if id < 0 || id > 1<<32-2 {
			ps.add(ErrInvalidValue, appendIndex(keyPath("daemon", "allow_uids"), i), "uid %d out of range", id)
		}
	}
	for i, id := range d.FrontendUIDs {
		if id < 0 || id > 1<<32-2 {
			ps.add(ErrInvalidValue, appendIndex(keyPath("daemon", "frontend_uids"), i), "uid %d out of range", id)
		}
	}
	for i, id := range d.AllowGIDs {
		if id < 0 || id > 1<<32-2 {
			ps.add(ErrInvalidValue, appendIndex(keyPath("daemon", "allow_gids"), i), "gid %d out of range", id)
		}
	}
	requireAbs(ps, keyPath("daemon", "state_dir"), d.StateDir, true)
	requireOneOf(ps, keyPath("daemon", "log_level"), d.LogLevel, logLevels)
	requireOneOf(ps, keyPath("daemon", "log_format"), d.LogFormat, logFormats)
	requireAbs(ps, keyPath("daemon", "secrets_key_file"), d.SecretsKeyFile, false)
}

func (l LXD) validate(ps *problems) {
	requireAbs(ps, keyPath("lxd", "socket"), l.Socket, false)
	if l.URL != "" && len(l.URLs) > 0 {
		ps.add(ErrInvalidValue, keyPath("lxd", "urls"), "set either url or urls, not both")
	}
	if l.URLs != nil && len(l.URLs) == 0 {
		ps.add(ErrInvalidValue, keyPath("lxd", "urls"), "is empty: list at least one https://host[:port]")
	}
	seenURL := map[string]bool{}
	for i, raw := range l.URLs {
		p := appendIndex(keyPath("lxd", "urls"), i)
		l.validateURL(ps, p, "urls", raw)
		if seenURL[raw] {
			ps.add(ErrInvalidValue, p, "duplicate url %q", raw)
		}
		seenURL[raw] = true
	}
	if l.URL != "" {
		l.validateURL(ps, keyPath("lxd", "url"), "url", l.URL)
	}
	if l.URL == "" && len(l.URLs) == 0 {
		for _, f := range []struct{ key, v string }{{"client_cert", l.ClientCert}, {"client_key", l.ClientKey}, {"server_cert", l.ServerCert}} {
			if f.v != "" {
				ps.add(ErrInvalidValue, keyPath("lxd", f.key), "only applies with url")
			}
		}
	}
	requireAbs(ps, keyPath("lxd", "client_cert"), l.ClientCert, false)
	requireAbs(ps, keyPath("lxd", "client_key"), l.ClientKey, false)
	requireAbs(ps, keyPath("lxd", "server_cert"), l.ServerCert, false)
	requireName(ps, keyPath("lxd", "project"), l.Project, false)
	requireName(ps, keyPath("lxd", "target"), l.Target, false)
	if l.Image == "" || strings.ContainsAny(l.Image, " \t\n\x00") {
		ps.add(ErrInvalidValue, keyPath("lxd", "image"), "%q is not an image alias or fingerprint", l.Image)
	} else {
		validateImageRef(ps, keyPath("lxd", "image"), l.Image, l.ImageServers)
	}
	validateImageServers(ps, l.ImageServers)
	seen := map[string]bool{}
	for i, p := range l.Profiles {
		path := appendIndex(keyPath("lxd", "profiles"), i)
		requireName(ps, path, p, true)
		if seen[p] {
			ps.add(ErrInvalidValue, path, "duplicate profile %q", p)
		}
		seen[p] = true
	}
}

// validateURL checks one https URL of [lxd] url or urls.
func (l LXD) validateURL(ps *problems, p []pathElem, key, raw string) {
	u, err := url.Parse(raw)
	switch {
	case l.Socket != "":
		ps.add(ErrInvalidValue, p, "set either socket or %s, not both", key)
	case err != nil:
		ps.add(ErrInvalidValue, p, "invalid url %q", raw)
	case u.Scheme != "https":
		ps.add(ErrInvalidValue, p, "url %q must use https", raw)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		ps.add(ErrInvalidValue, p, "url %q must be https://host[:port] only", raw)
	case l.ClientCert == "" || l.ClientKey == "":
		ps.add(ErrInvalidValue, p, "an https url needs both client_cert and client_key")
	}
}

func (a Agent) validate(ps *problems) {
	if a.CredentialSyncTimeout.Duration <= 0 {
		ps.add(ErrInvalidValue, keyPath("agent", "credential_sync_timeout"), "must be positive, not %s", a.CredentialSyncTimeout.Duration)
	}
	if a.TranscriptBytes <= 0 {
		ps.add(ErrInvalidValue, keyPath("agent", "transcript_bytes"), "must be positive, not %d", a.TranscriptBytes)
	}
	if a.ExitGrace.Duration <= 0 {
		ps.add(ErrInvalidValue, keyPath("agent", "exit_grace"), "must be positive, not %s", a.ExitGrace.Duration)
	}
	if a.IdleTimeout.Duration < 0 {
		ps.add(ErrInvalidValue, keyPath("agent", "idle_timeout"), "must be 0 (off) or positive, not %s", a.IdleTimeout.Duration)
	}
	if a.Nice < 0 || a.Nice > 19 {
		ps.add(ErrInvalidValue, keyPath("agent", "nice"), "must be 0 to 19 (added to the daemon's nice value), not %d", a.Nice)
	}
	requireName(ps, keyPath("agent", "host_user"), a.HostUser, false)
	requireAbs(ps, keyPath("agent", "shim_binary"), a.ShimBinary, false)
	for i, r := range a.AllowedRoots {
		requireAbs(ps, appendIndex(keyPath("agent", "allowed_roots"), i), r, true)
	}
}

func (p Provider) validate(ps *problems, id string) {
	base := keyPath("providers", id)
	if !slices.Contains(providerIDs, id) {
		ps.add(ErrInvalidValue, base, "unknown provider %q (known: %s)", id, strings.Join(providerIDs, ", "))
		return
	}
	switch {
	case p.Binary == "":
		ps.add(ErrInvalidValue, appendKey(base, "binary"), "must not be empty")
	case strings.ContainsRune(p.Binary, '/') && !filepath.IsAbs(p.Binary):
		ps.add(ErrInvalidValue, appendKey(base, "binary"), "%q must be a bare name looked up on PATH or an absolute path", p.Binary)
	case strings.ContainsRune(p.Binary, 0):
		ps.add(ErrInvalidValue, appendKey(base, "binary"), "contains a NUL byte")
	}
	for i, a := range p.Args {
		if strings.ContainsRune(a, 0) {
			ps.add(ErrInvalidValue, appendIndex(appendKey(base, "args"), i), "contains a NUL byte")
		}
	}
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		path := appendKey(appendKey(base, "env"), k)
		if !envKeyRE.MatchString(k) {
			ps.add(ErrInvalidValue, path, "invalid environment variable name")
		} else if strings.ContainsRune(p.Env[k], 0) {
			ps.add(ErrInvalidValue, path, "value contains a NUL byte") // the value itself is never shown
		}
	}
	seen := map[string]bool{}
	for i, k := range p.ProjectEnv {
		path := appendIndex(appendKey(base, "project_env"), i)
		switch _, inEnv := p.Env[k]; {
		case !envKeyRE.MatchString(k):
			ps.add(ErrInvalidValue, path, "%q is not an environment variable name", k)
		case seen[k]:
			ps.add(ErrInvalidValue, path, "%q is listed twice", k)
		case !inEnv:
			ps.add(ErrInvalidValue, path, "%q is not a key of [providers.%s] env", k, id)
		}
		seen[k] = true
	}
	p.ProviderProvisioning.validate(ps, base)
}

func (p Projects) validate(ps *problems) {
	requireAbs(ps, keyPath("projects", "instructions_dir"), p.InstructionsDir, false)
	requireAbs(ps, keyPath("projects", "skills_dir"), p.SkillsDir, false)
	p.ProjectsProvisioning.validate(ps)
}

func (w Web) validate(ps *problems) {
	p := keyPath("web", "listen")
	if host, port, err := net.SplitHostPort(w.Listen); err != nil {
		ps.add(ErrInvalidValue, p, "%q is not host:port", w.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		ps.add(ErrInvalidValue, p, "%q: port must be 1-65535", w.Listen)
	} else if strings.ContainsAny(host, " /") {
		ps.add(ErrInvalidValue, p, "%q: invalid host", w.Listen)
	}
	if (w.TLSCert == "") != (w.TLSKey == "") {
		ps.add(ErrInvalidValue, keyPath("web", "tls_cert"), "set both tls_cert and tls_key, or neither")
	}
	requireAbs(ps, keyPath("web", "tls_cert"), w.TLSCert, false)
	requireAbs(ps, keyPath("web", "tls_key"), w.TLSKey, false)
	if w.SessionTTL.Duration <= 0 {
		ps.add(ErrInvalidValue, keyPath("web", "session_ttl"), "must be positive, not %s", w.SessionTTL.Duration)
	}
	for i, h := range w.AllowedHosts {
		if !validHostName(h) {
			ps.add(ErrInvalidValue, appendIndex(keyPath("web", "allowed_hosts"), i), "%q is not a host name: give the name alone, without scheme, port or path (e.g. \"remote.example.com\")", h)
		}
	}
	for i, p := range w.TrustedProxies {
		if _, err := ParsePrefix(p); err != nil {
			ps.add(ErrInvalidValue, appendIndex(keyPath("web", "trusted_proxies"), i), "%q: want an IP address or a CIDR prefix (e.g. \"127.0.0.1\" or \"10.0.0.0/8\")", p)
		}
	}
	w.validatePreview(ps)
	seen := map[string]bool{}
	for i, u := range w.Users {
		base := appendIndex(keyPath("web", "users"), i)
		switch {
		case u.Name == "":
			ps.add(ErrInvalidValue, appendKey(base, "name"), "must not be empty")
		case strings.ContainsAny(u.Name, ":\x00\n") || strings.TrimSpace(u.Name) != u.Name:
			ps.add(ErrInvalidValue, appendKey(base, "name"), "%q: no colons, control characters or surrounding spaces", u.Name)
		case seen[u.Name]:
			ps.add(ErrInvalidValue, appendKey(base, "name"), "duplicate user %q", u.Name)
		}
		seen[u.Name] = true
		if u.PasswordHash == "" {
			ps.add(ErrInvalidValue, appendKey(base, "password_hash"), "must not be empty")
		}
	}
}

func requireAbs(ps *problems, path []pathElem, v string, required bool) {
	switch {
	case v == "" && required:
		ps.add(ErrInvalidValue, path, "must not be empty")
	case v != "" && !filepath.IsAbs(v):
		ps.add(ErrInvalidValue, path, "%q must be an absolute path", v)
	case strings.ContainsRune(v, 0):
		ps.add(ErrInvalidValue, path, "contains a NUL byte")
	}
}

func requireOneOf(ps *problems, path []pathElem, v string, allowed []string) {
	if !slices.Contains(allowed, v) {
		ps.add(ErrInvalidValue, path, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
}

func requireName(ps *problems, path []pathElem, v string, required bool) {
	switch {
	case v == "" && required:
		ps.add(ErrInvalidValue, path, "must not be empty")
	case v != "" && !nameRE.MatchString(v):
		ps.add(ErrInvalidValue, path, "invalid name %q", v)
	}
}

func sortedProviderIDs(m map[string]Provider) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// headerNameRE is an HTTP header field name (RFC 9110 token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (n Notify) validate(ps *problems) {
	if n.WebhookURL != "" {
		// The URL may carry a token: name what is wrong, never echo it.
		u, err := url.Parse(n.WebhookURL)
		switch {
		case err != nil:
			ps.add(ErrInvalidValue, keyPath("notify", "webhook_url"), "not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add(ErrInvalidValue, keyPath("notify", "webhook_url"), "scheme must be http or https")
		case u.Host == "":
			ps.add(ErrInvalidValue, keyPath("notify", "webhook_url"), "has no host")
		}
	} else if len(n.Headers) > 0 {
		ps.add(ErrInvalidValue, keyPath("notify", "headers"), "set webhook_url too, or leave headers out")
	}
	for _, k := range slices.Sorted(maps.Keys(n.Headers)) {
		if !headerNameRE.MatchString(k) {
			ps.add(ErrInvalidValue, appendKey(keyPath("notify", "headers"), k), "%q is not a header name", k)
		} else if strings.ContainsAny(n.Headers[k], "\r\n\x00") {
			ps.add(ErrInvalidValue, appendKey(keyPath("notify", "headers"), k), "value has a line break or NUL")
		}
	}
}

// validatePreview checks the preview origin: its own host:port, not the
// page's, and preview_url (when set) an origin whose scheme and host are
// the browser's view of it.
func (w Web) validatePreview(ps *problems) {
	if w.PublicURL != "" {
		u, err := url.Parse(w.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			ps.add(ErrInvalidValue, keyPath("web", "public_url"), "%q: want an absolute http(s) URL without user, query or fragment, like \"https://remote.example.net\"", w.PublicURL)
		}
	}
	if w.PreviewListen == "" {
		if w.PreviewURL != "" {
			ps.add(ErrInvalidValue, keyPath("web", "preview_url"), "set preview_listen too, or leave preview_url out")
		}
		return
	}
	p := keyPath("web", "preview_listen")
	if _, port, err := net.SplitHostPort(w.PreviewListen); err != nil {
		ps.add(ErrInvalidValue, p, "%q is not host:port", w.PreviewListen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		ps.add(ErrInvalidValue, p, "%q: port must be 1-65535", w.PreviewListen)
	} else if w.PreviewListen == w.Listen {
		ps.add(ErrInvalidValue, p, "%q is the page's listen address: previews need an origin of their own", w.PreviewListen)
	}
	if w.PreviewURL != "" {
		u, err := url.Parse(w.PreviewURL)
		var domain string
		wild := false
		if err == nil {
			domain, wild = strings.CutPrefix(u.Hostname(), "*.")
		}
		_, ipErr := netip.ParseAddr(domain)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !wild || ipErr == nil || !validHostName(domain) ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			ps.add(ErrInvalidValue, keyPath("web", "preview_url"), "%q: want a wildcard origin like \"https://*.preview.example.net\" (scheme, \"*.\" and a DNS name, no path): each project's port is served on a host name of its own", w.PreviewURL)
		}
	}
}

func (s Schedules) validate(ps *problems) {
	if s.MinInterval.Duration < time.Minute {
		ps.add(ErrInvalidValue, keyPath("schedules", "min_interval"), "must be at least 1m (cron fires at most every minute)")
	}
	if s.MaxPerChat < 1 {
		ps.add(ErrInvalidValue, keyPath("schedules", "max_per_chat"), "must be at least 1")
	}
	if s.MaxPerUser < 1 {
		ps.add(ErrInvalidValue, keyPath("schedules", "max_per_user"), "must be at least 1")
	}
}
