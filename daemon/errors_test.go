package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"remote/api"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/provisioning"
)

func TestErrorFor(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		wantMsg    string
	}{
		{"api error", errdefs.InvalidArgument("since: bad %q", "x"), http.StatusBadRequest, api.CodeBadRequest, `since: bad "x"`},
		{"prompt running", fmt.Errorf("chat a1b2: %w", runhub.ErrPromptAlreadyRunning), http.StatusConflict, api.CodePromptAlreadyRunning, runhub.ErrPromptAlreadyRunning.Error()},
		{"no active run", fmt.Errorf("cancel chat a1b2: %w", runhub.ErrNoActiveRun), http.StatusNotFound, api.CodeNotFound, runhub.ErrNoActiveRun.Error()},
		{"daemon not found", fmt.Errorf("chat %q: %w", "a1b2", errdefs.ErrNotFound), http.StatusNotFound, api.CodeNotFound, `chat "a1b2": not found`},
		{"store not found", fmt.Errorf("project %q: %w", "none", store.ErrNotFound), http.StatusNotFound, api.CodeNotFound, `project "none": not found`},
		{"store exists", fmt.Errorf("create project %q: %w", "p", store.ErrExists), http.StatusConflict, api.CodeConflict, `create project "p": already exists`},
		{"store invalid", fmt.Errorf("project name %q: %w: want letters", "9x", store.ErrInvalid), http.StatusBadRequest, api.CodeBadRequest, `project name "9x": invalid input: want letters`},
		{"unavailable", fmt.Errorf("lxd: %w", errdefs.ErrUnavailable), http.StatusServiceUnavailable, api.CodeUnavailable, "lxd: unavailable"},
		{"unknown is internal and hides its text", errors.New("secret-ish detail"), http.StatusInternalServerError, api.CodeInternal, "internal error"},
		{"store closed is internal", store.ErrClosed, http.StatusInternalServerError, api.CodeInternal, "internal error"},
		{"daemon stopping is unavailable", fmt.Errorf("start prompt in chat a1b2: %w", errdefs.New(errdefs.ErrUnavailable, "the daemon is shutting down")), http.StatusServiceUnavailable, api.CodeUnavailable, "start prompt in chat a1b2: the daemon is shutting down"},
		{"store full", fmt.Errorf("append: %w: %w", store.ErrNoSpace, syscall.ENOSPC), http.StatusInsufficientStorage, api.CodeStorageFull, "storage full: the daemon's state directory has no space left, nothing was saved; free space, then retry"},
		{"exhausted", errdefs.ResourceExhausted("storage full: 1 MiB free"), http.StatusInsufficientStorage, api.CodeStorageFull, "storage full: 1 MiB free"},
		{"exhausted for now", errdefs.Wrap(errdefs.ErrUnavailable, errdefs.ResourceExhausted("storage: later")), http.StatusServiceUnavailable, api.CodeStorageFull, "storage: later"},
		{"lxd conflict marker", fmt.Errorf("create container: %w", lxdexec.ErrConflict), http.StatusConflict, api.CodeConflict, "create container: lxd: already exists"},
		{"provisioning conflict", fmt.Errorf("adopt: %w", provisioning.ErrForeignContainer), http.StatusConflict, api.CodeConflict, "adopt: container belongs to another project"},
		{"provisioning invalid", fmt.Errorf("skill: %w", provisioning.ErrBadSkill), http.StatusBadRequest, api.CodeBadRequest, "skill: invalid skill"},
		{"permission denied", errdefs.PermissionDenied("no"), http.StatusForbidden, api.CodeForbidden, "no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := ToHTTP(tt.err)
			if status != tt.wantStatus || body.Code != tt.wantCode || body.Message != tt.wantMsg {
				t.Errorf("ToHTTP(%v) = %d %q %q, want %d %q %q", tt.err, status, body.Code, body.Message, tt.wantStatus, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// asAPIError sets *ae to the answer ToHTTP gives for err (status, code and
// message as a client sees them); false for nil.
func asAPIError(err error, ae **Error) bool {
	if err == nil {
		return false
	}
	status, body := ToHTTP(err)
	*ae = &Error{Status: status, Code: body.Code, Message: body.Message}
	return true
}
