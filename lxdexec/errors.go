package lxdexec

import (
	"errors"
	"fmt"
	"net/http"

	"remote/lxdexec/lxdws"
)

// Error classes. Test with errors.Is; the concrete *Error (errors.As) carries
// the HTTP status and LXD's message. ErrNotFound, ErrConflict and
// ErrUnreachable (and an *Error of those classes) also carry marker methods
// (NotFound, Conflict, Unavailable) that a caller's error taxonomy
// recognises without this package importing it.
var (
	// ErrNotFound: the instance, operation, file, image alias or project
	// does not exist (HTTP 404, whatever LXD's wording).
	ErrNotFound error = &marked{"lxd: not found", classNotFound}
	// ErrConflict: the object already exists (HTTP 409, or LXD 5.0's
	// 202-then-failed operation saying "already exists").
	ErrConflict error = &marked{"lxd: already exists", classConflict}
	// ErrBusy: another operation (a stop, a start...) held the instance and
	// kept it past the wait (LXD: "Instance is busy running a ... operation").
	ErrBusy error = &marked{"lxd: instance busy", classConflict}
	// ErrPreconditionFailed: the If-Match ETag no longer matches (HTTP 412);
	// re-read and retry.
	ErrPreconditionFailed = errors.New("lxd: etag mismatch")
	// ErrForbidden: the client is not trusted or not allowed (HTTP 401/403).
	ErrForbidden = errors.New("lxd: not authorized")
	// ErrBadRequest: LXD refused the request as invalid (HTTP 400), e.g. an
	// unknown action, a bad name, or an exec on a stopped instance.
	ErrBadRequest = errors.New("lxd: bad request")
	// ErrOperationFailed: a background operation ended in Failure.
	ErrOperationFailed = errors.New("lxd: operation failed")
	// ErrOperationCancelled: a background operation ended Cancelled.
	ErrOperationCancelled = errors.New("lxd: operation cancelled")
	// ErrOperationForgotten: LXD no longer knew an operation this client
	// waited for (404 "Operation not found": it keeps a finished operation
	// only about 5 s, and none across a restart), so its result was never
	// read. WaitOperation returns it (matching ErrNotFound too). The
	// methods that start operations then check the instance or snapshot
	// instead, and return it only when that does not show the change done.
	ErrOperationForgotten = errors.New("lxd: operation forgotten before its result was read")
	// ErrAlreadyInState: a start found the instance already running, or a
	// stop found it already stopped.
	ErrAlreadyInState = errors.New("lxd: instance already in requested state")
	// ErrIsDirectory: PullFile was asked for a directory; use ListDir.
	ErrIsDirectory = errors.New("lxd: path is a directory")
	// ErrProtocol: LXD answered with something this client cannot decode.
	ErrProtocol = errors.New("lxd: protocol error")
	// ErrUnreachable: LXD could not be reached or the connection failed
	// (no socket, connection refused or reset, TLS or pinning failure);
	// LXD itself did not answer.
	ErrUnreachable error = &marked{"lxd: unreachable", classUnavailable}
	// ErrStreamBroken: an exec output stream ended without its end-of-stream
	// marker, so output may be incomplete.
	ErrStreamBroken = lxdws.ErrStreamBroken
)

// Error is an error LXD reported: an error envelope (StatusCode is the HTTP
// status / error_code) or a failed operation (StatusCode is the operation's
// err_code when the server sends one, else 0). Message is LXD's own text.
type Error struct {
	Method     string // request method, e.g. "POST"
	Path       string // request path without the query, e.g. "/1.0/instances"
	StatusCode int
	Message    string
	// class is an extra sentinel decided from context (e.g. a failed create
	// saying "already exists" is ErrConflict).
	class error
}

// Error formats the failing request, status and LXD's message.
func (e *Error) Error() string {
	where := e.Method + " " + e.Path
	if e.Method == "" {
		where = e.Path
	}
	if e.StatusCode != 0 {
		return fmt.Sprintf("lxd %s: %d %s", where, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("lxd %s: %s", where, e.Message)
}

// Is maps the HTTP status (and the class decided from context) to the
// sentinel errors of this package.
func (e *Error) Is(target error) bool {
	if e.class != nil && target == e.class {
		return true
	}
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrBusy:
		return MsgBusy.In(e.Message)
	case ErrPreconditionFailed:
		return e.StatusCode == http.StatusPreconditionFailed
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden || e.StatusCode == http.StatusUnauthorized
	case ErrBadRequest:
		return e.StatusCode == http.StatusBadRequest
	}
	return false
}

// The classes a marker method reports.
const (
	classNotFound = iota + 1
	classConflict
	classUnavailable
)

// marked is a sentinel error with marker methods for its class.
type marked struct {
	msg   string
	class int
}

func (m *marked) Error() string { return m.msg }

// NotFound reports whether this is ErrNotFound.
func (m *marked) NotFound() bool { return m.class == classNotFound }

// Conflict reports whether this is ErrConflict.
func (m *marked) Conflict() bool { return m.class == classConflict }

// Unavailable reports whether this is ErrUnreachable.
func (m *marked) Unavailable() bool { return m.class == classUnavailable }

// NotFound reports whether LXD answered that the object does not exist.
func (e *Error) NotFound() bool { return e.Is(ErrNotFound) }

// Conflict reports whether LXD answered that the object already exists or
// that another operation holds the instance.
func (e *Error) Conflict() bool { return e.Is(ErrConflict) || e.Is(ErrBusy) }
