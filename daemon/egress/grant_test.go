package egress

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"remote/api"
)

// clientAs is f's client with a proxy credential user:pass.
func (f *fixture) clientAs(user, pass string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword(user, pass), Host: "egress"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", f.sock)
		},
		DisableKeepAlives: true,
	}}
}

func (f *fixture) getAs(t *testing.T, user, pass, u string) (int, string) {
	t.Helper()
	resp, err := f.clientAs(user, pass).Get(strings.ReplaceAll(u, "PORT", f.port))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEgressSetupGrant: a live setup credential adds its hosts to the
// project's policy (allowlist and off alike) for the requests carrying
// it, over plain http and CONNECT; requests without it get the project's
// own policy; its hosts are still checked against project_may_allow.
func TestEgressSetupGrant(t *testing.T) {
	for _, mode := range []string{api.NetworkAllowlist, api.NetworkOff} {
		f := newFixture(t, &api.ProjectNetwork{Mode: mode})
		f.srv.o.Public = func(netip.Addr) bool { return true } // public.test stands in for the internet
		tok, revoke := f.srv.Grant(f.proj.ID, []string{"public.test:" + f.port})
		if code, body := f.getAs(t, SetupUser, tok, "http://public.test:PORT/simple/"); code != 200 || body != "index of packages\n" {
			t.Fatalf("%s: with the setup credential: %d %q", mode, code, body)
		}
		if code, _ := f.get(t, "http://public.test:PORT/simple/"); code != http.StatusForbidden {
			t.Fatalf("%s: without the credential: %d, want 403", mode, code)
		}
		if code, _ := f.getAs(t, SetupUser, tok, "http://other.test:PORT/"); code != http.StatusForbidden {
			t.Fatalf("%s: a host the setup was not given: %d, want 403", mode, code)
		}
		auth := base64.StdEncoding.EncodeToString([]byte(SetupUser + ":" + tok))
		if got := f.raw(t, "CONNECT public.test:"+f.port+" HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n"); got != "HTTP/1.1 200 Connection Established" {
			t.Fatalf("%s: CONNECT with the credential: %q", mode, got)
		}
		revoke()
	}
	// Entries outside project_may_allow are not granted.
	f := newFixture(t, &api.ProjectNetwork{Mode: api.NetworkAllowlist})
	pol, err := Compile(Config{ProjectMayAllow: []string{"*.example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.o.Policy = pol
	f.srv.o.Public = func(netip.Addr) bool { return true }
	tok, revoke := f.srv.Grant(f.proj.ID, []string{"public.test:" + f.port})
	defer revoke()
	if code, _ := f.getAs(t, SetupUser, tok, "http://public.test:PORT/"); code != http.StatusForbidden {
		t.Fatalf("a granted host outside project_may_allow: %d, want 403", code)
	}
}

// TestAttackSetupCredentialReplay: root in the container captured the
// setup's proxy credential (from its /proc/PID/environ while it ran) and
// uses it after the setup ended; or forges one; or uses another
// project's live one through its own socket. Defences: a credential is
// valid only between Grant and its revoke (the exec's end), only on its
// project's socket, and only its exact random token counts: each is
// refused with 407 and reported, the credential never in the answer.
func TestAttackSetupCredentialReplay(t *testing.T) {
	f := newFixture(t, &api.ProjectNetwork{Mode: api.NetworkAllowlist})
	f.srv.o.Public = func(netip.Addr) bool { return true }
	tok, revoke := f.srv.Grant(f.proj.ID, []string{"public.test:" + f.port})
	if code, _ := f.getAs(t, SetupUser, tok, "http://public.test:PORT/"); code != 200 {
		t.Fatalf("the live credential: %d", code)
	}
	revoke()
	code, body := f.getAs(t, SetupUser, tok, "http://public.test:PORT/")
	if code != http.StatusProxyAuthRequired || strings.Contains(body, tok) {
		t.Fatalf("the credential replayed after its setup ended: %d %q, want 407", code, body)
	}
	if !f.blocked.has("GET public.test:" + f.port) {
		t.Fatalf("the replay was not reported: %v", f.blocked.seen)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(SetupUser + ":" + tok))
	if got := f.raw(t, "CONNECT public.test:"+f.port+" HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 407") {
		t.Fatalf("CONNECT with the replayed credential: %q", got)
	}

	live, revoke2 := f.srv.Grant(f.proj.ID, []string{"public.test:" + f.port})
	defer revoke2()
	other, revoke3 := f.srv.Grant("fedcba9876543210", []string{"public.test:" + f.port})
	defer revoke3()
	for _, c := range []struct{ user, pass string }{
		{SetupUser, strings.Repeat("0", 64)}, // forged
		{SetupUser, live[:63]},               // a prefix of the live one
		{SetupUser, live + "0"},              // longer
		{SetupUser, ""},                      // empty
		{"root", live},                       // another user name
		{SetupUser, other},                   // another project's live credential
		{SetupUser, strings.ToUpper(live)},   // another spelling
	} {
		if code, body := f.getAs(t, c.user, c.pass, "http://public.test:PORT/"); code != http.StatusProxyAuthRequired || (c.pass != "" && strings.Contains(body, c.pass)) {
			t.Errorf("credential %s:%.8s…: %d %q, want 407", c.user, c.pass, code, body)
		}
	}
	// The live one still works: the refusals revoked nothing.
	if code, _ := f.getAs(t, SetupUser, live, "http://public.test:PORT/"); code != 200 {
		t.Fatalf("the live credential after the attempts: %d", code)
	}
}
