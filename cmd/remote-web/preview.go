package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/web"
)

// servePreviews serves the preview origin on [web] preview_listen (with
// the page's TLS certificate when it has one); nil when previews are off.
// Its end is reported on errc.
func servePreviews(ctx context.Context, cfg config.Config, h *web.Server, log hclog.Logger, errc chan<- error) (*http.Server, error) {
	if cfg.Web.PreviewListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Web.PreviewListen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (previews): %w", cfg.Web.PreviewListen, err)
	}
	srv := &http.Server{
		Handler:           h.PreviewHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		var err error
		if cfg.Web.TLSCert != "" && cfg.Web.TLSKey != "" {
			err = srv.ServeTLS(ln, cfg.Web.TLSCert, cfg.Web.TLSKey)
		} else {
			err = srv.Serve(ln)
		}
		if err != http.ErrServerClosed {
			errc <- fmt.Errorf("previews: %w", err)
		}
	}()
	log.Info("serving previews", "addr", ln.Addr().String(), "origin", cfg.Web.PreviewOrigin())
	return srv, nil
}
