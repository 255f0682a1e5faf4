package forge

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"remote/config"
)

// ErrNoForge is the class of ForRepo's error for a clone URL whose host
// has no [forges."<host>"] table (errors.Is finds it; it is also a
// FailedPrecondition).
var ErrNoForge = errors.New("no forge configured for this host")

// noForgeError names the unconfigured host.
type noForgeError struct{ host string }

func (e *noForgeError) Error() string {
	return fmt.Sprintf("no forge is configured for host %q: the operator adds [forges.%q] kind and api to the daemon's configuration", e.host, e.host)
}
func (e *noForgeError) Is(target error) bool     { return target == ErrNoForge }
func (e *noForgeError) FailedPrecondition() bool { return true }

// ForRepo picks the forge of a clone URL among the configured ones (keyed
// by host) and returns it with the repository's path on it ("owner/name";
// on GitLab the whole namespace path). It reads
// https://host[:port]/owner/name[.git] (http too), ssh://[user@]host[:port]/owner/name[.git]
// and scp-like [user@]host:owner/name[.git]; for ssh forms the host alone
// (without the ssh port) is the key. A host with no table is an error
// naming it (ErrNoForge): the URL picks a configured forge, it never says
// where the token is sent. Errors never repeat the URL, which may carry a
// password.
func ForRepo(forges map[string]config.Forge, repoURL string) (Forge, string, error) {
	host, path, err := splitRepoURL(repoURL)
	if err != nil {
		return Forge{}, "", err
	}
	cfg, ok := forges[host]
	if !ok {
		return Forge{}, "", &noForgeError{host: host}
	}
	f := Forge{Kind: Kind(cfg.Kind), API: cfg.API}
	if err := f.check(); err != nil {
		return Forge{}, "", err
	}
	if err := checkRepoPath(f.Kind, path); err != nil {
		return Forge{}, "", invalid("repository URL on %s: %v", host, err)
	}
	return f, path, nil
}

// splitRepoURL returns the lower-case host key and the repository path
// (no leading or trailing slash, no .git) of a clone URL.
func splitRepoURL(raw string) (host, path string, err error) {
	if raw == "" {
		return "", "", invalid("repository URL is empty")
	}
	if strings.ContainsAny(raw, " \t\r\n\x00") {
		return "", "", invalid("repository URL contains a space or control character")
	}
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", invalid("repository URL is not a URL")
		}
		switch u.Scheme {
		case "https", "http":
			if u.User != nil {
				return "", "", invalid("repository URL carries a user or password: give the token as the project's tokenSecret instead")
			}
			host = strings.ToLower(u.Host)
			host = strings.TrimSuffix(host, map[string]string{"https": ":443", "http": ":80"}[u.Scheme])
		case "ssh":
			host = strings.ToLower(u.Hostname())
			if strings.Contains(host, ":") {
				host = "[" + host + "]"
			}
		default:
			return "", "", invalid("repository URL scheme %q is not https, http or ssh", u.Scheme)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return "", "", invalid("repository URL has a query or fragment")
		}
		path = u.Path
	} else {
		// scp-like: [user@]host:path, no slash before the colon.
		left, right, ok := strings.Cut(raw, ":")
		if !ok || left == "" || strings.Contains(left, "/") {
			return "", "", invalid("repository URL is neither https://host/owner/name nor host:owner/name")
		}
		if i := strings.LastIndex(left, "@"); i >= 0 {
			left = left[i+1:]
		}
		host, path = strings.ToLower(left), right
	}
	if host == "" || strings.ContainsAny(host, "/@?#") {
		return "", "", invalid("repository URL has no host")
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	if path == "" {
		return "", "", invalid("repository URL on %s names no repository", host)
	}
	return host, path, nil
}
