package config

import (
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Forge is one [forges."<host>"] table: the REST API that opens pull
// requests for repositories cloned from host. The API URL comes only from
// here, never from a user: a repository URL only picks a configured host.
type Forge struct {
	// Kind is the API dialect: github, gitlab or gitea (Forgejo speaks
	// Gitea's).
	Kind string `toml:"kind" doc:"the API's dialect: github, gitlab or gitea (also for Forgejo)"`
	// API is the absolute http(s) base URL of the REST API, e.g.
	// https://api.github.com, https://gitlab.com/api/v4 or
	// https://gitea.example/api/v1.
	API string `toml:"api" doc:"absolute http(s) base URL of the REST API, e.g. https://gitea.example/api/v1; the user's token is sent there"`
}

// ForgeKinds returns the kinds [forges."<host>"] kind accepts.
func ForgeKinds() []string { return []string{"github", "gitlab", "gitea"} }

// defaultForges are the forges every configuration knows; a file may
// override their keys.
func defaultForges() map[string]Forge {
	return map[string]Forge{
		"github.com": {Kind: "github", API: "https://api.github.com"},
		"gitlab.com": {Kind: "gitlab", API: "https://gitlab.com/api/v4"},
	}
}

// fillForgeDefaults gives a default host named in the file, which TOML
// decoding started from zero, the default kind and (for that kind) API.
func (c *Config) fillForgeDefaults() {
	defaults := defaultForges()
	for host, f := range c.Forges {
		d, ok := defaults[host]
		if !ok {
			continue
		}
		if f.Kind == "" {
			f.Kind = d.Kind
		}
		if f.API == "" && f.Kind == d.Kind {
			f.API = d.API
		}
		c.Forges[host] = f
	}
}

func validateForges(ps *problems, forges map[string]Forge) {
	for _, host := range slices.Sorted(maps.Keys(forges)) {
		base := keyPath("forges", host)
		if !validForgeHost(host) {
			ps.add(ErrInvalidValue, base, "%q is not a host name: give the host of the clone URLs in lower case, with :port only when they carry one (e.g. \"gitea.example.com\")", host)
		}
		f := forges[host]
		if !slices.Contains(ForgeKinds(), f.Kind) {
			ps.add(ErrInvalidValue, appendKey(base, "kind"), "%q is not one of %s", f.Kind, strings.Join(ForgeKinds(), ", "))
		}
		p := appendKey(base, "api")
		u, err := url.Parse(f.API)
		switch {
		case f.API == "":
			ps.add(ErrInvalidValue, p, "must not be empty: the forge's REST API base URL, e.g. https://%s/api/v1", host)
		case err != nil:
			ps.add(ErrInvalidValue, p, "not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add(ErrInvalidValue, p, "scheme must be http or https")
		case u.Host == "":
			ps.add(ErrInvalidValue, p, "has no host")
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			// Never echoed: userinfo or a query may hold a credential.
			ps.add(ErrInvalidValue, p, "must be scheme://host[:port][/path] only, without user, query or fragment")
		}
	}
}

// validForgeHost accepts a lower-case DNS name or IP address, with an
// optional :port, as the host part of clone URLs reads.
func validForgeHost(h string) bool {
	if h != strings.ToLower(h) {
		return false
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		n, err := strconv.Atoi(port)
		return err == nil && n >= 1 && n <= 65535 && validHostName(host)
	}
	return !strings.Contains(h, ":") && validHostName(h)
}
