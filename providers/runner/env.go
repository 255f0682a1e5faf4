package runner

import (
	"os"
	"sort"
	"strings"

	"remote/internal/lazyre"
)

// envKeyRE is the shape of an environment key the runner accepts.
var envKeyRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidEnvKey reports whether key is a valid environment variable name
// (^[A-Za-z_][A-Za-z0-9_]*$).
func ValidEnvKey(key string) bool { return envKeyRE.MatchString(key) }

// hostEnvAllow lists the daemon variables a host CLI inherits. Everything
// else in the daemon's environment (tokens, API keys, sockets) stays out.
var hostEnvAllow = map[string]bool{
	"PATH": true, "LANG": true, "LANGUAGE": true, "TZ": true, "TERM": true,
	"USER": true, "LOGNAME": true, "HOME": true, "SHELL": true, "TMPDIR": true,
}

// HostEnv returns the environment for a CLI run on the host: the allowlisted
// variables of the daemon's own environment (PATH, LANG, LANGUAGE, LC_*, TZ,
// TERM, USER, LOGNAME, HOME, SHELL, TMPDIR) overlaid with extra. Extra keys
// that are not valid variable names are dropped. The result is sorted by
// key and holds each key once.
func HostEnv(extra map[string]string) []string {
	return hostEnv(os.Environ(), extra)
}

func hostEnv(base []string, extra map[string]string) []string {
	m := make(map[string]string, len(base)+len(extra))
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !(hostEnvAllow[k] || strings.HasPrefix(k, "LC_")) || !ValidEnvKey(k) {
			continue
		}
		m[k] = v
	}
	for k, v := range extra {
		if ValidEnvKey(k) {
			m[k] = v
		}
	}
	return envList(m)
}

func envList(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	return out
}
