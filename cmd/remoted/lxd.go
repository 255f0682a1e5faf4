package main

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/config"
	"remote/daemon"
	"remote/lxdexec"
)

// lxdLink holds the LXD client, or why there is none: remoted starts in
// degraded mode when LXD is unreachable and keeps retrying in the
// background, so loose chats are served meanwhile.
type lxdLink struct {
	opts    lxdexec.Options
	log     hclog.Logger
	metrics *daemon.Metrics

	mu     sync.Mutex
	client *lxdexec.Client
	err    error
}

var _ daemon.LXDStatus = (*lxdLink)(nil)

func lxdOptions(c config.LXD) lxdexec.Options {
	return lxdexec.Options{Socket: c.Socket, URL: c.URL, ClientCert: c.ClientCert, ClientKey: c.ClientKey,
		ServerCert: c.ServerCert, Project: c.Project, Target: c.Target}
}

// connect tries once, bounded by timeout.
func (l *lxdLink) connect(ctx context.Context, timeout time.Duration) *lxdexec.Client {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := lxdexec.Connect(ctx, l.opts)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.client, l.err = c, err
	if err != nil {
		l.metrics.LXDError()
	}
	return c
}

// retry reconnects every interval until it succeeds or ctx ends.
func (l *lxdLink) retry(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if c := l.connect(ctx, 10*time.Second); c != nil {
				l.log.Info("LXD reachable again; project chats available after a restart")
				return
			}
		}
	}
}

// Status reports reachability and the server version for GET /v1/info.
func (l *lxdLink) Status(ctx context.Context) api.LXDInfo {
	l.mu.Lock()
	c, err := l.client, l.err
	l.mu.Unlock()
	if c == nil {
		msg := "not connected"
		if err != nil {
			msg = err.Error()
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
	return api.LXDInfo{Reachable: true, ServerVersion: srv.ServerVersion, Server: srv.Server}
}
