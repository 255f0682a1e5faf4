package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"remote/api"
)

// Pattern is one allowed host: an exact name ("pypi.org"), every name
// under a domain ("*.pythonhosted.org", not the domain itself), "*" (any
// name: project_may_allow only) or, in the operator's list only, an IP
// address. Port 0 means 80 and 443; AnyPort any port.
type Pattern struct {
	Host     string // lowercase, no trailing dot; "*.d" or "*" for wildcards
	Port     int
	AnyPort  bool
	Addr     netip.Addr // set when Host is an IP address
	Original string
}

// ParsePattern parses "host", "host:port", "host:*", "*.domain[:port]"
// or, with ips, an IP address ("10.0.0.5", "[fd00::1]:8080").
func ParsePattern(s string, ips bool) (Pattern, error) {
	p := Pattern{Original: s}
	if s == "" || len(s) > 260 {
		return p, errors.New("empty or longer than 260 bytes")
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return p, fmt.Errorf("%q: unclosed [", s)
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return p, fmt.Errorf("%q: want [address]:port", s)
		}
	} else if i := strings.LastIndex(s, ":"); i >= 0 {
		host, port = s[:i], s[i+1:]
		if strings.Contains(host, ":") {
			return p, fmt.Errorf("%q: an IPv6 address goes in brackets", s)
		}
	}
	switch port {
	case "":
	case "*":
		p.AnyPort = true
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return p, fmt.Errorf("%q: port %q is not 1 to 65535 or *", s, port)
		}
		p.Port = n
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !ips {
			return p, fmt.Errorf("%q is an IP address: only host names may be allowed here", s)
		}
		p.Addr, p.Host = a.Unmap(), a.Unmap().String()
		return p, nil
	}
	h, ok := NormalizeHost(strings.TrimPrefix(host, "*."))
	if host == "*" {
		h, ok = "", true
	}
	if !ok {
		return p, fmt.Errorf("%q: not a host name (letters, digits, '-' and '.'; \"*.\" may start it)", s)
	}
	switch {
	case host == "*":
		p.Host = "*"
	case strings.HasPrefix(host, "*."):
		p.Host = "*." + h
	default:
		p.Host = h
	}
	return p, nil
}

// NormalizeHost lowercases a host name and drops one trailing dot; ok is
// false for anything that is not a DNS name of letters, digits, hyphens
// and dots (or that looks like an IPv4 address in another notation, like
// "0x7f.1" or "2130706433").
func NormalizeHost(h string) (string, bool) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", false
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", false
			}
		}
	}
	// A last label of digits only (or hex like 0x7f) is an IPv4 address in
	// a notation resolvers accept: never a name.
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" || (strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "") {
		return "", false
	}
	return h, true
}

func (p Pattern) portOK(port int) bool {
	switch {
	case p.AnyPort:
		return true
	case p.Port == 0:
		return port == 80 || port == 443
	default:
		return port == p.Port
	}
}

// Match reports whether host (normalized, or an IP address's string)
// and port are allowed by p.
func (p Pattern) Match(host string, port int) bool {
	if !p.portOK(port) {
		return false
	}
	switch {
	case p.Addr.IsValid():
		a, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == p.Addr
	case p.Host == "*":
		_, err := netip.ParseAddr(host)
		return err != nil
	case strings.HasPrefix(p.Host, "*."):
		return strings.HasSuffix(host, p.Host[1:])
	default:
		return host == p.Host
	}
}

// covers reports whether every host and port q allows is allowed by p
// (project_may_allow p over a project's q).
func (p Pattern) covers(q Pattern) bool {
	if q.Addr.IsValid() || p.Addr.IsValid() {
		return false
	}
	switch {
	case p.AnyPort:
	case q.AnyPort:
		return false
	case p.Port == 0 && q.Port != 0 && q.Port != 80 && q.Port != 443:
		return false
	case p.Port != 0 && q.Port != p.Port:
		return false
	}
	switch {
	case p.Host == "*":
		return q.Host != "*"
	case q.Host == "*":
		return false
	case strings.HasPrefix(p.Host, "*."):
		return strings.HasSuffix(q.Host, p.Host[1:])
	default:
		return p.Host == q.Host
	}
}

// Config is the operator's part of every project's policy.
type Config struct {
	// Mode is the mode of a new project naming none ("": allowlist).
	Mode string
	// Allow are the hosts every project in allowlist mode may reach
	// ([projects.network] allow); they may be IP addresses and resolve to
	// private addresses.
	Allow []string
	// ProjectMayAllow bounds the patterns a project's own allow may hold
	// (nil: ["*:*"], any host name, any port).
	ProjectMayAllow []string
	// Agent are the daemon's own needs, reachable in off mode too: the
	// model providers' API hosts (nil: AgentHosts).
	Agent []string
}

// AgentHosts are the API hosts of the built-in providers' CLIs.
var AgentHosts = []string{
	"api.anthropic.com", "statsig.anthropic.com", "console.anthropic.com", "claude.ai",
	"api.openai.com", "auth.openai.com", "chatgpt.com",
	"api.minimax.io", "api.moonshot.ai", "api.kimi.com",
	"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com",
}

// Compiled is a Config parsed once.
type Compiled struct {
	mode            string
	operator, agent []Pattern
	mayAllow        []Pattern
}

// Compile checks and parses c; its errors name the list and entry.
func Compile(c Config) (*Compiled, error) {
	out := &Compiled{mode: c.Mode}
	if out.mode == "" {
		out.mode = api.NetworkAllowlist
	}
	if !ValidMode(out.mode) {
		return nil, fmt.Errorf("network mode %q: want off, allowlist or open", c.Mode)
	}
	parse := func(name string, list []string, ips bool) ([]Pattern, error) {
		var ps []Pattern
		for _, s := range list {
			p, err := ParsePattern(s, ips)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			ps = append(ps, p)
		}
		return ps, nil
	}
	var err error
	if out.operator, err = parse("allow", c.Allow, true); err != nil {
		return nil, err
	}
	agent := c.Agent
	if agent == nil {
		agent = AgentHosts
	}
	if out.agent, err = parse("agent hosts", agent, true); err != nil {
		return nil, err
	}
	may := c.ProjectMayAllow
	if may == nil {
		may = []string{"*:*"}
	}
	if out.mayAllow, err = parse("project_may_allow", may, false); err != nil {
		return nil, err
	}
	return out, nil
}

// ValidMode reports whether m is a network mode.
func ValidMode(m string) bool {
	return m == api.NetworkOff || m == api.NetworkAllowlist || m == api.NetworkOpen
}

// DefaultMode is the mode of a new project naming none.
func (c *Compiled) DefaultMode() string { return c.mode }

// CheckProjectAllow parses one entry of a project's own allow list and
// checks it against project_may_allow: host names only, never an IP
// address.
func (c *Compiled) CheckProjectAllow(s string) (Pattern, error) {
	p, err := ParsePattern(s, false)
	if err != nil {
		return p, err
	}
	if p.Host == "*" {
		return p, fmt.Errorf("%q: a project may not allow every host (set its mode to open)", s)
	}
	if !slices.ContainsFunc(c.mayAllow, func(m Pattern) bool { return m.covers(p) }) {
		return p, fmt.Errorf("%q is outside what a project may allow ([projects.network] project_may_allow)", s)
	}
	return p, nil
}

// Decision is what a policy says of one host and port.
type Decision struct {
	Allowed bool
	// Trusted: the operator's or the daemon's list named the host, so it
	// may be an IP address and resolve to a private address.
	Trusted bool
	Reason  string // why not, when not Allowed
}

// Decide decides host (as the client named it) and port for proj.
func (c *Compiled) Decide(proj api.Project, host string, port int) Decision {
	mode := api.NetworkOpen
	var own []string
	if proj.Network != nil {
		mode, own = proj.Network.Mode, proj.Network.Allow
	}
	name, isName := NormalizeHost(host)
	if !isName {
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
		if err != nil {
			return Decision{Reason: "not a host name"}
		}
		name = a.Unmap().String()
	}
	match := func(ps []Pattern) bool {
		return slices.ContainsFunc(ps, func(p Pattern) bool { return p.Match(name, port) })
	}
	if match(c.agent) || (mode != api.NetworkOff && match(c.operator)) {
		return Decision{Allowed: true, Trusted: true}
	}
	if !isName {
		return Decision{Reason: "a bare IP address (only [projects.network] allow may name one)"}
	}
	switch mode {
	case api.NetworkOff:
		return Decision{Reason: "the project's network is off"}
	case api.NetworkOpen:
		return Decision{Allowed: true}
	}
	for _, s := range own {
		if p, err := c.CheckProjectAllow(s); err == nil && p.Match(name, port) {
			return Decision{Allowed: true}
		}
	}
	return Decision{Reason: "not in the project's allow list"}
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/23"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
}

// Public reports whether a is a public unicast address: not loopback,
// private, link-local, multicast, unspecified, shared (CGNAT),
// documentation, benchmarking, reserved or an IPv6 form of an IPv4
// address (mapped, NAT64, 6to4).
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || a.Zone() != "" {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
