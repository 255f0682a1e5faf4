package projectapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
	"remote/provisioning"
)

// previewPattern is the daemon route that reverse-proxies HTTP and
// WebSocket upgrades to a project's port (docs/api.md, Previews).
const previewPattern = "/v1/projects/{name}/ports/{port}/{path...}"

// previewRoutes are the preview route for every method of the table.
func (p *Projects) previewRoutes(route func(method, pattern string, h daemon.HandlerFunc) daemon.Route) []daemon.Route {
	var out []daemon.Route
	for _, m := range daemon.Methods() {
		out = append(out, route(m, previewPattern, p.preview))
	}
	return out
}

var portRE = lazyre.New(`^[1-9][0-9]{0,4}$`)

// previewRequestHeaders never reach a project's app: who the caller is and
// how the request came are the daemon's business.
var previewRequestHeaders = []string{
	api.HeaderUser, api.HeaderFrontend, "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
	"X-Real-Ip",
}

// previewResponseHeaders an app may not send to our callers: ones that
// act beyond the app's own origin (HSTS and Clear-Site-Data reach the
// whole host and so the page; Alt-Svc moves the origin's traffic) or look
// like the daemon's own (X-Remote-*).
var previewResponseHeaders = []string{
	"Strict-Transport-Security", "Clear-Site-Data", "Alt-Svc", "Public-Key-Pins", "Public-Key-Pins-Report-Only",
}

// previewHostSuffix marks the upstream addresses of previews; the dialer
// turns one back into its socket, so a connection only ever reaches the
// socket its address names (and pooled connections never mix projects).
const previewHostSuffix = ".preview.invalid"

// previewTransport dials only the daemon's preview sockets.
func (p *Projects) previewTransport() *http.Transport {
	p.previewOnce.Do(func() {
		dialer := &net.Dialer{Timeout: 5 * time.Second}
		p.previewTr = &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				host, _, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				id, port, ok := strings.Cut(strings.TrimSuffix(host, previewHostSuffix), "-")
				n, perr := strconv.Atoi(port)
				if !ok || !strings.HasSuffix(host, previewHostSuffix) || !store.ValidProjectID(id) || perr != nil {
					return nil, fmt.Errorf("not a preview address: %q", addr)
				}
				socket := p.o.Preparer.PreviewSocket(api.Project{ID: id}, n)
				if socket == "" {
					return nil, errPreviewsOff
				}
				return dialer.DialContext(ctx, "unix", socket)
			},
			MaxIdleConnsPerHost:    8,
			IdleConnTimeout:        30 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
			ResponseHeaderTimeout:  2 * time.Minute,
		}
	})
	return p.previewTr
}

var errPreviewsOff = &daemon.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
	Message: "previews are off: the daemon has no preview directory"}

// preview serves /v1/projects/{name}/ports/{port}/{path...}: the caller's
// project, one of its ports, reverse-proxied (HTTP and WebSocket) to the
// LXD proxy device's socket, which reaches that port on the container's
// loopback.
func (p *Projects) preview(w http.ResponseWriter, r *http.Request) error {
	proj, err := p.lookup(r)
	if err != nil {
		return err
	}
	ps := r.PathValue("port")
	if !portRE.MatchString(ps) {
		return errdefs.InvalidArgument("invalid port %q: a number from 1 to 65535", ps)
	}
	port, _ := strconv.Atoi(ps)
	if !slices.Contains(proj.Ports, port) {
		return fmt.Errorf("port %d is not a port of project %q (its ports: %v; set them with PATCH /v1/projects/%s): %w", port, proj.Name, proj.Ports, proj.Name, errdefs.ErrNotFound)
	}
	if p.o.Preparer.PreviewSocket(proj, port) == "" {
		return errPreviewsOff
	}
	if proj.Status == provisioning.StatusStopped || proj.Status == provisioning.StatusMissing {
		// Known stopped: say so at once rather than racing LXD's proxy
		// device as it goes away (a reset answered 502 under load).
		return notRunning(proj, port)
	}
	// The app's path: what follows the port, escaped as the caller sent it.
	prefix := "/v1/projects/" + proj.Name + "/ports/" + ps
	rawPath, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok {
		rawPath = "/" + r.PathValue("path")
	}
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = proj.ID + "-" + ps + previewHostSuffix
			pr.Out.Host = "localhost:" + ps
			pr.Out.URL.Path, pr.Out.URL.RawPath = r.PathValue("path"), rawPath
			if !strings.HasPrefix(pr.Out.URL.Path, "/") {
				pr.Out.URL.Path = "/" + pr.Out.URL.Path
			}
			for _, h := range previewRequestHeaders {
				pr.Out.Header.Del(h)
			}
		},
		Transport:     p.previewTransport(),
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			for _, h := range previewResponseHeaders {
				resp.Header.Del(h)
			}
			for h := range resp.Header {
				if strings.HasPrefix(strings.ToLower(h), "x-remote-") {
					resp.Header.Del(h)
				}
			}
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { proxyErr = err },
	}
	rp.ServeHTTP(w, r)
	if proxyErr == nil || errors.Is(proxyErr, context.Canceled) {
		return nil
	}
	// The dial's error stays out of the envelope's class: it is the
	// project's state, not LXD's reachability.
	if errors.Is(proxyErr, syscall.ENOENT) || errors.Is(proxyErr, syscall.ECONNREFUSED) {
		return notRunning(proj, port)
	}
	return &daemon.Error{Status: http.StatusBadGateway, Code: api.CodeUnavailable,
		Message: fmt.Sprintf("nothing answered on port %d in project %q's container: %v", port, proj.Name, proxyErr)}
}

// checkPorts rejects ports that are not 1–65535 or repeated.
func checkPorts(ports []int) error {
	seen := map[int]bool{}
	for _, port := range ports {
		if port < 1 || port > 65535 || seen[port] {
			return errdefs.InvalidArgument("invalid or repeated port %d in ports", port)
		}
		seen[port] = true
	}
	return nil
}

// setPorts stores proj's new ports and sets its container's preview
// devices to them (live when it runs).
func (p *Projects) setPorts(ctx context.Context, proj api.Project, ports []int) (api.Project, error) {
	if err := checkPorts(ports); err != nil {
		return api.Project{}, err
	}
	if len(ports) == 0 {
		ports = nil
	}
	updated, err := p.o.Store.UpdateProject(proj.Name, func(pr *api.Project) error {
		if pr.ID != proj.ID {
			return fmt.Errorf("project %q was replaced while its ports were set", proj.Name)
		}
		pr.Ports = ports
		pr.UpdatedAt = time.Now().UTC()
		return nil
	})
	if err != nil {
		return api.Project{}, err
	}
	if err := p.o.Preparer.SyncPreviews(ctx, updated); err != nil {
		return api.Project{}, err
	}
	p.log.Info("project ports set", "project", proj.Name, "ports", fmt.Sprint(ports))
	return updated, nil
}

// notRunning is the answer for a preview of a project whose container is
// not running.
func notRunning(proj api.Project, port int) error {
	return &daemon.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
		Message: fmt.Sprintf("project %q is not running (its container serves port %d only while it runs): start it with POST /v1/projects/%s/start", proj.Name, port, proj.Name)}
}
