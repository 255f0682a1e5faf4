package systemd

import (
	"os"
	"strconv"
	"strings"

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
