package lxdimage

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"remote/internal/errdefs"
	"remote/internal/testkit/simplestreams"
	"remote/lxdexec"
)

func TestParseRef(t *testing.T) {
	for in, want := range map[string]Ref{
		"busybox":               {Alias: "busybox"},
		"ubuntu/24.04":          {Alias: "ubuntu/24.04"},
		"images:debian/12":      {Server: "images", Alias: "debian/12"},
		"local-test:remote-dev": {Server: "local-test", Alias: "remote-dev"},
		"b5e98c25424c24a058ca761e47fac1e3157e00933c3c3d11e651d905470dba46": {Alias: "b5e98c25424c24a058ca761e47fac1e3157e00933c3c3d11e651d905470dba46"},
	} {
		got, err := ParseRef(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"https://127.0.0.1:8443/x": `invalid image "https://127.0.0.1:8443/x": an image server is named by its [lxd.image_servers] name ("<server>:<alias>"), never given by URL`,
		"127.0.0.1:8443:busybox":   `invalid image "127.0.0.1:8443:busybox": want an alias or fingerprint`,
		"evil:127.0.0.1:8443":      `invalid image "evil:127.0.0.1:8443": want an alias or fingerprint`,
		":busybox":                 `invalid image ":busybox": "" is not an image server name`,
		"images:":                  `invalid image "images:": want an alias or fingerprint`,
		"images:../x":              `invalid image "images:../x": want an alias or fingerprint`,
		"images:/x":                `invalid image "images:/x": want an alias or fingerprint`,
		"":                         `invalid image "": want an alias or fingerprint`,
		"a b":                      `invalid image "a b": want an alias or fingerprint`,
	} {
		_, err := ParseRef(in)
		if !errors.Is(err, ErrBadRef) || !errdefs.IsInvalidArgument(err) || !strings.HasPrefix(err.Error(), msg) {
			t.Errorf("ParseRef(%q): %v, want %s", in, err, msg)
		}
	}
}

// FuzzParseRef: whatever the input, ParseRef never panics; what it
// accepts prints back as the input, names a server without ':' or '/',
// and is never a URL.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"busybox", "images:debian/12", "https://h/x", "a:b:c", ":x", "x:", "evil:127.0.0.1:1", "images:../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			return
		}
		if r.String() != s || strings.ContainsAny(r.Server, ":/") || strings.Contains(r.Alias, ":") || strings.Contains(s, "://") || r.Alias == "" {
			t.Fatalf("ParseRef(%q) = %+v", s, r)
		}
	})
}

func testServer(t *testing.T) (*simplestreams.Server, *Servers) {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "img.tar.gz")
	if err := os.WriteFile(tarball, []byte("only its hash is read"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := simplestreams.New(t, simplestreams.Image{Alias: "busybox", Tarball: tarball})
	return srv, NewServers(map[string]Server{"local-test": {URL: srv.URL, Protocol: ProtocolSimpleStreams, Certificate: srv.CertPEM}})
}

// TestServersCheck: an alias the simplestreams index lists (also in its
// <alias>/<arch> form) passes; one it does not is ErrNoSuchImage naming
// the server and the alias; a server not configured is ErrUnknownServer
// naming the configured ones. The source LXD gets pulls from the
// configured URL with the pinned certificate.
func TestServersCheck(t *testing.T) {
	srv, servers := testServer(t)
	ctx := context.Background()
	for _, ok := range []string{"local-test:busybox", "local-test:busybox/amd64"} {
		if err := servers.Check(ctx, nil, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	err := servers.Check(ctx, nil, "local-test:nope")
	if !errors.Is(err, ErrNoSuchImage) || err.Error() != `image "local-test:nope": no such image alias in LXD: image server "local-test" has no alias "nope"` {
		t.Errorf("unknown alias: %v", err)
	}
	err = servers.Check(ctx, nil, "images:debian/12")
	if !errors.Is(err, ErrUnknownServer) || !errdefs.IsInvalidArgument(err) ||
		err.Error() != `image "images:debian/12": no such image server configured: "images" ([lxd.image_servers]; configured: local-test)` {
		t.Errorf("unknown server: %v", err)
	}
	src, err := servers.Source("local-test:busybox")
	if err != nil || src != (lxdexec.InstanceSource{Type: "image", Mode: "pull", Server: srv.URL, Protocol: "simplestreams", Alias: "busybox", Certificate: srv.CertPEM}) {
		t.Errorf("source: %+v %v", src, err)
	}
	if src, err := servers.Source("busybox"); err != nil || src != (lxdexec.InstanceSource{Type: "image", Alias: "busybox"}) {
		t.Errorf("local source: %+v %v", src, err)
	}
	// The index is reused: three look-ups of a listed alias, one fetch.
	n := len(srv.Requests())
	_ = servers.Check(ctx, nil, "local-test:busybox")
	if got := len(srv.Requests()); got != n {
		t.Errorf("a listed alias fetched the index again: %v", srv.Requests())
	}
}

// TestAttackImageServerWrongCertificate: a server at the configured
// address whose certificate is not the pinned one (a server
// impersonating it), or one trusted by no system authority when none is
// pinned: ErrServerUnavailable saying so; no HTTP request reaches it.
func TestAttackImageServerWrongCertificate(t *testing.T) {
	srv, _ := testServer(t)
	_, other := simplestreams.SelfSigned(t)
	for pin, want := range map[string]string{
		other: "its TLS certificate is not the pinned one ([lxd.image_servers] certificate)",
		"":    "certificate signed by unknown authority",
	} {
		servers := NewServers(map[string]Server{"local-test": {URL: srv.URL, Certificate: pin}})
		err := servers.Check(context.Background(), nil, "local-test:busybox")
		if !errors.Is(err, ErrServerUnavailable) || !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), want) ||
			!strings.HasPrefix(err.Error(), `image "local-test:busybox": image server "local-test": unreachable or untrusted: GET `) {
			t.Errorf("pinned %v: %v", pin != "", err)
		}
	}
	if reqs := srv.Requests(); len(reqs) != 0 {
		t.Fatalf("requests over an untrusted connection: %v", reqs)
	}
}

// TestServersUnreachable: a configured server nobody listens on is
// ErrServerUnavailable (the caller answers 503), within FetchTimeout.
func TestServersUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	servers := NewServers(map[string]Server{"gone": {URL: "https://" + addr}})
	err = servers.Check(context.Background(), nil, "gone:busybox")
	if !errors.Is(err, ErrServerUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("unreachable: %v", err)
	}
}
