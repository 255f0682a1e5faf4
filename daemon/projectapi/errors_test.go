package projectapi

import (
	"fmt"
	"net/http"
	"testing"

	"remote/api"
	"remote/daemon"
	"remote/lxdexec"
)

// TestProjectError: an unreachable LXD answers 503 unavailable naming LXD.
func TestProjectError(t *testing.T) {
	status, body := daemon.ToHTTP(projectError(fmt.Errorf("x: %w", lxdexec.ErrUnreachable)))
	if status != http.StatusServiceUnavailable || body.Code != api.CodeUnavailable || body.Message != "lxd is unreachable: x: lxd: unreachable" {
		t.Errorf("ToHTTP(projectError(unreachable)) = %d %q %q", status, body.Code, body.Message)
	}
	if err := projectError(nil); err != nil {
		t.Errorf("projectError(nil) = %v", err)
	}
}
