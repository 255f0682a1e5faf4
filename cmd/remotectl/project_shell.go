package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"remote/api"
)

// runProjectShell opens the project's terminal WebSocket and connects it
// to this terminal (raw mode while it runs; window changes are sent as
// resize frames).
func runProjectShell(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("project shell"), args, "NAME")
	if err != nil {
		return err
	}
	in, out := os.Stdin, os.Stdout
	cols, rows := 80, 24
	if ws, err := unix.IoctlGetWinsize(int(out.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		cols, rows = int(ws.Col), int(ws.Row)
	}
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", e.Client.Socket())
	}, HandshakeTimeout: 30 * time.Second}
	h := http.Header{}
	h.Set(api.HeaderUser, e.Client.User())
	u := fmt.Sprintf("ws://remoted/v1/projects/%s/terminal?cols=%d&rows=%d", url.PathEscape(args[0]), cols, rows)
	conn, resp, err := d.DialContext(ctx, u, h)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("open terminal of project %q: %s", args[0], resp.Status)
		}
		return fmt.Errorf("open terminal of project %q: %w", args[0], err)
	}
	defer conn.Close()
	if restore, err := makeRaw(int(in.Fd())); err == nil {
		defer restore()
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			ws, err := unix.IoctlGetWinsize(int(out.Fd()), unix.TIOCGWINSZ)
			if err != nil {
				continue
			}
			b, _ := json.Marshal(api.TerminalControl{Type: "resize", Cols: int(ws.Col), Rows: int(ws.Row)})
			_ = conn.WriteMessage(websocket.TextMessage, b)
		}
	}()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				if conn.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return nil // the shell ended
		}
		if _, err := out.Write(data); err != nil {
			return err
		}
	}
}

// makeRaw puts the terminal fd in raw mode and returns the restorer.
func makeRaw(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
