package config

import (
	"errors"
	"reflect"
	"testing"
)

// TestWebCookieSecureAndAllowedHosts covers [web] cookie_secure (default:
// on exactly when tls_cert is set) and allowed_hosts (names alone).
func TestWebCookieSecureAndAllowedHosts(t *testing.T) {
	tls := "[web]\ntls_cert = \"/c\"\ntls_key = \"/k\"\n"
	for _, tt := range []struct {
		name, in string
		secure   bool
	}{
		{"default without tls", "", false},
		{"default with tls", tls, true},
		{"behind a TLS proxy", "[web]\ncookie_secure = true\n", true},
		{"explicitly off with tls", tls + "cookie_secure = false\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("remoted.toml", []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Web.IsCookieSecure(); got != tt.secure {
				t.Errorf("IsCookieSecure() = %v, want %v", got, tt.secure)
			}
		})
	}

	c, err := Parse("remoted.toml", []byte("[web]\nallowed_hosts = [\"remote.example.com\", \"box.lan.\", \"192.0.2.7\", \"::1\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"remote.example.com", "box.lan.", "192.0.2.7", "::1"}; !reflect.DeepEqual(c.Web.AllowedHosts, want) {
		t.Errorf("allowed_hosts = %q, want %q", c.Web.AllowedHosts, want)
	}
	if d := Default(); d.Web.AllowedHosts != nil || d.Web.CookieSecure != nil {
		t.Errorf("defaults: allowed_hosts %q cookie_secure %v, want both unset", d.Web.AllowedHosts, d.Web.CookieSecure)
	}

	for _, tt := range []struct{ in, want string }{
		{`["https://remote.example.com"]`, `remoted.toml:2: [web] allowed_hosts[0]: "https://remote.example.com" is not a host name: give the name alone, without scheme, port or path (e.g. "remote.example.com")`},
		{`["ok.example", "remote.example.com:8443"]`, `remoted.toml:2: [web] allowed_hosts[1]: "remote.example.com:8443" is not a host name: give the name alone, without scheme, port or path (e.g. "remote.example.com")`},
		{`[""]`, `remoted.toml:2: [web] allowed_hosts[0]: "" is not a host name: give the name alone, without scheme, port or path (e.g. "remote.example.com")`},
		{`["[::1]"]`, `remoted.toml:2: [web] allowed_hosts[0]: "[::1]" is not a host name: give the name alone, without scheme, port or path (e.g. "remote.example.com")`},
	} {
		_, err := Parse("remoted.toml", []byte("[web]\nallowed_hosts = "+tt.in+"\n"))
		if !errors.Is(err, ErrInvalidValue) || err.Error() != tt.want {
			t.Errorf("allowed_hosts = %s: %v\nwant %s", tt.in, err, tt.want)
		}
	}
	if _, err := Parse("remoted.toml", []byte("[web]\ncookie_secure = \"yes\"\n")); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("cookie_secure = \"yes\": %v, want an invalid value", err)
	}
}

// TestWebTrustedProxies: entries are IP addresses or CIDR prefixes.
func TestWebTrustedProxies(t *testing.T) {
	c, err := Parse("remoted.toml", []byte("[web]\ntrusted_proxies = [\"127.0.0.1\", \"10.1.2.3/8\", \"::1\", \"fd00::/8\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.Web.TrustedProxies {
		pp, err := ParsePrefix(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pp.String())
	}
	if want := []string{"127.0.0.1/32", "10.0.0.0/8", "::1/128", "fd00::/8"}; !reflect.DeepEqual(got, want) {
		t.Errorf("prefixes %q, want %q", got, want)
	}
	for _, in := range []string{`"proxy.lan"`, `"10.0.0.0/33"`, `"::ffff:10.0.0.0/104"`, `""`} {
		_, err := Parse("remoted.toml", []byte("[web]\ntrusted_proxies = ["+in+"]\n"))
		want := `remoted.toml:2: [web] trusted_proxies[0]: ` + in + `: want an IP address or a CIDR prefix (e.g. "127.0.0.1" or "10.0.0.0/8")`
		if !errors.Is(err, ErrInvalidValue) || err.Error() != want {
			t.Errorf("trusted_proxies = [%s]: %v\nwant %s", in, err, want)
		}
	}
}

// TestWebPreview covers [web] preview_listen (its own host:port, never the
// page's) and preview_url (a wildcard origin, one host name per project
// and port; default http(s)://*.localhost:<preview_listen port>).
func TestWebPreview(t *testing.T) {
	c, err := Parse("remoted.toml", []byte("[web]\nlisten = \"127.0.0.1:8080\"\npreview_listen = \"127.0.0.1:8081\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Web.PreviewOrigin(); got != "http://*.localhost:8081" {
		t.Errorf("preview origin %q", got)
	}
	c, err = Parse("remoted.toml", []byte("[web]\npreview_listen = \"127.0.0.1:8081\"\npreview_url = \"https://*.preview.example.com/\"\n"))
	if err != nil || c.Web.PreviewOrigin() != "https://*.preview.example.com" {
		t.Errorf("preview_url: %q %v", c.Web.PreviewOrigin(), err)
	}
	if d := Default(); d.Web.PreviewListen != "" || d.Web.PreviewOrigin() != "" {
		t.Errorf("default preview_listen %q: want previews off", d.Web.PreviewListen)
	}
	for _, tt := range []struct{ in, want string }{
		{"listen = \"127.0.0.1:8080\"\npreview_listen = \"127.0.0.1:8080\"", `remoted.toml:3: [web] preview_listen: "127.0.0.1:8080" is the page's listen address: previews need an origin of their own`},
		{"preview_listen = \"8081\"", `remoted.toml:2: [web] preview_listen: "8081" is not host:port`},
		{"preview_url = \"https://*.p.example.com\"", `remoted.toml:2: [web] preview_url: set preview_listen too, or leave preview_url out`},
		{"preview_listen = \"127.0.0.1:8081\"\npreview_url = \"https://*.p.example.com/app\"", `remoted.toml:3: [web] preview_url: "https://*.p.example.com/app": want a wildcard origin like "https://*.preview.example.net" (scheme, "*." and a DNS name, no path): each project's port is served on a host name of its own`},
		{"preview_listen = \"127.0.0.1:8081\"\npreview_url = \"https://p.example.com\"", `remoted.toml:3: [web] preview_url: "https://p.example.com": want a wildcard origin like "https://*.preview.example.net" (scheme, "*." and a DNS name, no path): each project's port is served on a host name of its own`},
		{"preview_listen = \"127.0.0.1:8081\"\npreview_url = \"http://*.127.0.0.1:8081\"", `remoted.toml:3: [web] preview_url: "http://*.127.0.0.1:8081": want a wildcard origin like "https://*.preview.example.net" (scheme, "*." and a DNS name, no path): each project's port is served on a host name of its own`},
	} {
		_, err := Parse("remoted.toml", []byte("[web]\n"+tt.in+"\n"))
		if !errors.Is(err, ErrInvalidValue) || err.Error() != tt.want {
			t.Errorf("%s: %v\nwant %s", tt.in, err, tt.want)
		}
	}
}
