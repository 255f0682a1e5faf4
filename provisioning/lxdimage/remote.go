package lxdimage

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Bounds of one look-up on an image server: the whole of it, and the
// bytes of the simplestreams index and of one products file
// (images.linuxcontainers.org's is some megabytes).
const (
	FetchTimeout    = 20 * time.Second
	MaxIndexBytes   = 1 << 20
	MaxProductBytes = 64 << 20
)

// ParseCertificate returns the certificate of a PEM block (the first
// CERTIFICATE), for pinning an image server's.
func ParseCertificate(pemText string) (*x509.Certificate, error) {
	rest := []byte(pemText)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM CERTIFICATE block")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// httpClient returns a client for srv: TLS only, trusting exactly the
// pinned certificate when srv has one (the system's authorities
// otherwise), following redirects only within srv's host.
func httpClient(srv Server) (*http.Client, error) {
	base, err := url.Parse(srv.URL)
	if err != nil || base.Scheme != "https" || base.Host == "" {
		return nil, fmt.Errorf("url %q is not https://host[:port][/path]", srv.URL)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if srv.Certificate != "" {
		pinned, err := ParseCertificate(srv.Certificate)
		if err != nil {
			return nil, fmt.Errorf("pinned certificate: %w", err)
		}
		// The pin replaces the chain and name checks, as LXD's own
		// certificate option does: that certificate, no other.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, pinned.Raw) {
				return errors.New("its TLS certificate is not the pinned one ([lxd.image_servers] certificate)")
			}
			return nil
		}
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: cfg, TLSHandshakeTimeout: 10 * time.Second,
		ResponseHeaderTimeout: FetchTimeout, MaxIdleConns: 1, IdleConnTimeout: time.Second}
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 3 || req.URL.Scheme != "https" || req.URL.Host != base.Host {
			return errors.New("redirected away from the configured server")
		}
		return nil
	}}, nil
}

// fetchAliases returns the image aliases srv serves for containers, with
// their "<alias>/<arch>" forms as LXD offers them: the simplestreams
// index and its image products files, or (protocol lxd) alias alone
// when the server has it.
func fetchAliases(ctx context.Context, srv Server, alias string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	cl, err := httpClient(srv)
	if err != nil {
		return nil, err
	}
	defer cl.CloseIdleConnections()
	base := strings.TrimSuffix(srv.URL, "/")
	if srv.protocol() == ProtocolLXD {
		return lxdAlias(ctx, cl, base, alias)
	}
	var index struct {
		Index map[string]struct {
			DataType string   `json:"datatype"`
			Path     string   `json:"path"`
			Products []string `json:"products"`
		} `json:"index"`
	}
	if err := getJSON(ctx, cl, base+"/streams/v1/index.json", MaxIndexBytes, &index); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range index.Index {
		if e.DataType != "image-downloads" || len(e.Products) == 0 {
			continue
		}
		if e.Path == "" || strings.HasPrefix(e.Path, "/") || strings.Contains(e.Path, "..") || strings.Contains(e.Path, ":") ||
			strings.ContainsAny(e.Path, "?#\\") {
			return nil, fmt.Errorf("index.json: products path %q is not a path below the server", e.Path)
		}
		var products struct {
			Products map[string]struct {
				Aliases  string `json:"aliases"`
				Arch     string `json:"arch"`
				Versions map[string]struct {
					Items map[string]struct {
						FileType string `json:"ftype"`
					} `json:"items"`
				} `json:"versions"`
			} `json:"products"`
		}
		if err := getJSON(ctx, cl, base+"/"+e.Path, MaxProductBytes, &products); err != nil {
			return nil, err
		}
		for _, p := range products.Products {
			container := false
			for _, v := range p.Versions {
				for _, it := range v.Items {
					container = container || it.FileType == "lxd_combined.tar.gz" || it.FileType == "lxd.tar.xz"
				}
			}
			if !container {
				continue
			}
			for _, a := range strings.Split(p.Aliases, ",") {
				if a = strings.TrimSpace(a); a != "" {
					out[a] = true
					out[a+"/"+p.Arch] = true
				}
			}
		}
	}
	return out, nil
}

// lxdAlias asks an LXD image server for one public alias.
func lxdAlias(ctx context.Context, cl *http.Client, base, alias string) (map[string]bool, error) {
	var meta json.RawMessage
	err := getJSON(ctx, cl, base+"/1.0/images/aliases/"+url.PathEscape(alias), MaxIndexBytes, &meta)
	var st statusError
	switch {
	case errors.As(err, &st) && (st == http.StatusNotFound || st == http.StatusForbidden):
		return map[string]bool{}, nil
	case err != nil:
		return nil, err
	}
	return map[string]bool{alias: true}, nil
}

type statusError int

func (s statusError) Error() string { return fmt.Sprintf("HTTP %d", int(s)) }

// getJSON GETs u and decodes at most max bytes of its JSON body into v.
func getJSON(ctx context.Context, cl *http.Client, u string, max int64, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "remoted")
	resp, err := cl.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the operator's: named by the server's name instead
		}
		return fmt.Errorf("GET %s: %w", pathOf(u), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %w", pathOf(u), statusError(resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", pathOf(u), err)
	}
	if int64(len(body)) > max {
		return fmt.Errorf("GET %s: larger than %d bytes", pathOf(u), max)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: not JSON of an image server: %w", pathOf(u), err)
	}
	return nil
}

func pathOf(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Path
	}
	return u
}
