package daemon

import (
	"errors"
	"net/http"

	"remote/api"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/internal/errdefs"
)

// Error is an HTTP-layer API error whose status and envelope code are set
// explicitly: for what has no class in errdefs (no route, method not
// allowed, unsupported media type) and for the socket's own peer checks.
// Everything else is an errdefs class that ToHTTP maps. The message must
// not contain secrets.
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

// msgStorageFull is the answer to a store write that hit ENOSPC/EDQUOT: the
// store's own text names paths, this one names what to do.
const msgStorageFull = "storage full: the daemon's state directory has no space left, nothing was saved; free space, then retry"

// ToHTTP is the single mapping from errors to an HTTP status and the JSON
// envelope of the API. Unknown errors are internal and their text is not
// exposed.
//
//	*Error                            its own status and code
//	runhub.ErrPromptAlreadyRunning    409 prompt_already_running (fixed text)
//	runhub.ErrNoActiveRun             404 not_found (fixed text)
//	store.ErrNoSpace                  507 storage_full (fixed text)
//	errdefs not found                 404 not_found
//	errdefs conflict, already exists  409 conflict
//	errdefs invalid argument          400 bad_request
//	errdefs resource exhausted        507 storage_full (503 if also unavailable)
//	errdefs unavailable               503 unavailable
//	errdefs permission denied         403 forbidden
//	errdefs unauthenticated           401 unauthorized
//	errdefs failed precondition       409 conflict
//	anything else                     500 internal, "internal error"
func ToHTTP(err error) (int, api.ErrorBody) {
	var ae *Error
	body := func(code string) api.ErrorBody { return api.ErrorBody{Code: code, Message: err.Error()} }
	switch {
	case err == nil:
		return http.StatusOK, api.ErrorBody{}
	case errors.As(err, &ae):
		return ae.Status, api.ErrorBody{Code: ae.Code, Message: ae.Message}
	case errors.Is(err, runhub.ErrPromptAlreadyRunning): // the original frontend's exact texts
		return http.StatusConflict, api.ErrorBody{Code: api.CodePromptAlreadyRunning, Message: runhub.ErrPromptAlreadyRunning.Error()}
	case errors.Is(err, runhub.ErrNoActiveRun):
		return http.StatusNotFound, api.ErrorBody{Code: api.CodeNotFound, Message: runhub.ErrNoActiveRun.Error()}
	case errors.Is(err, store.ErrNoSpace): // a write hit ENOSPC/EDQUOT: nothing of it was stored
		return http.StatusInsufficientStorage, api.ErrorBody{Code: api.CodeStorageFull, Message: msgStorageFull}
	case errdefs.IsNotFound(err):
		return http.StatusNotFound, body(api.CodeNotFound)
	case errdefs.IsConflict(err):
		return http.StatusConflict, body(api.CodeConflict)
	case errdefs.IsInvalidArgument(err): // e.g. the store's own validation; its messages name the input
		return http.StatusBadRequest, body(api.CodeBadRequest)
	case errdefs.IsResourceExhausted(err) && errdefs.IsUnavailable(err):
		return http.StatusServiceUnavailable, body(api.CodeStorageFull)
	case errdefs.IsResourceExhausted(err):
		return http.StatusInsufficientStorage, body(api.CodeStorageFull)
	case errdefs.IsUnavailable(err):
		return http.StatusServiceUnavailable, body(api.CodeUnavailable)
	case errdefs.IsPermissionDenied(err):
		return http.StatusForbidden, body(api.CodeForbidden)
	case errdefs.IsUnauthenticated(err):
		return http.StatusUnauthorized, body(api.CodeUnauthorized)
	case errdefs.IsFailedPrecondition(err):
		return http.StatusConflict, body(api.CodeConflict)
	default:
		return http.StatusInternalServerError, api.ErrorBody{Code: api.CodeInternal, Message: "internal error"}
	}
}
