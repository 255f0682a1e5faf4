package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// realCertPEM returns a new self-signed certificate's PEM.
func realCertPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "images"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestImageServers: [lxd.image_servers] tables parse (the usual images
// entry as an inline table, a pinned certificate file) and an image
// naming a configured server passes as [lxd] image and in allowed_images.
func TestImageServers(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "srv.crt")
	if err := os.WriteFile(cert, []byte(realCertPEM(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, "[lxd]\nimage = \"local-test:remote-dev\"\n[lxd.image_servers]\nimages = { url = \"https://images.linuxcontainers.org\", protocol = \"simplestreams\" }\n"+
		"[lxd.image_servers.local-test]\nurl = \"https://127.0.0.1:8443/x\"\nprotocol = \"lxd\"\ncertificate = \""+cert+"\"\n"+
		"[projects]\nallowed_images = [\"images:debian/12\", \"busybox\"]\n")
	if got := c.LXD.ImageServers["images"]; got != (ImageServer{URL: "https://images.linuxcontainers.org", Protocol: "simplestreams"}) {
		t.Errorf("images: %+v", got)
	}
	if got := c.LXD.ImageServers["local-test"]; got.URL != "https://127.0.0.1:8443/x" || got.Protocol != "lxd" || got.Certificate != cert {
		t.Errorf("local-test: %+v", got)
	}
	if pemText, err := c.LXD.ImageServers["local-test"].CertificatePEM(); err != nil || !strings.HasPrefix(pemText, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("certificate: %v", err)
	}
	if len(Default().LXD.ImageServers) != 0 {
		t.Errorf("default image servers: %v", Default().LXD.ImageServers)
	}
}

// TestImageServersInvalid: each bad value is an error naming its key.
func TestImageServersInvalid(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"[lxd.image_servers.a]\nurl = \"http://h\"\n":                                    `remoted.toml:2: [lxd.image_servers.a] url: must use https (LXD pulls images over TLS only)`,
		"[lxd.image_servers.a]\nprotocol = \"lxd\"\n":                                    `remoted.toml:1: [lxd.image_servers.a] url: must not be empty: the image server's https URL, e.g. https://images.linuxcontainers.org`,
		"[lxd.image_servers.a]\nurl = \"https://u:p@h\"\n":                               `remoted.toml:2: [lxd.image_servers.a] url: must be https://host[:port][/path] only, without user, query or fragment`,
		"[lxd.image_servers.a]\nurl = \"https://h\"\nprotocol = \"oci\"\n":               `remoted.toml:3: [lxd.image_servers.a] protocol: "oci" is not one of simplestreams, lxd`,
		"[lxd.image_servers.a]\nurl = \"https://h\"\ncertificate = \"/nope\"\n":          `remoted.toml:3: [lxd.image_servers.a] certificate: cannot read /nope: open /nope: no such file or directory`,
		"[lxd.image_servers.a]\nurl = \"https://h\"\ncertificate = \"" + notPEM + "\"\n": `remoted.toml:3: [lxd.image_servers.a] certificate: ` + notPEM + ` holds no PEM CERTIFICATE`,
		"[lxd]\nimage = \"images:debian/12\"\n":                                          `remoted.toml:2: [lxd] image: "images:debian/12" names the image server "images", which [lxd.image_servers] does not configure`,
		"[lxd]\nimage = \"https://h/x\"\n":                                               `remoted.toml:2: [lxd] image: "https://h/x": name an image server of [lxd.image_servers] ("<server>:<alias>"), not a URL`,
		"[projects]\nallowed_images = [\"busybox\", \"evil:x\"]\n":                       `remoted.toml:2: [projects] allowed_images[1]: "evil:x" names the image server "evil", which [lxd.image_servers] does not configure`,
	} {
		if got := parseError(t, in); got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}
