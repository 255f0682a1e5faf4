package systemd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// Environment variables of the systemd service protocols this package reads.
const (
	envNotifySocket  = "NOTIFY_SOCKET"
	envWatchdogUsec  = "WATCHDOG_USEC"
	envWatchdogPID   = "WATCHDOG_PID"
	envListenPID     = "LISTEN_PID"
	envListenFDs     = "LISTEN_FDS"
	envListenFDNames = "LISTEN_FDNAMES"
	envJournalStream = "JOURNAL_STREAM"
)

// InheritedEnv returns the variables systemd hands the service that belong
// to remoted alone. Child processes (agent CLIs) must not inherit them: a
// child could otherwise talk to the service manager in the daemon's name,
// take the daemon's sockets for its own, or locate the daemon's
// credentials.
func InheritedEnv() []string {
	return []string{
		envNotifySocket, envWatchdogUsec, envWatchdogPID,
		envListenPID, envListenFDs, envListenFDNames,
		"CREDENTIALS_DIRECTORY", "INVOCATION_ID", "MANAGERPID", "SYSTEMD_EXEC_PID",
	}
}

// maxStatus bounds a STATUS= text; systemd shows one line of it.
const maxStatus = 512

// Notifier sends service state to systemd over the $NOTIFY_SOCKET datagram
// socket (sd_notify(3)). When the service does not run under a notify-aware
// manager ($NOTIFY_SOCKET unset) every method is a no-op. A failed send is
// logged, never fatal: systemd's own timeouts handle a daemon that cannot
// report. Safe for concurrent use.
type Notifier struct {
	log      hclog.Logger
	addr     *net.UnixAddr // nil: notification off
	watchdog time.Duration // half of WATCHDOG_USEC; 0: off

	mu     sync.Mutex
	failed bool // the last send failed; the next failure is not logged again
}

// NewNotifier reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID once.
// A path socket or an abstract one ("@name") is supported; anything else
// (such as "vsock:") switches notification off with a warning.
func NewNotifier(log hclog.Logger) *Notifier {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	n := &Notifier{log: log}
	sock := os.Getenv(envNotifySocket)
	switch {
	case sock == "":
		return n
	case strings.HasPrefix(sock, "/") || strings.HasPrefix(sock, "@"):
		// The net package maps a leading '@' to Linux's abstract namespace.
		n.addr = &net.UnixAddr{Name: sock, Net: "unixgram"}
	default:
		log.Warn("unsupported NOTIFY_SOCKET; readiness notification off", "notify_socket", sock)
		return n
	}
	interval, err := watchdogInterval(os.Getenv(envWatchdogUsec), os.Getenv(envWatchdogPID), os.Getpid())
	if err != nil {
		log.Warn("ignoring watchdog settings", "error", err)
	}
	n.watchdog = interval / 2
	return n
}

// watchdogInterval returns WATCHDOG_USEC as a duration when it applies to
// pid (WATCHDOG_PID unset or equal), else 0.
func watchdogInterval(usec, wpid string, pid int) (time.Duration, error) {
	if usec == "" {
		return 0, nil
	}
	u, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || u <= 0 || u > int64(time.Duration(1<<62)/time.Microsecond) {
		return 0, fmt.Errorf("invalid %s %q", envWatchdogUsec, usec)
	}
	if wpid != "" {
		p, err := strconv.Atoi(wpid)
		if err != nil {
			return 0, fmt.Errorf("invalid %s %q", envWatchdogPID, wpid)
		}
		if p != pid {
			return 0, nil // meant for another process
		}
	}
	return time.Duration(u) * time.Microsecond, nil
}

// Enabled reports whether a service manager listens for notifications.
func (n *Notifier) Enabled() bool { return n.addr != nil }

// Ready tells systemd that start-up (or a reload) finished: READY=1, with
// status as the STATUS= line. Under Type=notify, systemd starts units
// ordered after remoted only once this is sent.
func (n *Notifier) Ready(status string) {
	n.send("READY=1", statusField(status))
}

// Status sets the one-line status `systemctl status` shows. Newlines are
// replaced by spaces and the text is cut at 512 bytes.
func (n *Notifier) Status(status string) {
	n.send(statusField(status))
}

// Reloading tells systemd a reload began (RELOADING=1 with MONOTONIC_USEC,
// as Type=notify-reload requires). Call Ready when it is done.
func (n *Notifier) Reloading() {
	n.send("RELOADING=1", monotonicUsec())
}

// Stopping tells systemd that shutdown began (STOPPING=1).
func (n *Notifier) Stopping() {
	n.send("STOPPING=1")
}

// WatchdogInterval is how often to call Watchdog: half of $WATCHDOG_USEC
// when the watchdog is enabled for this process ($WATCHDOG_PID unset or our
// pid) and notification is on; 0 means no watchdog.
func (n *Notifier) WatchdogInterval() time.Duration {
	if n.addr == nil {
		return 0
	}
	return n.watchdog
}

// Watchdog sends the keep-alive ping WATCHDOG=1. Call it from the loop whose
// progress it vouches for, every WatchdogInterval.
func (n *Notifier) Watchdog() {
	n.send("WATCHDOG=1")
}

// send writes one datagram of newline-separated fields. Empty fields are
// dropped.
func (n *Notifier) send(fields ...string) {
	if n.addr == nil {
		return
	}
	var b strings.Builder
	for _, f := range fields {
		if f != "" {
			b.WriteString(f)
			b.WriteByte('\n')
		}
	}
	err := sendDatagram(n.addr, b.String())
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case err != nil && !n.failed:
		n.failed = true
		n.log.Warn("notify systemd failed", "state", fields[0], "error", err)
	case err != nil:
		n.log.Debug("notify systemd failed", "state", fields[0], "error", err)
	case n.failed:
		n.failed = false
		n.log.Info("notify systemd works again")
	}
}

// errShortWrite: the kernel took part of a datagram, which should not happen.
var errShortWrite = errors.New("short write")

func sendDatagram(addr *net.UnixAddr, msg string) error {
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr.Name, err)
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
		return fmt.Errorf("set deadline on %s: %w", addr.Name, err)
	}
	k, err := conn.Write([]byte(msg))
	if err != nil {
		return fmt.Errorf("write %s: %w", addr.Name, err)
	}
	if k != len(msg) {
		return fmt.Errorf("write %s: %w", addr.Name, errShortWrite)
	}
	return nil
}

func statusField(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == 0 {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxStatus {
		s = s[:maxStatus]
		for len(s) > 0 && !utf8ValidEnd(s) {
			s = s[:len(s)-1]
		}
	}
	return "STATUS=" + s
}

// utf8ValidEnd reports whether s does not end inside a multi-byte rune.
func utf8ValidEnd(s string) bool {
	i := len(s) - 1
	for i >= 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	if i < 0 {
		return false
	}
	c := s[i]
	need := 1
	switch {
	case c >= 0xF0:
		need = 4
	case c >= 0xE0:
		need = 3
	case c >= 0xC0:
		need = 2
	}
	return len(s)-i == need
}

func monotonicUsec() string {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return ""
	}
	return "MONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10)
}
