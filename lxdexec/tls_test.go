package lxdexec_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"remote/lxdexec"
)

// TestHTTPSClientHello checks what the HTTPS client offers, against an
// in-process TLS server: TLS 1.3 only, no h2 (it breaks websocket
// upgrades), a client certificate, and the pinned server certificate.
func TestHTTPSClientHello(t *testing.T) {
	var mu sync.Mutex
	var hello *tls.ClientHelloInfo
	var peerCerts int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peerCerts = len(r.TLS.PeerCertificates)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "sync", "status_code": 200,
			"metadata": map[string]any{"auth": "trusted", "api_extensions": []string{},
				"environment": map[string]any{"server": "lxd", "server_version": "5.0.2"}}})
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			mu.Lock()
			hello = h
			mu.Unlock()
			return nil, nil
		}}
	srv.StartTLS()
	defer srv.Close()

	dir := t.TempDir()
	certPEM, keyPEM := clientCert(t)
	files := map[string][]byte{
		"client.crt": certPEM, "client.key": keyPEM,
		"server.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := lxdexec.Options{URL: srv.URL, ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey: filepath.Join(dir, "client.key"), ServerCert: filepath.Join(dir, "server.crt")}
	if _, err := lxdexec.Connect(context.Background(), opts); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	mu.Lock()
	if slices.Contains(hello.SupportedProtos, "h2") {
		t.Errorf("client offers h2: %v", hello.SupportedProtos)
	}
	for _, v := range hello.SupportedVersions {
		if v < tls.VersionTLS13 {
			t.Errorf("client offers TLS version %#x below 1.3", v)
		}
	}
	if peerCerts != 1 {
		t.Errorf("server saw %d client certificates, want 1", peerCerts)
	}
	mu.Unlock()

	// Pinning: the same server with a different pinned certificate fails.
	opts.ServerCert = filepath.Join(dir, "client.crt")
	_, err := lxdexec.Connect(context.Background(), opts)
	if !errors.Is(err, lxdexec.ErrUnreachable) || !strings.Contains(err.Error(), "does not match pinned") {
		t.Fatalf("Connect with wrong pin = %v, want an unreachable pin mismatch", err)
	}
}

// TestHTTPSFailover lists three members: one refusing connections, one
// presenting another certificate than the pinned one, and a live one.
// The client passes over the dead member to the live one and uses it from
// then on, but never over a pin mismatch (that is not a dead member).
func TestHTTPSFailover(t *testing.T) {
	answer := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "sync", "status_code": 200,
				"metadata": map[string]any{"auth": "trusted", "api_extensions": []string{},
					"environment": map[string]any{"server": "lxd", "server_version": "5.0.2",
						"server_name": name, "server_clustered": true}}})
		}
	}
	live := httptest.NewTLSServer(answer("m3"))
	defer live.Close()
	other := httptest.NewUnstartedServer(answer("m2"))
	otherCert, otherKey := clientCert(t) // a certificate of its own
	pair, err := tls.X509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	other.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	other.StartTLS()
	defer other.Close()
	dead := httptest.NewTLSServer(answer("m1"))
	deadURL := dead.URL
	dead.Close() // connection refused from now on

	dir := t.TempDir()
	certPEM, keyPEM := clientCert(t)
	files := map[string][]byte{
		"client.crt": certPEM, "client.key": keyPEM,
		"cluster.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: live.Certificate().Raw}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := lxdexec.Options{URLs: []string{deadURL, live.URL}, ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey: filepath.Join(dir, "client.key"), ServerCert: filepath.Join(dir, "cluster.crt")}
	c, err := lxdexec.Connect(context.Background(), opts)
	if err != nil {
		t.Fatalf("Connect(dead, live): %v", err)
	}
	if c.URL() != live.URL {
		t.Fatalf("member in use %q, want the live one %q", c.URL(), live.URL)
	}
	srv, err := c.Server(context.Background())
	if err != nil || srv.ServerName != "m3" {
		t.Fatalf("Server() = %+v, %v; want m3", srv, err)
	}
	if got := strings.Join(c.URLs(), " "); got != deadURL+" "+live.URL {
		t.Fatalf("URLs() = %q", got)
	}

	opts.URLs = []string{other.URL, live.URL}
	_, err = lxdexec.Connect(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "does not match pinned") ||
		!strings.Contains(err.Error(), "/var/lib/lxd/cluster.crt") {
		t.Fatalf("Connect(wrong certificate, live) = %v; want the pin mismatch naming cluster.crt", err)
	}
}
