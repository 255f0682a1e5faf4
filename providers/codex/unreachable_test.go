package codex

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/internal/testkit/fakeopenai"
	"remote/providers"
)

// TestFaultCodexEndpointUnreachable runs the real Codex against a closed
// loopback port with retries on: each "Reconnecting... n/m" notice is a
// transient turn.status "retrying", never an error event, and the run ends
// with exactly one failure after the CLI gives up.
func TestFaultCodexEndpointUnreachable(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	conf := fakeopenai.CodexConfigTOML(fakeopenai.CodexConfig{BaseURL: closed})
	conf = strings.Replace(conf, "stream_max_retries = 0", "stream_max_retries = 2", 1)
	if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	e.p.opts.RetryLimit = 8 * time.Second
	rec := &recorder{cwd: e.cwd}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err = e.run(t, ctx, providers.RunRequest{Prompt: "hello"}, rec)
	seq := rec.sequence(t)
	t.Logf("err=%v\n%s", err, strings.Join(seq, "\n"))
	retries, errs, failed := 0, 0, 0
	for _, s := range seq {
		switch {
		case strings.HasPrefix(s, "turn.status status=retrying"):
			retries++
		case strings.HasPrefix(s, "error"):
			errs++
		case strings.HasPrefix(s, "run.failed"):
			failed++
		}
	}
	if retries < 1 || errs != 0 || failed != 1 {
		t.Errorf("%d retry statuses, %d error events, %d run.failed; want ≥1, 0, 1", retries, errs, failed)
	}
	last := seq[len(seq)-1]
	if !strings.HasPrefix(last, "run.failed status=failed message=codex could not reach its model endpoint: still retrying after 8s (Reconnecting... ") {
		t.Errorf("last event = %q", last)
	}
	if !errors.Is(err, providers.ErrRunFailed) {
		t.Errorf("run error = %v, want a run failure", err)
	}
}
