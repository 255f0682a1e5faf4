package config

import (
	"crypto/x509"
	"encoding/pem"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
)

// ImageServer is one [lxd.image_servers."<name>"] table: an image server
// a project's image may name as "<name>:<alias>" (LXD pulls the image
// from it and caches it). Its URL comes only from here: a user names the
// server, never an address.
type ImageServer struct {
	// URL is https://host[:port][/path] of the server.
	URL string `toml:"url" doc:"https://host[:port][/path] of the image server, e.g. https://images.linuxcontainers.org"`
	// Protocol is simplestreams ("" means it) or lxd.
	Protocol string `toml:"protocol" doc:"simplestreams (the default; images.linuxcontainers.org) or lxd (another LXD's public images)"`
	// Certificate is a PEM file holding the server's TLS certificate:
	// the daemon and LXD then accept that certificate only.
	Certificate string `toml:"certificate" doc:"PEM file of the server's TLS certificate, pinned (only it is accepted); empty trusts the system's CAs"`
}

// ImageServerProtocols returns the protocols [lxd.image_servers] accepts.
func ImageServerProtocols() []string { return []string{"simplestreams", "lxd"} }

// CertificatePEM reads the pinned certificate file ("" when none).
func (s ImageServer) CertificatePEM() (string, error) {
	if s.Certificate == "" {
		return "", nil
	}
	b, err := os.ReadFile(s.Certificate)
	return string(b), err
}

func validateImageServers(ps *problems, servers map[string]ImageServer) {
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		base := keyPath("lxd", "image_servers", name)
		if !nameRE.MatchString(name) || len(name) > 64 {
			ps.add(ErrInvalidValue, base, "%q is not an image server name: letters, digits, '_', '.', '-' (no ':'), at most 64", name)
		}
		s := servers[name]
		p := appendKey(base, "url")
		u, err := url.Parse(s.URL)
		switch {
		case s.URL == "":
			ps.add(ErrInvalidValue, p, "must not be empty: the image server's https URL, e.g. https://images.linuxcontainers.org")
		case err != nil:
			ps.add(ErrInvalidValue, p, "not a URL")
		case u.Scheme != "https":
			ps.add(ErrInvalidValue, p, "must use https (LXD pulls images over TLS only)")
		case u.Host == "":
			ps.add(ErrInvalidValue, p, "has no host")
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			ps.add(ErrInvalidValue, p, "must be https://host[:port][/path] only, without user, query or fragment")
		}
		if s.Protocol != "" && !slices.Contains(ImageServerProtocols(), s.Protocol) {
			ps.add(ErrInvalidValue, appendKey(base, "protocol"), "%q is not one of %s", s.Protocol, strings.Join(ImageServerProtocols(), ", "))
		}
		if s.Certificate != "" {
			p := appendKey(base, "certificate")
			requireAbs(ps, p, s.Certificate, false)
			if pemText, err := s.CertificatePEM(); err != nil {
				ps.add(ErrInvalidValue, p, "cannot read %s: %v", s.Certificate, err)
			} else if !pemCertificate(pemText) {
				ps.add(ErrInvalidValue, p, "%s holds no PEM CERTIFICATE", s.Certificate)
			}
		}
	}
}

// pemCertificate reports whether text holds a parsable PEM CERTIFICATE.
func pemCertificate(text string) bool {
	rest := []byte(text)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" {
			_, err := x509.ParseCertificate(b.Bytes)
			return err == nil
		}
	}
}

// validateImageRef checks that an image naming a server ("<server>:<alias>")
// names a configured one.
func validateImageRef(ps *problems, p []pathElem, image string, servers map[string]ImageServer) {
	server, _, remote := strings.Cut(image, ":")
	if !remote || strings.Contains(image, "://") {
		if remote {
			ps.add(ErrInvalidValue, p, "%q: name an image server of [lxd.image_servers] (\"<server>:<alias>\"), not a URL", image)
		}
		return
	}
	if _, ok := servers[server]; !ok {
		ps.add(ErrInvalidValue, p, "%q names the image server %q, which [lxd.image_servers] does not configure", image, server)
	}
}
