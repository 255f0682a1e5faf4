package lxdexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"remote/lxdexec/lxdtls"
)

// Options says how to reach LXD. With URL empty the local Unix socket is
// used; with URL set (https://host:8443) the client authenticates with
// ClientCert/ClientKey and pins ServerCert.
type Options struct {
	// Socket is the Unix socket path. "" discovers it: $LXD_SOCKET,
	// $LXD_DIR/unix.socket, /var/snap/lxd/common/lxd/unix.socket,
	// /var/lib/lxd/unix.socket (then Incus' $INCUS_SOCKET, $INCUS_DIR,
	// /var/lib/incus/unix.socket, /run/incus/unix.socket).
	Socket string
	// URL selects HTTPS, e.g. "https://10.0.0.5:8443".
	URL string
	// URLs lists several members of one LXD cluster (HTTPS, same client
	// certificate and pin), tried in order: the client uses the first
	// member that answers and fails over to the next on a connection
	// error. URL, when also set, is tried first.
	URLs []string
	// ClientCert and ClientKey are PEM file paths of the client identity
	// (required with URL). ServerCert is the PEM path of the server's
	// certificate; the connection is accepted only when the server presents
	// exactly that certificate (SHA-256 pin). With ServerCert empty the
	// server must chain to the system roots.
	ClientCert, ClientKey, ServerCert string
	// Project is sent as ?project= on every instance and event request.
	Project string
	// Target is sent as ?target= on instance creation, only when the
	// server is clustered (a standalone server refuses it).
	Target string
	// DialTimeout bounds one TCP connection attempt over HTTPS (default
	// 5 s), so that a member that is gone is passed over quickly.
	DialTimeout time.Duration
}

// Server is what GET /1.0 reports, as cached at Connect.
type Server struct {
	APIExtensions          []string
	APIVersion             string
	Auth                   string // "trusted" or "untrusted"
	ServerVersion          string // e.g. "5.0.2"
	ServerName             string // hostname, or member name when clustered
	Server                 string // "lxd" or "incus"
	Clustered              bool
	CertificateFingerprint string // SHA-256 of the server cert's DER, lowercase hex
	Certificate            string // server certificate, PEM
	Addresses              []string
	Config                 map[string]any
}

// HasExtension reports whether the server lists the API extension name.
func (s *Server) HasExtension(name string) bool {
	return slices.Contains(s.APIExtensions, name)
}

// Client talks to one LXD server. It is safe for concurrent use and holds no
// context; every I/O method takes one.
type Client struct {
	http *http.Client
	ws   *websocket.Dialer
	// members are the servers to try, in order (one for a Unix socket or
	// a single URL); cur indexes the one in use.
	members []member
	cur     atomic.Int32
	project string
	target  string
	server  Server
	// hdr is the file header prefix: "X-LXD-" or "X-Incus-".
	hdr string
	// beforeWait, set by tests only, runs between an operation's request
	// and the wait for it.
	beforeWait func(opURL string)
}

// socketCandidates lists the Unix sockets tried by discovery, in order.
func socketCandidates() []string {
	var c []string
	if s := os.Getenv("LXD_SOCKET"); s != "" {
		c = append(c, s)
	}
	if d := os.Getenv("LXD_DIR"); d != "" {
		c = append(c, filepath.Join(d, "unix.socket"))
	}
	c = append(c, "/var/snap/lxd/common/lxd/unix.socket", "/var/lib/lxd/unix.socket")
	if s := os.Getenv("INCUS_SOCKET"); s != "" {
		c = append(c, s)
	}
	if d := os.Getenv("INCUS_DIR"); d != "" {
		c = append(c, filepath.Join(d, "unix.socket"))
	}
	return append(c, "/var/lib/incus/unix.socket", "/run/incus/unix.socket")
}

// DiscoverSocket returns the first existing socket of the discovery order
// documented on Options.Socket.
func DiscoverSocket() (string, error) {
	cands := socketCandidates()
	for _, p := range cands {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("lxd: no unix socket found (tried %s): %w", strings.Join(cands, ", "), ErrUnreachable)
}

// handshakeTimeout bounds a TLS handshake and a websocket upgrade (exec
// streams, events). LXD answers upgrades late when busy (over 10 s was
// seen on a loaded 2-core host); the caller's context still bounds the
// whole call.
const handshakeTimeout = 30 * time.Second

// Connect builds a client and reads GET /1.0 once (extensions, server kind,
// clustering, certificate fingerprint). A client the server does not trust
// gets an error matching ErrForbidden.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	c := &Client{project: opts.Project, target: opts.Target, hdr: "X-LXD-"}
	const bufSize = 128 << 10
	urls := opts.URLs
	if opts.URL != "" {
		urls = append([]string{opts.URL}, urls...)
	}
	if len(urls) == 0 {
		sock := opts.Socket
		if sock == "" {
			var err error
			if sock, err = DiscoverSocket(); err != nil {
				return nil, err
			}
		}
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		c.http = &http.Client{Transport: &http.Transport{
			DialContext:         dial,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}}
		c.ws = &websocket.Dialer{NetDialContext: dial, HandshakeTimeout: handshakeTimeout,
			ReadBufferSize: bufSize, WriteBufferSize: bufSize}
		c.members = []member{{base: "http://lxd", wsBase: "ws://lxd"}}
	} else {
		for _, raw := range urls {
			u, err := url.Parse(raw)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				return nil, fmt.Errorf("lxd: url %q: want https://host[:port]", raw)
			}
			if u.Port() == "" {
				u.Host = net.JoinHostPort(u.Hostname(), "8443")
			}
			c.members = append(c.members, member{url: raw, base: "https://" + u.Host, wsBase: "wss://" + u.Host})
		}
		opts.URL = strings.Join(urls, ", ") // labels errors
		tlsConf, err := lxdtls.Config(opts.URL, opts.ClientCert, opts.ClientKey, opts.ServerCert)
		if err != nil {
			return nil, err
		}
		dialTimeout := opts.DialTimeout
		if dialTimeout <= 0 {
			dialTimeout = 5 * time.Second
		}
		dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
		c.http = &http.Client{Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			TLSClientConfig:     tlsConf,
			ForceAttemptHTTP2:   false,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
			TLSHandshakeTimeout: handshakeTimeout,
			DisableCompression:  true,
			Proxy:               http.ProxyFromEnvironment,
		}}
		c.ws = &websocket.Dialer{NetDialContext: dialer.DialContext, TLSClientConfig: tlsConf.Clone(),
			HandshakeTimeout: handshakeTimeout, ReadBufferSize: bufSize, WriteBufferSize: bufSize,
			Proxy: http.ProxyFromEnvironment}
	}
	// The first member that answers (send fails over on connection
	// errors, starting with the first).
	if _, err := c.refreshServer(ctx); err != nil {
		return nil, err
	}
	if c.server.Auth != "" && c.server.Auth != "trusted" {
		// Over HTTPS an unknown certificate still reads GET /1.0; say so
		// now rather than with a 403 on the first real call.
		return nil, fmt.Errorf("lxd %s: client certificate %s is not trusted by the server (auth %q): %w",
			opts.URL, opts.ClientCert, c.server.Auth, ErrForbidden)
	}
	if c.server.Server == "incus" {
		c.hdr = "X-Incus-"
	}
	return c, nil
}

// CertificateFingerprint returns the SHA-256 fingerprint (lowercase hex of
// the DER) of the first certificate in a PEM blob, the form LXD uses.
func CertificateFingerprint(pemBytes []byte) (string, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", fmt.Errorf("lxd: no PEM CERTIFICATE block: %w", ErrProtocol)
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:]), nil
}

type serverJSON struct {
	APIExtensions []string       `json:"api_extensions"`
	APIVersion    string         `json:"api_version"`
	Auth          string         `json:"auth"`
	Config        map[string]any `json:"config"`
	Environment   struct {
		Addresses              []string `json:"addresses"`
		Certificate            string   `json:"certificate"`
		CertificateFingerprint string   `json:"certificate_fingerprint"`
		Server                 string   `json:"server"`
		ServerClustered        bool     `json:"server_clustered"`
		ServerName             string   `json:"server_name"`
		ServerVersion          string   `json:"server_version"`
	} `json:"environment"`
}

func (c *Client) refreshServer(ctx context.Context) (*Server, error) {
	s, err := c.Server(ctx)
	if err != nil {
		return nil, err
	}
	c.server = *s
	return s, nil
}

// Server reads GET /1.0 again and returns it. The extensions, server kind
// and clustering cached at Connect are not changed.
func (c *Client) Server(ctx context.Context) (*Server, error) {
	var sj serverJSON
	if err := c.syncJSON(ctx, http.MethodGet, "/1.0", nil, &sj); err != nil {
		return nil, err
	}
	env := sj.Environment
	s := &Server{
		APIExtensions: sj.APIExtensions, APIVersion: sj.APIVersion, Auth: sj.Auth,
		ServerVersion: env.ServerVersion, ServerName: env.ServerName,
		Server: nonEmpty(env.Server, "lxd"), Clustered: env.ServerClustered,
		CertificateFingerprint: env.CertificateFingerprint, Certificate: env.Certificate,
		Addresses: env.Addresses, Config: sj.Config,
	}
	return s, nil
}

// Close releases the client's idle connections. In-flight requests and
// exec or event streams are not affected.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// HasExtension reports whether the server listed the API extension at
// Connect.
func (c *Client) HasExtension(name string) bool { return c.server.HasExtension(name) }

// Response is one decoded LXD answer (LXD's sync, async or error envelope).
type Response struct {
	Type       string          // "sync", "async" or "error"
	HTTPStatus int             // the HTTP status line's code
	StatusCode int             // the envelope's status_code
	Operation  string          // operation URL for async answers
	Metadata   json.RawMessage // endpoint specific; the operation for async
	ETag       string          // the Etag header, for If-Match
}

type envelope struct {
	Type       string          `json:"type"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation"`
	ErrorCode  int             `json:"error_code"`
	Error      string          `json:"error"`
	Metadata   json.RawMessage `json:"metadata"`
}

// maxErrorBody bounds how much of a non-JSON error body is kept.
const maxErrorBody = 4 << 10

// decodeResponse decodes an LXD envelope from body. An error envelope, or a
// non-JSON body with an HTTP error status, becomes *Error. method and path
// only label errors.
func decodeResponse(method, path string, httpStatus int, body io.Reader) (*Response, error) {
	raw, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("lxd %s %s: read response: %w", method, path, err)
	}
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&env); err != nil || env.Type == "" {
		if httpStatus >= 400 {
			msg := strings.TrimSpace(string(raw[:min(len(raw), maxErrorBody)]))
			if msg == "" {
				msg = http.StatusText(httpStatus)
			}
			return nil, &Error{Method: method, Path: path, StatusCode: httpStatus, Message: msg}
		}
		return nil, fmt.Errorf("lxd %s %s: http %d: undecodable response: %w", method, path, httpStatus, ErrProtocol)
	}
	r := &Response{Type: env.Type, HTTPStatus: httpStatus, StatusCode: env.StatusCode,
		Operation: env.Operation, Metadata: env.Metadata}
	switch env.Type {
	case "sync", "async":
		if httpStatus >= 400 {
			return nil, &Error{Method: method, Path: path, StatusCode: httpStatus, Message: env.Status}
		}
		return r, nil
	case "error":
		code := env.ErrorCode
		if code == 0 {
			code = httpStatus
		}
		return r, &Error{Method: method, Path: path, StatusCode: code, Message: env.Error}
	}
	return nil, fmt.Errorf("lxd %s %s: unknown response type %q: %w", method, path, env.Type, ErrProtocol)
}

// Query sends one request to path (e.g. "/1.0/certificates"; a query string
// may be included) with body marshalled as JSON (nil for none), and decodes
// the envelope. It does not add ?project= and does not wait for operations;
// it is the escape hatch for endpoints without a typed method.
func (c *Client) Query(ctx context.Context, method, path string, body any, etag string) (*Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("lxd %s %s: encode request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	return c.do(ctx, method, path, rd, etag, "application/json", nil)
}

// do performs one request and decodes the envelope.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, etag, ctype string, hdr http.Header) (*Response, error) {
	resp, err := c.send(ctx, method, path, body, etag, ctype, hdr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r, err := decodeResponse(method, stripQuery(path), resp.StatusCode, resp.Body)
	if r != nil {
		r.ETag = resp.Header.Get("Etag")
	}
	return r, err
}

// member is one server the client may talk to.
type member struct {
	url    string // as configured; "" for the Unix socket
	base   string // "http://lxd" or "https://host:port"
	wsBase string // "ws://lxd" or "wss://host:port"
}

// Project returns the LXD project the client works in ("": the default).
func (c *Client) Project() string { return c.project }

// URL returns the configured URL of the member in use ("" over the Unix
// socket).
func (c *Client) URL() string { return c.members[c.cur.Load()].url }

// URLs returns every configured member URL, in order.
func (c *Client) URLs() []string {
	out := make([]string, 0, len(c.members))
	for _, m := range c.members {
		if m.url != "" {
			out = append(out, m.url)
		}
	}
	return out
}

// failoverable reports whether err, from one member, lets the request be
// tried on the next: the connection could not be made (refused, timed out,
// no route, TLS handshake failed before anything was sent), or a read-only
// request lost its connection.
func failoverable(err error, method string) bool {
	var pin *lxdtls.PinError
	if !errors.Is(err, ErrUnreachable) || errors.As(err, &pin) {
		return false
	}
	if isDialError(err) {
		return true
	}
	return method == http.MethodGet || method == http.MethodHead
}

// isDialError reports whether err is a failed connection attempt (nothing
// of the request was sent).
func isDialError(err error) bool {
	var pin *lxdtls.PinError
	if errors.As(err, &pin) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// dialWS connects a websocket to path (which starts with /1.0), trying the
// member in use first and, when it cannot be reached, the others in order;
// the member that answered becomes the one in use.
func (c *Client) dialWS(ctx context.Context, path string) (*websocket.Conn, *http.Response, error) {
	start := int(c.cur.Load())
	n := len(c.members)
	var (
		conn *websocket.Conn
		resp *http.Response
		err  error
	)
	for i := range n {
		idx := (start + i) % n
		conn, resp, err = c.ws.DialContext(ctx, c.members[idx].wsBase+path, nil)
		if err == nil {
			if idx != start {
				c.cur.CompareAndSwap(int32(start), int32(idx))
			}
			return conn, resp, nil
		}
		if resp != nil || ctx.Err() != nil || !isDialError(err) {
			return conn, resp, err
		}
	}
	return conn, resp, err
}

// send performs one request and returns the raw response. With several
// members, a connection error moves on to the next member (see
// failoverable); the member that answered is used from then on.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, etag, ctype string, hdr http.Header) (*http.Response, error) {
	start := int(c.cur.Load())
	n := len(c.members)
	var last error
	for i := range n {
		idx := (start + i) % n
		if i > 0 && body != nil {
			// Only a body that can be replayed is sent to another member:
			// a bytes.Reader (every JSON request), rewound, or one that a
			// failed dial never read.
			if br, ok := body.(*bytes.Reader); ok {
				_, _ = br.Seek(0, io.SeekStart)
			} else if _, closer := body.(io.Closer); closer || !isDialError(last) {
				return nil, last
			}
		}
		resp, err := c.sendTo(ctx, idx, method, path, body, etag, ctype, hdr)
		if err == nil {
			if idx != start {
				c.cur.CompareAndSwap(int32(start), int32(idx))
			}
			return resp, nil
		}
		last = err
		if n == 1 || ctx.Err() != nil || !failoverable(err, method) {
			return nil, err
		}
	}
	return nil, last
}

// send sends to member idx.
func (c *Client) sendTo(ctx context.Context, idx int, method, path string, body io.Reader, etag, ctype string, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.members[idx].base+path, body)
	if err != nil {
		return nil, fmt.Errorf("lxd %s %s: %w", method, stripQuery(path), err)
	}
	if body != nil && ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if etag != "" {
		req.Header.Set("If-Match", etag)
	}
	req.Header.Set("User-Agent", "remote-lxdexec/1")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lxd %s %s: %w", method, stripQuery(path), ctx.Err())
		}
		return nil, fmt.Errorf("lxd %s %s: %w: %w", method, stripQuery(path), ErrUnreachable, err)
	}
	return resp, nil
}

// syncJSON performs a request that must answer sync and decodes metadata
// into out (if non-nil).
func (c *Client) syncJSON(ctx context.Context, method, path string, body, out any) error {
	r, err := c.Query(ctx, method, path, body, "")
	if err != nil {
		return err
	}
	if r.Type != "sync" {
		return fmt.Errorf("lxd %s %s: want sync response, got %q: %w", method, stripQuery(path), r.Type, ErrProtocol)
	}
	if out != nil && len(r.Metadata) > 0 && string(r.Metadata) != "null" {
		if err := json.Unmarshal(r.Metadata, out); err != nil {
			return fmt.Errorf("lxd %s %s: decode metadata: %v: %w", method, stripQuery(path), err, ErrProtocol)
		}
	}
	return nil
}

// instancePath builds /1.0/instances[/name]suffix with the query and
// ?project=.
func (c *Client) instancePath(name string, suffix string, query url.Values) string {
	p := "/1.0/instances"
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	p += suffix
	return p + c.query(query)
}

// query renders query parameters plus ?project=.
func (c *Client) query(q url.Values) string {
	if c.project != "" {
		if q == nil {
			q = url.Values{}
		}
		q.Set("project", c.project)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func stripQuery(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i]
	}
	return p
}

// errorFromHandshake turns a failed websocket handshake into an error,
// decoding LXD's envelope when there is one.
func errorFromHandshake(path string, resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("lxd websocket %s: %w: %w", path, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	_, derr := decodeResponse("GET", path, resp.StatusCode, resp.Body)
	if derr != nil && !errors.Is(derr, ErrProtocol) {
		return fmt.Errorf("lxd websocket %s: %w", path, derr)
	}
	return fmt.Errorf("lxd websocket %s: http %d: %w", path, resp.StatusCode, err)
}
