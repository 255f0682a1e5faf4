package systemd

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit"
)

// notifySocket is a NOTIFY_SOCKET made by a test: a real datagram socket.
type notifySocket struct {
	t    testing.TB
	conn *net.UnixConn
	name string
}

func listenNotify(t testing.TB, abstract bool) *notifySocket {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify.sock")
	if abstract {
		name = "@remote-test-notify-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{t: t, conn: conn, name: name}
}

// next returns the next datagram, failing the test after a generous wait.
func (s *notifySocket) next() string {
	s.t.Helper()
	msg, ok := s.tryNext(10 * time.Second)
	if !ok {
		s.t.Fatal("no notification arrived")
	}
	return msg
}

func (s *notifySocket) tryNext(wait time.Duration) (string, bool) {
	buf := make([]byte, 4096)
	if err := s.conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		s.t.Fatal(err)
	}
	n, err := s.conn.Read(buf)
	if err != nil {
		return "", false
	}
	return string(buf[:n]), true
}

func TestNotifierSendsStates(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run("abstract="+strconv.FormatBool(abstract), func(t *testing.T) {
			sock := listenNotify(t, abstract)
			t.Setenv("NOTIFY_SOCKET", sock.name)
			n := NewNotifier(testkit.Logger(t, "systemd"))
			if !n.Enabled() {
				t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
			}

			n.Status("opening store")
			if got, want := sock.next(), "STATUS=opening store\n"; got != want {
				t.Errorf("Status sent %q, want %q", got, want)
			}
			n.Ready("serving on /run/remote/remoted.sock")
			if got, want := sock.next(), "READY=1\nSTATUS=serving on /run/remote/remoted.sock\n"; got != want {
				t.Errorf("Ready sent %q, want %q", got, want)
			}
			n.Watchdog()
			if got, want := sock.next(), "WATCHDOG=1\n"; got != want {
				t.Errorf("Watchdog sent %q, want %q", got, want)
			}
			n.Reloading()
			got := sock.next()
			if !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") || !strings.HasSuffix(got, "\n") {
				t.Errorf("Reloading sent %q, want RELOADING=1 and MONOTONIC_USEC", got)
			}
			usec, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(got, "RELOADING=1\nMONOTONIC_USEC="), "\n"), 10, 64)
			if err != nil || usec <= 0 {
				t.Errorf("MONOTONIC_USEC in %q is not a positive integer", got)
			}
			n.Stopping()
			if got, want := sock.next(), "STOPPING=1\n"; got != want {
				t.Errorf("Stopping sent %q, want %q", got, want)
			}
		})
	}
}

func TestStatusCannotInjectFields(t *testing.T) {
	sock := listenNotify(t, false)
	t.Setenv("NOTIFY_SOCKET", sock.name)
	n := NewNotifier(nil)
	n.Status("line one\nREADY=1\r\x00x")
	if got, want := sock.next(), "STATUS=line one READY=1  x\n"; got != want {
		t.Errorf("Status sent %q, want %q", got, want)
	}
	n.Status(strings.Repeat("é", 300)) // 600 bytes: cut at a rune boundary
	got := strings.TrimSuffix(strings.TrimPrefix(sock.next(), "STATUS="), "\n")
	if len(got) > maxStatus || got != strings.Repeat("é", maxStatus/2) {
		t.Errorf("long status cut to %d bytes %q", len(got), got)
	}
}

func TestNotifierOffWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "1000000")
	n := NewNotifier(nil)
	if n.Enabled() || n.WatchdogInterval() != 0 {
		t.Fatalf("Enabled() = %v, WatchdogInterval() = %v; want off", n.Enabled(), n.WatchdogInterval())
	}
	// No-ops, and nothing to crash on.
	n.Ready("x")
	n.Status("x")
	n.Reloading()
	n.Watchdog()
	n.Stopping()

	t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
	if n := NewNotifier(nil); n.Enabled() {
		t.Error("Enabled() = true for an unsupported vsock NOTIFY_SOCKET")
	}
}

func TestNotifierSurvivesVanishedSocket(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("NOTIFY_SOCKET", filepath.Join(dir, "gone.sock"))
	n := NewNotifier(testkit.Logger(t, "systemd"))
	n.Ready("x") // logged, not fatal
	n.Watchdog()

	sock := listenNotify(t, false)
	n.addr = &net.UnixAddr{Name: sock.name, Net: "unixgram"}
	n.Watchdog()
	if got := sock.next(); got != "WATCHDOG=1\n" {
		t.Errorf("after recovery sent %q", got)
	}
}

func TestWatchdogInterval(t *testing.T) {
	pid := os.Getpid()
	tests := []struct {
		name      string
		usec, pid string
		want      time.Duration
		wantErr   bool
	}{
		{"unset", "", "", 0, false},
		{"for anyone", "4000000", "", 2 * time.Second, false},
		{"for us", "3000000", strconv.Itoa(pid), 1500 * time.Millisecond, false},
		{"for another process", "3000000", strconv.Itoa(pid + 1), 0, false},
		{"not a number", "soon", "", 0, true},
		{"zero", "0", "", 0, true},
		{"negative", "-5", "", 0, true},
		{"overflow", "99999999999999999999", "", 0, true},
		{"bad pid", "1000", "me", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := listenNotify(t, false)
			t.Setenv("NOTIFY_SOCKET", sock.name)
			t.Setenv("WATCHDOG_USEC", tt.usec)
			t.Setenv("WATCHDOG_PID", tt.pid)
			if got := NewNotifier(nil).WatchdogInterval(); got != tt.want {
				t.Errorf("WatchdogInterval() = %v, want %v", got, tt.want)
			}
			_, err := watchdogInterval(tt.usec, tt.pid, pid)
			if (err != nil) != tt.wantErr {
				t.Errorf("watchdogInterval(%q, %q) error = %v, want error %v", tt.usec, tt.pid, err, tt.wantErr)
			}
		})
	}
}

func TestUnderJournal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := statOf(t, fi)
	match := strconv.FormatUint(st.dev, 10) + ":" + strconv.FormatUint(st.ino, 10)
	tests := []struct {
		env  string
		want bool
	}{
		{"", false},
		{match, true},
		{strconv.FormatUint(st.dev, 10) + ":" + strconv.FormatUint(st.ino+1, 10), false},
		{"garbage", false},
		{"1:x", false},
	}
	for _, tt := range tests {
		if got := underJournal(tt.env, int(f.Fd())); got != tt.want {
			t.Errorf("underJournal(%q) = %v, want %v", tt.env, got, tt.want)
		}
	}
	t.Setenv("JOURNAL_STREAM", "")
	if UnderJournal() {
		t.Error("UnderJournal() = true with JOURNAL_STREAM empty")
	}
}

// FuzzEnvParsers feeds the environment parsers arbitrary values: they
// never panic, and a watchdog interval is never negative.
func FuzzEnvParsers(f *testing.F) {
	f.Add("30000000", "", "8:1234")
	f.Add("-1", "12", ":")
	f.Add("99999999999999999999", "x", "1:2:3")
	f.Fuzz(func(t *testing.T, usec, pid, journal string) {
		if d, err := watchdogInterval(usec, pid, os.Getpid()); d < 0 || (err != nil && d != 0) {
			t.Fatalf("watchdogInterval(%q, %q) = %v, %v", usec, pid, d, err)
		}
		_ = underJournal(journal, 2)
		if s := statusField(journal); strings.ContainsAny(s, "\n\r\x00") || len(s) > len("STATUS=")+maxStatus {
			t.Fatalf("statusField(%q) = %q: a field separator or over the bound", journal, s)
		}
	})
}
