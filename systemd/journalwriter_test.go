package systemd

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestJournalWriterPriorities(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Name: "remoted", Level: hclog.Trace, DisableTime: true, Output: JournalWriter(&buf)})
	log.Error("e")
	log.Warn("w")
	log.Info("i")
	log.Debug("d")
	log.Trace("t")
	log.Warn("multi", "v", "line one\nline two")
	want := "<3>[ERROR] remoted: e\n" +
		"<4>[WARN]  remoted: w\n" +
		"<6>[INFO]  remoted: i\n" +
		"<7>[DEBUG] remoted: d\n" +
		"<7>[TRACE] remoted: t\n" +
		"<4>[WARN]  remoted: multi:\n<4>  v=\n<4>  | line one\n<4>  | line two\n<4>  \n"
	if got := buf.String(); got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}
