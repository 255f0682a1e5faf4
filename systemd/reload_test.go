package systemd

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFaultReloadWithoutProcps runs the unit's ExecReload= as systemd
// would (${MAINPID} substituted) with no kill binary on PATH, as on a
// minimal Debian without procps: the old "/bin/kill -HUP $MAINPID" fails
// there, the shell's builtin kill delivers the SIGHUP.
func TestFaultReloadWithoutProcps(t *testing.T) {
	u := parseUnit(t, "remoted.service")
	cmd := u["Service"]["ExecReload"]
	if len(cmd) != 1 {
		t.Fatalf("ExecReload = %q", cmd)
	}
	line := strings.ReplaceAll(cmd[0], "${MAINPID}", strconv.Itoa(os.Getpid()))
	line = strings.ReplaceAll(line, "$MAINPID", strconv.Itoa(os.Getpid()))
	// Split as systemd does for this line: a binary, then words with
	// single-quoted ones kept whole.
	var argv []string
	for rest := line; rest != ""; {
		rest = strings.TrimLeft(rest, " ")
		if strings.HasPrefix(rest, "'") {
			end := strings.Index(rest[1:], "'")
			argv = append(argv, rest[1:1+end])
			rest = rest[2+end:]
			continue
		}
		w, r, _ := strings.Cut(rest, " ")
		argv = append(argv, w)
		rest = r
	}
	if argv[0] == "/bin/kill" || argv[0] == "/usr/bin/kill" {
		t.Fatalf("ExecReload=%s needs procps' kill binary", cmd[0])
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = []string{"PATH=" + t.TempDir()} // no kill binary anywhere
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%q: %v %s", argv, err, out)
	}
	select {
	case <-hup:
	case <-time.After(10 * time.Second):
		t.Fatal("no SIGHUP arrived")
	}
}
