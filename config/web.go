package config

import (
	"net/netip"
	"strings"
)

// IsCookieSecure reports whether the session cookie is marked Secure:
// cookie_secure when set, else whether remote-web serves TLS itself.
func (w Web) IsCookieSecure() bool {
	if w.CookieSecure != nil {
		return *w.CookieSecure
	}
	return w.TLSCert != ""
}

// validHostName accepts a DNS name or an IP address (an IPv6 one without
// brackets), as [web] allowed_hosts lists them.
func validHostName(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
