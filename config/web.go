package config

import (
	"fmt"
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

// ParsePrefix reads a [web] trusted_proxies entry: an IP address (a
// single-address prefix) or a CIDR prefix, masked. IPv4-mapped IPv6
// prefixes are refused: write the IPv4 form.
func ParsePrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q: write an IPv4 prefix in its IPv4 form", s)
	}
	return p.Masked(), nil
}
