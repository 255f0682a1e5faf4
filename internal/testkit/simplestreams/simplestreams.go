// Package simplestreams is an image server for tests: an HTTPS server on
// loopback (its own self-signed certificate, written to a PEM file for
// [lxd.image_servers] certificate) serving a real simplestreams index —
// streams/v1/index.json and the products file LXD's simplestreams client
// reads — for LXD unified image tarballs (ftype lxd_combined.tar.gz, the
// tarball's SHA-256 as fingerprint), and the tarballs themselves. It
// records every request, so a test sees what LXD or the daemon fetched.
//
//	srv := simplestreams.New(t, simplestreams.Image{Alias: "busybox", Tarball: simplestreams.UniqueBusybox(t)})
//	// [lxd.image_servers.local-test] url = srv.URL, certificate = srv.CertFile
//
// It is test support only: it imports testkit and the standard library,
// and must never be imported by product code.
package simplestreams

import (
	"archive/tar"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"remote/internal/testkit"
)

// Image is one image the server offers: a unified LXD image tarball
// (metadata.yaml and rootfs/ in one .tar.gz) under Alias.
type Image struct {
	Alias   string
	Tarball string // path
}

// Server is a running test image server.
type Server struct {
	// URL is https://127.0.0.1:PORT/<random>: the random path keeps LXD's
	// own cache of simplestreams indexes (by URL) from answering for an
	// earlier server that had the same port.
	URL string
	// CertFile is the PEM file of the server's certificate; CertPEM its
	// text.
	CertFile, CertPEM string

	prefix string
	images []served
	mu     sync.Mutex
	reqs   []string
}

type served struct {
	Image
	fp   string
	size int64
}

// New starts a server offering images, stopped when the test ends.
func New(t testing.TB, images ...Image) *Server {
	t.Helper()
	cert, certPEM := SelfSigned(t)
	s := &Server{CertPEM: certPEM, prefix: "/" + randomHex(t, 8)}
	for _, im := range images {
		fp, size := hashFile(t, im.Tarball)
		s.images = append(s.images, served{Image: im, fp: fp, size: size})
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	s.URL = hs.URL + s.prefix
	s.CertFile = filepath.Join(t.TempDir(), "image-server.crt")
	if err := os.WriteFile(s.CertFile, []byte(certPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// Fingerprint returns the fingerprint (SHA-256) of the image of alias.
func (s *Server) Fingerprint(alias string) string {
	for _, im := range s.images {
		if im.Alias == alias {
			return im.fp
		}
	}
	return ""
}

// Requests returns the paths requested so far (without the URL's random
// prefix), in order.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// ImagePath is the path a tarball is served under.
func ImagePath(fp string) string { return "images/" + fp + ".lxd_combined.tar.gz" }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, s.prefix)
	s.mu.Lock()
	s.reqs = append(s.reqs, p)
	s.mu.Unlock()
	if r.Method != http.MethodGet && r.Method != http.MethodHead || p == r.URL.Path {
		http.NotFound(w, r)
		return
	}
	switch p {
	case "/streams/v1/index.json":
		writeJSON(w, s.index())
		return
	case "/streams/v1/images.json":
		writeJSON(w, s.products())
		return
	}
	for _, im := range s.images {
		if p == "/"+ImagePath(im.fp) {
			f, err := os.Open(im.Tarball)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer f.Close()
			w.Header().Set("Content-Type", "application/octet-stream")
			http.ServeContent(w, r, filepath.Base(p), time.Time{}, f)
			return
		}
	}
	http.NotFound(w, r)
}

func (s *Server) productKey(im served) string {
	return "remote-test:" + strings.ReplaceAll(im.Alias, "/", "-") + ":" + runtime.GOARCH + ":default"
}

// index is streams/v1/index.json (simplestreams index:1.0).
func (s *Server) index() any {
	keys := []string{}
	for _, im := range s.images {
		keys = append(keys, s.productKey(im))
	}
	return map[string]any{"format": "index:1.0", "updated": "Thu, 01 Jan 2026 00:00:00 +0000", "index": map[string]any{
		"images": map[string]any{"datatype": "image-downloads", "path": "streams/v1/images.json", "format": "products:1.0", "products": keys},
	}}
}

// products is streams/v1/images.json (products:1.0): one product per
// image, one version whose one item is the unified tarball. LXD's client
// takes a version name starting with a date (YYYYMMDD) and, for
// lxd_combined.tar.gz, the item's sha256 as the fingerprint.
func (s *Server) products() any {
	products := map[string]any{}
	for _, im := range s.images {
		products[s.productKey(im)] = map[string]any{
			"aliases": im.Alias, "arch": runtime.GOARCH, "os": "Remote", "release": "test", "release_title": "test",
			"variant": "default",
			"versions": map[string]any{"20260101_0000": map[string]any{"items": map[string]any{
				"lxd_combined.tar.gz": map[string]any{"ftype": "lxd_combined.tar.gz", "sha256": im.fp, "size": im.size, "path": ImagePath(im.fp)},
			}}},
		}
	}
	return map[string]any{"content_id": "images", "datatype": "image-downloads", "format": "products:1.0", "products": products}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// SelfSigned returns a new self-signed server certificate for 127.0.0.1
// and "remote-test-images" (LXD checks a pinned certificate against its
// first DNS name), and its PEM.
func SelfSigned(t testing.TB) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "remote-test-images"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"remote-test-images"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// UniqueBusybox exports LXD's busybox test image (`lxc image export`)
// and returns the path of a copy with one more file, /etc/remote-test-nonce
// holding a random value (Nonce reads it back): a tarball with a
// fingerprint LXD has never seen, so creating from it must download it.
func UniqueBusybox(t testing.TB) (path, nonce string) {
	t.Helper()
	testkit.LXD(t)
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(t, "no lxc binary to export the busybox image: %v", err)
	}
	dir := t.TempDir()
	out, err := exec.Command("lxc", "image", "export", testkit.TestImage, filepath.Join(dir, "busybox")).CombinedOutput()
	if err != nil {
		testkit.Missing(t, "lxc image export %s: %v: %s", testkit.TestImage, err, out)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "busybox*"))
	if len(matches) != 1 {
		t.Fatalf("lxc image export wrote %v, want one unified tarball", matches)
	}
	nonce = randomHex(t, 16)
	path = filepath.Join(dir, "busybox-unique.tar.gz")
	if err := repack(matches[0], path, nonce); err != nil {
		t.Fatalf("repack %s: %v", matches[0], err)
	}
	return path, nonce
}

// repack copies the gzipped tarball src to dst, adding
// rootfs/etc/remote-test-nonce.
func repack(src, dst, nonce string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	zw := gzip.NewWriter(out)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	body := []byte(nonce + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: "rootfs/etc/remote-test-nonce", Mode: 0o644, Size: int64(len(body)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(1767225600, 0)}); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return out.Close()
}

func hashFile(t testing.TB, path string) (string, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(fmt.Errorf("random: %w", err))
	}
	return hex.EncodeToString(b)
}
