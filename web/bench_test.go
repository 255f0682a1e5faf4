package web

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/internal/testkit"
)

// startEventDaemon serves /ws/chat/{id} on a Unix socket: for every frame
// the client sends, it answers with one chat event stamped with the time it
// was written, so the reader measures one-way delivery with no queueing.
func startEventDaemon(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "rwb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws/chat/{id}", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		var seq int64
		text := strings.Repeat("streamed assistant text ", 4)
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
			seq++
			ev := api.Event{Seq: seq, Type: api.EventAssistantText, MessageID: "m1", Text: text,
				T: time.Now().UnixNano()} // T carries nanoseconds here, for the benchmark only
			if err := c.WriteJSON(ev); err != nil {
				return
			}
		}
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return sock
}

func measureDelivery(b *testing.B, conn *websocket.Conn) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	next := []byte(`{"type":"next"}`)
	b.ResetTimer()
	for range b.N {
		if err := conn.WriteMessage(websocket.TextMessage, next); err != nil {
			b.Fatal(err)
		}
		var ev api.Event
		if err := conn.ReadJSON(&ev); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(time.Unix(0, ev.T)))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkEventDelivery measures the one-way latency of a chat event from
// the daemon's WebSocket to the client, directly on the Unix socket and
// through remote-web (login, cookie, origin check, reverse proxy over TCP).
// Run with -benchtime=10000x for p50/p99 over 10k events.
func BenchmarkEventDelivery(b *testing.B) {
	b.Run("direct-socket", func(b *testing.B) {
		sock := startEventDaemon(b)
		d := websocket.Dialer{NetDial: func(string, string) (net.Conn, error) { return net.Dial("unix", sock) }}
		conn, _, err := d.Dial("ws://remoted/ws/chat/abcdef012345?since=0", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		measureDelivery(b, conn)
	})
	b.Run("through-remote-web", func(b *testing.B) {
		sock := startEventDaemon(b)
		s, err := New(Options{Socket: sock, Users: []User{{Name: testUser, PasswordHash: testHash(b, testPassword)}}})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(s)
		defer hs.Close()
		c := noRedirectClient()
		form := url.Values{"username": {testUser}, "password": {testPassword}}
		resp, err := c.PostForm(hs.URL+"/login", form)
		if err != nil || resp.StatusCode != http.StatusSeeOther {
			b.Fatalf("login: %v %v", resp, err)
		}
		resp.Body.Close()
		d := websocket.Dialer{Jar: c.Jar}
		conn, _, err := d.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+"/ws/chat/abcdef012345?since=0",
			http.Header{"Origin": {hs.URL}})
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		measureDelivery(b, conn)
	})
}

// BenchmarkIdleMemory starts the real remote-web binary with one user and
// reports its resident memory once it listens, and again after one login
// and one proxied request.
func BenchmarkIdleMemory(b *testing.B) {
	dir := b.TempDir()
	bin := testkit.Binaries(b, "remote-web")[0]
	sock := startEventDaemon(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\n\n[web]\nlisten = %q\n\n[[web.users]]\nname = %q\npassword_hash = %q\n",
		sock, addr, testUser, testHash(b, testPassword))
	cfgPath := filepath.Join(dir, "remote.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	var idle, used float64
	for range b.N {
		cmd := exec.Command(bin, "-config", cfgPath)
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() && !strings.Contains(sc.Text(), "listening") { //nolint:revive // empty-block: the work is in the condition
		}
		go func() {
			for sc.Scan() {
			}
		}()
		idle = rssKiB(b, cmd.Process.Pid)
		c := noRedirectClient()
		resp, err := c.PostForm("http://"+addr+"/login", url.Values{"username": {testUser}, "password": {testPassword}})
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		used = rssKiB(b, cmd.Process.Pid)
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	b.ReportMetric(idle, "idle-RSS-KiB")
	b.ReportMetric(used, "after-login-RSS-KiB")
}

func rssKiB(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
	}
	b.Fatal("no VmRSS in /proc status")
	return 0
}

// noRedirectClient has a cookie jar, follows no redirect, and reaches
// the test names (*.localhost, *.example.com, *.example.net, *.lan) on 127.0.0.1, as the
// tests' Chromium does.
func noRedirectClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && testName(host) {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Jar: jar, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// testName reports whether host is one of the names tests map to
// 127.0.0.1.
func testName(host string) bool {
	for _, suffix := range []string{".localhost", ".example.com", ".example.net", ".lan"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}
