package systemd

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// UnderJournal reports whether stderr is connected to journald: systemd set
// $JOURNAL_STREAM to "device:inode" and stderr is still that stream (a
// child whose stderr was redirected inherits the variable but not the
// stream). Logs written there should carry no timestamps of their own:
// journald adds its own, with the level kept by the log line's text.
func UnderJournal() bool {
	return underJournal(os.Getenv(envJournalStream), int(os.Stderr.Fd()))
}

func underJournal(env string, fd int) bool {
	devStr, inoStr, ok := strings.Cut(env, ":")
	if !ok {
		return false
	}
	dev, err1 := strconv.ParseUint(devStr, 10, 64)
	ino, err2 := strconv.ParseUint(inoStr, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && uint64(st.Ino) == ino
}

// JournalWriter returns w (the daemon's stderr, connected to journald)
// with each log line prefixed by its syslog priority in sd-daemon's
// "<N>" form, so `journalctl -p warning` shows warnings: error 3, warn 4,
// info 6, debug and trace 7. hclog hands every entry's level to it
// (hclog.LevelWriter); a plain Write goes out as journald's default, info.
func JournalWriter(w io.Writer) io.Writer { return journalWriter{w} }

type journalWriter struct{ w io.Writer }

func (j journalWriter) Write(p []byte) (int, error) { return j.w.Write(p) }

// LevelWrite implements hclog.LevelWriter.
func (j journalWriter) LevelWrite(level hclog.Level, p []byte) (int, error) {
	prefix := "<" + strconv.Itoa(priority(level)) + ">"
	var b []byte
	for line := range bytes.Lines(p) {
		b = append(b, prefix...)
		b = append(b, line...)
	}
	if _, err := j.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// priority is the syslog priority of an hclog level.
func priority(level hclog.Level) int {
	switch {
	case level >= hclog.Error:
		return 3
	case level == hclog.Warn:
		return 4
	case level == hclog.Info, level == hclog.NoLevel, level == hclog.DefaultLevel:
		return 6
	default:
		return 7
	}
}
