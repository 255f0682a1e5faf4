// Command remote-web is the browser frontend of Remote: it reads the same
// TOML file as remoted, authenticates browser users ([[web.users]]) and
// proxies /v1/* and /ws/* to the daemon's Unix socket ([daemon] socket),
// serving the embedded page on [web] listen. Flags and wiring only; the
// work is in package web.
//
//	remote-web -config /etc/remote/remoted.toml
//	remote-web -config var/remote-web.toml -socket var/remoted.sock   # beside make run
//	remote-web -hash-password < password.txt
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"remote/config"
	"remote/internal/version"
	"remote/web"
)

// defaultConfig is where remoted's packaging puts the shared config file.
const defaultConfig = "/etc/remote/remoted.toml"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("remote-web", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", defaultConfig, "TOML config shared with remoted")
	hash := fs.Bool("hash-password", false, "read a password from stdin and print a bcrypt hash for [[web.users]] password_hash")
	listen := fs.String("listen", "", "override [web] listen (host:port)")
	socket := fs.String("socket", "", "override [daemon] socket (e.g. ./var/remoted.sock under make run)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "remote-web", version.String())
		return 0
	}
	if *hash {
		if err := hashPassword(stdin, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "remote-web:", err)
			return 1
		}
		return 0
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, "remote-web:", err)
		return 1
	}
	level := hclog.LevelFromString(cfg.Daemon.LogLevel)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name: "remote-web", Level: level, Output: stderr,
		JSONFormat: cfg.Daemon.LogFormat == "json",
	})
	if *listen != "" {
		cfg.Web.Listen = *listen
	}
	if *socket != "" {
		abs, err := filepath.Abs(*socket)
		if err != nil {
			fmt.Fprintf(stderr, "remote-web: -socket %q: %v\n", *socket, err)
			return 2
		}
		cfg.Daemon.Socket = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("stopped", "error", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg config.Config, log hclog.Logger) error {
	tls := cfg.Web.TLSCert != "" && cfg.Web.TLSKey != ""
	opts := webOptions(cfg, log)
	if len(opts.Users) == 0 {
		log.Warn("no [[web.users]] configured: nobody can log in")
	}
	h, err := web.New(opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Web.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Web.Listen, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 2)
	go func() {
		if tls {
			errc <- srv.ServeTLS(ln, cfg.Web.TLSCert, cfg.Web.TLSKey)
			return
		}
		errc <- srv.Serve(ln)
	}()
	psrv, err := servePreviews(ctx, cfg, h, log, errc)
	if err != nil {
		_ = srv.Close()
		return err
	}
	log.Info("listening", "addr", ln.Addr().String(), "tls", tls, "cookie_secure", opts.Secure,
		"allowed_hosts", strings.Join(opts.AllowedHosts, ","), "daemon_socket", cfg.Daemon.Socket, "users", len(opts.Users))
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	log.Info("stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if psrv != nil {
		_ = psrv.Shutdown(shutdown)
	}
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// webOptions maps the config onto web.Options. The session cookie is
// Secure per [web] cookie_secure (default: when remote-web serves TLS);
// the Host names served are [web] allowed_hosts, plus the listen host when
// it is a DNS name (localhost and IP addresses are always served);
// [web] trusted_proxies are the proxies whose X-Forwarded-* are believed.
func webOptions(cfg config.Config, log hclog.Logger) web.Options {
	users := make([]web.User, 0, len(cfg.Web.Users))
	for _, u := range cfg.Web.Users {
		users = append(users, web.User{Name: u.Name, PasswordHash: u.PasswordHash})
	}
	hosts := slices.Clone(cfg.Web.AllowedHosts)
	if host, _, err := net.SplitHostPort(cfg.Web.Listen); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			hosts = append(hosts, host)
		}
	}
	var proxies []netip.Prefix
	for _, p := range cfg.Web.TrustedProxies {
		if pp, err := config.ParsePrefix(p); err == nil { // validated by config
			proxies = append(proxies, pp)
		}
	}
	return web.Options{
		Socket:         cfg.Daemon.Socket,
		Users:          users,
		SessionTTL:     cfg.Web.SessionTTL.Duration,
		Secure:         cfg.Web.IsCookieSecure(),
		AllowedHosts:   hosts,
		TrustedProxies: proxies,
		Logger:         log,
		PreviewURL:     cfg.Web.PreviewOrigin(),
	}
}

// hashPassword reads one line from stdin (without echo on a terminal) and
// prints its bcrypt hash.
func hashPassword(stdin *os.File, stdout, stderr io.Writer) error {
	var pw []byte
	if t, err := unix.IoctlGetTermios(int(stdin.Fd()), unix.TCGETS); err == nil {
		fmt.Fprint(stderr, "Password: ")
		noEcho := *t
		noEcho.Lflag &^= unix.ECHO
		if err := unix.IoctlSetTermios(int(stdin.Fd()), unix.TCSETS, &noEcho); err != nil {
			return fmt.Errorf("turn off echo on stdin: %w", err)
		}
		defer func() {
			_ = unix.IoctlSetTermios(int(stdin.Fd()), unix.TCSETS, t)
			fmt.Fprintln(stderr)
		}()
	}
	line, err := bufio.NewReaderSize(stdin, 256).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read password from stdin: %w", err)
	}
	pw = []byte(strings.TrimRight(line, "\r\n"))
	h, err := web.HashPassword(pw)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, h)
	return nil
}
