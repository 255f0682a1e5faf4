package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
)

// HeaderUser names the caller to the daemon (docs/api.md, Callers).
const HeaderUser = api.HeaderUser

// ErrDaemonUnreachable classes failures to reach the daemon's socket.
var ErrDaemonUnreachable = errors.New("daemon not reachable")

// strippedHeaders never reach the daemon: browser credentials stay here,
// the caller's name comes only from the session, and the daemon refuses
// requests that carry a browser Origin unless marked as relayed by the
// frontend (api.HeaderFrontend); the Origin check was done here.
var strippedHeaders = []string{
	HeaderUser, api.HeaderFrontend, "Cookie", "Authorization", "Origin", "Referer",
	"Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User",
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
}

type userKey struct{}

func withUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

func userFrom(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userKey{}).(string)
	return u, ok && u != ""
}

// newProxy returns a reverse proxy to the daemon's Unix socket. Streams
// (NDJSON, SSE) are flushed at once and WebSocket upgrades pass through.
func newProxy(socket string, log hclog.Logger) http.Handler {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "remoted"
			pr.Out.Host = "remoted"
			for _, h := range strippedHeaders {
				pr.Out.Header.Del(h)
			}
			if u, ok := userFrom(pr.In.Context()); ok {
				pr.Out.Header.Set(HeaderUser, u)
			}
			pr.Out.Header.Set(api.HeaderFrontend, api.FrontendRemoteWeb)
		},
		Transport:     tr,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("Set-Cookie")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return // the browser went away
			}
			err = fmt.Errorf("remote-web: %w at %s: %w", ErrDaemonUnreachable, socket, err)
			log.Error("proxy to daemon failed", "path", r.URL.Path, "error", err)
			writeError(w, http.StatusBadGateway, api.CodeUnavailable, err.Error())
		},
	}
}
