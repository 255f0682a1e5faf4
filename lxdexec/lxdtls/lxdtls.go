// Package lxdtls owns how lxdexec trusts an LXD server over HTTPS: the
// TLS 1.3 client configuration with the client certificate, and the pin of
// the server's certificate (an LXD server's certificate is usually
// self-signed, so the leaf is pinned exactly instead of a chain being
// verified; a mismatch is a PinError).
//
// It imports only the standard library, and must never import lxdexec
// (which imports it) or anything else of this module.
package lxdtls

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
)

// Config builds the TLS 1.3 client configuration for the server(s) url
// (which labels errors): client certificate, HTTP/1.1 only (no h2, which
// breaks websocket upgrades), server pinned by the SHA-256 of its
// certificate when serverCert (a PEM file) is given.
func Config(url, clientCert, clientKey, serverCert string) (*tls.Config, error) {
	if clientCert == "" || clientKey == "" {
		return nil, fmt.Errorf("lxd: https %s needs client_cert and client_key", url)
	}
	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		return nil, fmt.Errorf("lxd: load client certificate %s: %w", clientCert, err)
	}
	conf := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		NextProtos:   []string{"http/1.1"},
	}
	if serverCert == "" {
		return conf, nil
	}
	pemBytes, err := os.ReadFile(serverCert)
	if err != nil {
		return nil, fmt.Errorf("lxd: read server certificate: %w", err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("lxd: server certificate %s: no PEM CERTIFICATE block", serverCert)
	}
	want := sha256.Sum256(block.Bytes)
	// The server certificate is usually self-signed, so chain verification
	// is replaced by an exact pin of the leaf.
	conf.InsecureSkipVerify = true
	conf.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return fmt.Errorf("lxd: server sent no certificate")
		}
		got := sha256.Sum256(raw[0])
		if got != want {
			return &PinError{got: hex.EncodeToString(got[:]), want: hex.EncodeToString(want[:]), file: serverCert}
		}
		return nil
	}
	return conf, nil
}

// PinError is a server certificate that is not the pinned one. It is
// never a reason to fail over to another member.
type PinError struct{ got, want, file string }

func (e *PinError) Error() string {
	return fmt.Sprintf("lxd: server certificate %s does not match pinned %s (%s); "+
		"pin the certificate the server presents: every member of an LXD cluster presents "+
		"the cluster's (/var/lib/lxd/cluster.crt), a standalone server its server.crt", e.got, e.want, e.file)
}
