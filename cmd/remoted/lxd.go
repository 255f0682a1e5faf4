package main

import (
	"context"
	"fmt"
	"time"

	"remote/api"
	"remote/config"
	"remote/daemon"
	"remote/lxdexec"
	"remote/provisioning/lxdconn"
)

// lxdLink reports LXD's reachability for GET /v1/info. It shares the
// daemon's one LXD connection (lxdconn.Conn): remoted starts in
// degraded mode when LXD is unreachable, and the projects' Run keeps dialing
// in the background (Conn.Dial), so loose chats are served meanwhile and
// project chats work as soon as LXD answers, without a restart.
type lxdLink struct {
	conn    *lxdconn.Conn
	metrics *daemon.Metrics
	err     error  // why the first connection failed; read only while conn has no client
	pin     string // [lxd] server_cert, "" when not pinned
}

var _ daemon.LXDStatus = (*lxdLink)(nil)

func lxdOptions(c config.LXD) lxdexec.Options {
	return lxdexec.Options{Socket: c.Socket, URL: c.URL, URLs: c.URLs, ClientCert: c.ClientCert, ClientKey: c.ClientKey,
		ServerCert: c.ServerCert, Project: c.Project, Target: c.Target}
}

// dialLXD tries once, bounded by timeout; the link it returns is degraded
// (no client yet) when that fails.
func dialLXD(ctx context.Context, opts lxdexec.Options, timeout time.Duration, metrics *daemon.Metrics) *lxdLink {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := lxdexec.Connect(ctx, opts)
	if err != nil {
		metrics.LXDError()
	}
	return &lxdLink{conn: lxdconn.NewConn(c), metrics: metrics, err: err, pin: opts.ServerCert}
}

// Status reports reachability and the server version for GET /v1/info.
func (l *lxdLink) Status(ctx context.Context) api.LXDInfo {
	c := l.conn.Client()
	if c == nil {
		msg := "not connected"
		if l.err != nil {
			msg = l.err.Error()
		}
		return api.LXDInfo{Reachable: false, Error: msg}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	srv, err := c.Server(ctx)
	if err != nil {
		l.metrics.LXDError()
		return api.LXDInfo{Reachable: false, Error: err.Error()}
	}
	info := api.LXDInfo{Reachable: true, ServerVersion: srv.ServerVersion, Server: srv.Server, URL: c.URL(),
		Clustered: srv.Clustered}
	if srv.Clustered {
		info.Member = srv.ServerName
	}
	if l.pin != "" {
		// The connection was accepted, so the server presented exactly
		// the pinned certificate.
		fp := srv.CertificateFingerprint
		if len(fp) > 12 {
			fp = fp[:12]
		}
		what := "the server's certificate"
		if srv.Clustered {
			what = "the cluster certificate every member presents"
		}
		info.Pin = fmt.Sprintf("%s matches %s (sha256 %s…)", l.pin, what, fp)
	}
	return info
}
