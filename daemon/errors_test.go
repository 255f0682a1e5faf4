package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"remote/api"
	"remote/daemon/store"
)

func TestErrorFor(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		wantMsg    string
	}{
		{"api error", BadRequest("since: bad %q", "x"), http.StatusBadRequest, api.CodeBadRequest, `since: bad "x"`},
		{"prompt running", fmt.Errorf("chat a1b2: %w", ErrPromptAlreadyRunning), http.StatusConflict, api.CodePromptAlreadyRunning, ErrPromptAlreadyRunning.Error()},
		{"no active run", fmt.Errorf("cancel chat a1b2: %w", ErrNoActiveRun), http.StatusNotFound, api.CodeNotFound, ErrNoActiveRun.Error()},
		{"daemon not found", fmt.Errorf("chat %q: %w", "a1b2", ErrNotFound), http.StatusNotFound, api.CodeNotFound, `chat "a1b2": not found`},
		{"store not found", fmt.Errorf("project %q: %w", "none", store.ErrNotFound), http.StatusNotFound, api.CodeNotFound, `project "none": not found`},
		{"store exists", fmt.Errorf("create project %q: %w", "p", store.ErrExists), http.StatusConflict, api.CodeConflict, `create project "p": already exists`},
		{"store invalid", fmt.Errorf("project name %q: %w: want letters", "9x", store.ErrInvalid), http.StatusBadRequest, api.CodeBadRequest, `project name "9x": invalid input: want letters`},
		{"unavailable", fmt.Errorf("lxd: %w", ErrUnavailable), http.StatusServiceUnavailable, api.CodeUnavailable, "lxd: unavailable"},
		{"unknown is internal and hides its text", errors.New("secret-ish detail"), http.StatusInternalServerError, api.CodeInternal, "internal error"},
		{"store closed is internal", store.ErrClosed, http.StatusInternalServerError, api.CodeInternal, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := errorFor(tt.err)
			if status != tt.wantStatus || body.Code != tt.wantCode || body.Message != tt.wantMsg {
				t.Errorf("errorFor(%v) = %d %q %q, want %d %q %q", tt.err, status, body.Code, body.Message, tt.wantStatus, tt.wantCode, tt.wantMsg)
			}
		})
	}
}
