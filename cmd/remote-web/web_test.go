package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"remote/config"
	"remote/internal/testkit"
	"remote/web"
)

// startWeb serves the remote-web handler built from a TOML config, as
// serve builds it (webOptions), on a plain-HTTP test server.
func startWeb(t *testing.T, toml string) *httptest.Server {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("remoted.toml", []byte(toml+"\n[[web.users]]\nname = \"alice\"\npassword_hash = \""+string(hash)+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := web.New(webOptions(cfg, testkit.Logger(t, "remote-web")))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}

func login(t *testing.T, hs *httptest.Server, host string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/login", strings.NewReader(url.Values{"username": {"alice"}, "password": {"pw"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestAttackCookieNotSecureBehindProxy: behind a reverse proxy that ends
// TLS, remote-web itself speaks plain HTTP; with [web] cookie_secure the
// session cookie is still Secure, so a browser never sends it over plain
// HTTP. Unset, it follows tls_cert.
func TestAttackCookieNotSecureBehindProxy(t *testing.T) {
	for _, tt := range []struct {
		name, toml string
		secure     bool
	}{
		{"behind a TLS proxy", "[web]\ncookie_secure = true\n", true},
		{"default without TLS", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := login(t, startWeb(t, tt.toml), "")
			if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
				t.Fatalf("login: %d cookies %v", resp.StatusCode, resp.Header["Set-Cookie"])
			}
			want := map[bool]string{false: "remote_session", true: "__Host-remote_session"}[tt.secure]
			if c := resp.Cookies()[0]; c.Name != want || c.Secure != tt.secure {
				t.Errorf("cookie %s Secure=%v, want %s Secure=%v", c.Name, c.Secure, want, tt.secure)
			}
		})
	}
	cfg, err := config.Parse("remoted.toml", []byte("[web]\ntls_cert = \"/c\"\ntls_key = \"/k\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !webOptions(cfg, testkit.Logger(t, "remote-web")).Secure {
		t.Error("with tls_cert set and cookie_secure unset, the cookie is not Secure")
	}
}

// TestAllowedHostsWiring: [web] allowed_hosts and a listen address given
// as a DNS name are the names served; any other name is refused.
func TestAllowedHostsWiring(t *testing.T) {
	hs := startWeb(t, "[web]\nlisten = \"box.lan:8080\"\nallowed_hosts = [\"remote.example.com\"]\n")
	for host, want := range map[string]int{
		"remote.example.com": http.StatusSeeOther,
		"box.lan:8080":       http.StatusSeeOther,
		"127.0.0.1":          http.StatusSeeOther,
		"evil.example":       http.StatusForbidden,
	} {
		if resp := login(t, hs, host); resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestTrustedProxiesWiring: [web] trusted_proxies reach web.Options as
// prefixes.
func TestTrustedProxiesWiring(t *testing.T) {
	cfg, err := config.Parse("remoted.toml", []byte("[web]\ntrusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := webOptions(cfg, testkit.Logger(t, "remote-web")).TrustedProxies
	if len(got) != 2 || got[0].String() != "127.0.0.1/32" || got[1].String() != "10.0.0.0/8" {
		t.Errorf("TrustedProxies = %v, want [127.0.0.1/32 10.0.0.0/8]", got)
	}
}
