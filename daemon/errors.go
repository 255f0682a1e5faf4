package daemon

import (
	"errors"
	"fmt"
	"net/http"

	"remote/api"
)

// Error classes of the daemon. Handlers and the prompt service wrap them
// with %w; the single error mapping in writeError turns them into the JSON
// envelope of docs/api.md.
var (
	// ErrPromptAlreadyRunning means the chat already has a run (S2); it
	// answers 409 prompt_already_running.
	ErrPromptAlreadyRunning = errors.New("a previous prompt is still running — cancel first")
	// ErrNoActiveRun means a cancel or interaction response named a chat
	// with no run; it answers 404 not_found.
	ErrNoActiveRun = errors.New("no prompt is currently running")
	// ErrSlowSubscriber means a follower fell more than its queue behind
	// the live stream and was dropped; it may resume from its last seq.
	ErrSlowSubscriber = errors.New("subscriber too slow to keep up")
	// ErrNotFound means a chat (or another resource) does not exist or
	// belongs to another user; both answer the same 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the request conflicts with the current state.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable means a dependency (LXD, a provider) cannot serve now.
	ErrUnavailable = errors.New("unavailable")
)

// Error is a classified API error: the status, the envelope code and a
// human message (which must not contain secrets).
type Error struct {
	Status  int
	Code    string
	Message string
	Err     error // optional cause, for errors.Is/As
}

// Error returns the human message (the envelope's message).
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// BadRequest returns a 400 bad_request error; the message should name the
// offending field or value.
func BadRequest(format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// errorFor maps any error to its status and envelope. Unknown errors are
// internal and their text is not exposed.
func errorFor(err error) (int, api.ErrorBody) {
	var ae *Error
	switch {
	case errors.As(err, &ae):
		return ae.Status, api.ErrorBody{Code: ae.Code, Message: ae.Message}
	case errors.Is(err, ErrPromptAlreadyRunning): // the original frontend's exact texts
		return http.StatusConflict, api.ErrorBody{Code: api.CodePromptAlreadyRunning, Message: ErrPromptAlreadyRunning.Error()}
	case errors.Is(err, ErrNoActiveRun):
		return http.StatusNotFound, api.ErrorBody{Code: api.CodeNotFound, Message: ErrNoActiveRun.Error()}
	case errors.Is(err, ErrNotFound), isStoreNotFound(err):
		return http.StatusNotFound, api.ErrorBody{Code: api.CodeNotFound, Message: err.Error()}
	case errors.Is(err, ErrConflict), isStoreExists(err):
		return http.StatusConflict, api.ErrorBody{Code: api.CodeConflict, Message: err.Error()}
	case isStoreInvalid(err): // the store's own validation; its messages name the input
		return http.StatusBadRequest, api.ErrorBody{Code: api.CodeBadRequest, Message: err.Error()}
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable, api.ErrorBody{Code: api.CodeUnavailable, Message: err.Error()}
	case isStoreNoSpace(err): // a write hit ENOSPC/EDQUOT: nothing of it was stored
		return http.StatusInsufficientStorage, api.ErrorBody{Code: api.CodeStorageFull,
			Message: "storage full: the daemon's state directory has no space left, nothing was saved; free space, then retry"}
	default:
		return http.StatusInternalServerError, api.ErrorBody{Code: api.CodeInternal, Message: "internal error"}
	}
}
